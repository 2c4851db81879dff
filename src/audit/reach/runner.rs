//! The code that runs as someone other than whoever changes it, with what
//! it runs: database DDL triggers (on the deploy's DDL, as that member of
//! db_owner, unless EXECUTE AS), server triggers (on a sysadmin's DDL, as
//! that login), T-SQL job steps in this database (as their owner, or as the
//! Agent's sysadmin login for a sysadmin's job), activation procedures (as
//! their queue's EXECUTE AS principal).

use super::super::catalog::{ExecuteAs, ObjectKind};
use super::super::rules::{Context, server_holders};
use super::node::Node;
use crate::tsql::{quote_name, quote_qualified};

/// Code that runs as `runs_as`, with its text.
pub(super) struct Runner {
    /// `the DDL trigger audit_ddl`, `job Nightly step 1`.
    pub(super) what: String,
    pub(super) text: String,
    pub(super) runs_as: Node,
    /// How it comes to run as that principal.
    pub(super) why: String,
    pub(super) evidence: String,
    pub(super) cut: String,
    /// What qualifies a name of this database in its text: nothing, or
    /// `orders.` for code that runs in another database (a server trigger
    /// resolves two-part names in master).
    pub(super) prefix: String,
}

/// Who a database DDL trigger runs as when the deploy fires it.
pub(super) fn ddl_runner(ctx: &Context) -> Option<Node> {
    ["db_owner", "dbo"]
        .into_iter()
        .find(|p| ctx.principal(p).is_some())
        .map(Node::principal)
}

/// Every runner the catalog shows, with its text.
pub(super) fn all(ctx: &Context) -> Vec<Runner> {
    let mut out = Vec::new();
    if let Some(admin) = ddl_runner(ctx) {
        for t in ctx
            .catalog
            .objects
            .iter()
            .filter(|o| o.kind == ObjectKind::DatabaseTrigger)
        {
            let Some(text) = &t.definition else { continue };
            // A DDL trigger has no owner: EXECUTE AS names a user or CALLER.
            let named = match t.runs_as() {
                Some(ExecuteAs::Principal(user)) => Some(user),
                _ => None,
            };
            let (runs_as, why) = match named {
                Some(user) => (Node::principal(user), format!("which runs as {user} (EXECUTE AS)")),
                None => (
                    admin.clone(),
                    "which fires on the deploy's DDL and runs as that member of db_owner".to_string(),
                ),
            };
            out.push(Runner {
                what: format!("the DDL trigger {}", t.name),
                text: text.clone(),
                runs_as,
                why,
                evidence: format!("sys.triggers: {} ON DATABASE", t.name),
                cut: format!("DROP TRIGGER {} ON DATABASE;", quote_name(&t.name)),
                prefix: String::new(),
            });
        }
    }
    if let Some(triggers) = ctx.catalog.server.as_ref().and_then(|s| s.triggers.as_ref()) {
        for t in triggers {
            let Some(text) = &t.definition else { continue };
            out.push(Runner {
                what: format!("the server trigger {}", t.name),
                text: text.clone(),
                runs_as: Node::server_role("sysadmin"),
                why: "which fires for every login, sysadmins included, and runs as whoever fired it".into(),
                evidence: format!("sys.server_triggers: {}", t.name),
                cut: format!("DROP TRIGGER {} ON ALL SERVER;", quote_name(&t.name)),
                prefix: format!("{}.", ctx.catalog.database),
            });
        }
    }
    jobs(ctx, &mut out);
    queues(ctx, &mut out);
    execute_as(ctx, &mut out);
    out
}

/// A module WITH EXECUTE AS a principal other than its caller runs what it
/// calls in that principal's context: a synonym or procedure it names is
/// code of whoever may change it, run as that principal.
fn execute_as(ctx: &Context, out: &mut Vec<Runner>) {
    for m in ctx.catalog.objects.iter().filter(|o| o.kind.is_module()) {
        let (Some(how), Some(as_whom), Some(text)) = (m.runs_as(), m.execute_as.as_deref(), m.definition.as_deref())
        else {
            continue;
        };
        let runs_as = match how {
            ExecuteAs::Owner => ctx.catalog.owner_of(m),
            ExecuteAs::Principal(p) => Some(p),
        };
        let Some(runs_as) = runs_as else { continue };
        let name = m.qualified_name();
        out.push(Runner {
            what: name.clone(),
            text: text.to_string(),
            runs_as: Node::principal(runs_as),
            why: format!("which runs as {runs_as} (EXECUTE AS {as_whom})"),
            evidence: format!("sys.sql_modules: {name} has execute_as {as_whom}"),
            cut: format!(
                "ALTER {} {} ... WITH EXECUTE AS CALLER, or name what it calls by an object {runs_as} owns",
                if m.kind == ObjectKind::Function {
                    "FUNCTION"
                } else {
                    "PROCEDURE"
                },
                quote_qualified(&m.schema, &m.name)
            ),
            prefix: String::new(),
        });
    }
}

/// A T-SQL job step in this database runs as its owner, or as the Agent's
/// sysadmin login when its owner is sysadmin.
fn jobs(ctx: &Context, out: &mut Vec<Runner>) {
    let here = &ctx.catalog.database;
    for s in ctx.catalog.job_steps.iter().flatten() {
        let (Some(owner), Some(text)) = (s.owner.as_deref(), s.command.as_deref()) else {
            continue;
        };
        if s.database.as_deref().is_some_and(|d| !d.eq_ignore_ascii_case(here)) {
            continue;
        }
        let sysadmin = ctx.catalog.server.as_ref().is_some_and(|server| {
            server_holders(server, owner)
                .iter()
                .any(|h| h.eq_ignore_ascii_case("sysadmin"))
        });
        let (runs_as, why) = match (sysadmin, s.run_as_user.as_deref()) {
            (true, Some(user)) => (
                Node::principal(user),
                format!("which runs as {user} (its database_user_name)"),
            ),
            (true, None) => (
                Node::server_role("sysadmin"),
                format!("which runs as the Agent's sysadmin login, its owner {owner} being sysadmin"),
            ),
            (false, _) => (Node::login(owner), format!("which runs as its owner {owner}")),
        };
        out.push(Runner {
            what: format!("step {} of job {}", s.step_id, s.job),
            text: text.to_string(),
            runs_as,
            why,
            evidence: format!(
                "msdb.dbo.sysjobsteps: job {} step {} ({}), owned by {owner}",
                s.job, s.step_id, s.step
            ),
            cut: format!(
                "EXEC msdb.dbo.sp_delete_jobstep @job_name = N'{}', @step_id = {};",
                s.job.replace('\'', "''"),
                s.step_id
            ),
            prefix: String::new(),
        });
    }
}

/// An activation procedure runs as its queue's EXECUTE AS principal.
fn queues(ctx: &Context, out: &mut Vec<Runner>) {
    for q in ctx.catalog.activated_queues.iter().flatten() {
        let runs_as = match q.runs_as() {
            Some(ExecuteAs::Owner) => ctx
                .catalog
                .object(&q.procedure)
                .and_then(|o| ctx.catalog.owner_of(o))
                .map(str::to_string),
            Some(ExecuteAs::Principal(p)) => Some(p.to_string()),
            None => None,
        };
        let Some(runs_as) = runs_as else { continue };
        let (schema, name) = q.name.split_once('.').unwrap_or(("dbo", &q.name));
        out.push(Runner {
            what: format!("queue {}'s activation", q.name),
            // The procedure itself is what it runs.
            text: format!("EXEC {}", q.procedure),
            runs_as: Node::principal(&runs_as),
            why: format!("which runs it as {runs_as} on every message"),
            evidence: format!("sys.service_queues: {} activates {} as {runs_as}", q.name, q.procedure),
            cut: format!("ALTER QUEUE {} WITH ACTIVATION (DROP);", quote_qualified(schema, name)),
            prefix: String::new(),
        });
    }
}
