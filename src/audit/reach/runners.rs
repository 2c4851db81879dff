//! Code that runs as someone other than whoever changes it: a database DDL
//! trigger fires on the deploy's DDL and runs as that member of db_owner; a
//! server trigger fires on a sysadmin's; a job step runs as its owner, or as
//! the Agent's sysadmin login for a sysadmin's job; an activation procedure
//! runs as its queue's EXECUTE AS principal; a module WITH EXECUTE AS runs
//! as that principal. Whoever may change what such code calls (ALTER by the
//! hierarchy, owning its schema; for a synonym, re-creating it elsewhere)
//! reaches what its runner reaches. Code that builds SQL at run time runs
//! whatever it is handed, with its runner's rights.

use super::super::catalog::{ExecuteAs, Object, ObjectKind, Securable};
use super::super::module_text::{contains_words, dynamic_constructs, normalized};
use super::super::rules::Context;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::module_change;
use super::node::Node;
use super::principals::hierarchy_note;
use super::right::Right;
use super::run_time_sql::run_time_sql;
use super::runner::{Runner, all as runners, ddl_runner};
use super::{callers, denies};
use crate::tsql::{code_only, quote_name, without_comments};

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    let runners: Vec<Runner> = runners(ctx);
    let mut changed: Vec<&Object> = Vec::new();
    for r in &runners {
        let code = if dynamic_constructs(&r.text).is_empty() {
            code_only(&r.text)
        } else {
            r.text.clone()
        };
        // Read once: a generated module may be hundreds of kilobytes.
        let code = normalized(&without_comments(&code));
        for c in ctx.catalog.objects.iter().filter(|o| callable(ctx, o)) {
            let name = c.qualified_name();
            // A module's own name in its CREATE is not a call.
            if name.eq_ignore_ascii_case(&r.what)
                || !contains_words(&code, &normalized(&format!("{}{}.{}", r.prefix, c.schema, c.name)))
            {
                continue;
            }
            graph.add(
                Node::code(&name),
                &name,
                Edge::new(
                    r.runs_as.clone(),
                    Kind::Acts,
                    format!("{name} is run by {}, {}", r.what, r.why),
                    format!("{}; it names {name}", r.evidence),
                    r.cut.clone(),
                ),
            );
            if !changed.iter().any(|o| std::ptr::eq(*o, c)) {
                changed.push(c);
            }
        }
    }
    for c in &changed {
        let name = c.qualified_name();
        let how = if c.kind == ObjectKind::Synonym {
            "may drop it and create it again pointing at code of its own"
        } else {
            "may rewrite it"
        };
        for right in rights {
            let Some((alter, unless)) = module_change::alters(ctx, right, c) else {
                continue;
            };
            graph.add(
                right.node(),
                &right.holder,
                Edge::new(
                    Node::code(&name),
                    Kind::Acts,
                    format!("{alter}: {how}"),
                    right.evidence.clone(),
                    right.cut.clone(),
                )
                .unless(unless),
            );
        }
    }
    ddl_trigger_rights(ctx, rights, graph);
    dynamic_as(ctx, rights, graph);
    job_editors(ctx, graph);
}

/// Whoever may write msdb's job tables rewrites any job's step, or points a
/// job's owner at a sysadmin login, past the Agent's own checks: the Agent
/// then runs its T-SQL as sysadmin. Whoever may change the packages the
/// Agent runs (db_ssisadmin, dc_admin) has them run as sysadmin likewise.
fn job_editors(ctx: &Context, graph: &mut Graph) {
    for e in ctx.catalog.job_editors.iter().flatten() {
        let Some(login) = e.login.as_deref() else { continue };
        graph.actor(Node::login(login), login);
        graph.add(
            Node::login(login),
            login,
            Edge::new(
                Node::server_role("sysadmin"),
                Kind::Acts,
                if e.changes_packages() {
                    format!(
                        "member of msdb's {}: may change the Integration Services packages and collection sets \
                         that SQL Server Agent runs as sysadmin (\"Integration Services Roles\": its members \"may \
                         be able to elevate their privileges to sysadmin\")",
                        e.via
                    )
                } else {
                    format!(
                        "writes msdb's job tables through {}: may point a job's owner at a sysadmin login and have \
                         the Agent run T-SQL of its choosing as sysadmin",
                        e.via
                    )
                },
                format!("msdb: user {} ({login}) holds {} through {}", e.user, e.via, e.holder),
                if e.via_role {
                    format!(
                        "USE msdb; ALTER ROLE {} DROP MEMBER {};",
                        quote_name(&e.via),
                        quote_name(&e.holder)
                    )
                } else {
                    format!("USE msdb; REVOKE {} FROM {};", e.via, quote_name(&e.holder))
                },
            ),
        );
    }
}

/// A module WITH EXECUTE AS another principal that builds SQL at run time
/// runs whatever its caller hands it as that principal: whoever may execute
/// it reaches what that principal reaches ([`super::run_time_sql`]).
fn dynamic_as(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    for m in ctx.catalog.objects.iter().filter(|o| callable(ctx, o)) {
        let (Some(how), Some(as_whom), Some(text)) = (m.runs_as(), m.execute_as.as_deref(), m.definition.as_deref())
        else {
            continue;
        };
        let runs_as = match how {
            ExecuteAs::Owner => ctx.catalog.owner_of(m),
            ExecuteAs::Principal(p) => Some(p),
        };
        let (Some(runs_as), Some(construct)) = (runs_as, run_time_sql(text).arbitrary) else {
            continue;
        };
        let name = m.qualified_name();
        graph.add(
            Node::code(&name),
            &name,
            Edge::new(
                Node::principal(runs_as),
                Kind::Acts,
                format!("{name} runs as {runs_as} (EXECUTE AS) and builds SQL at run time ({construct}): it runs whatever it is handed as {runs_as}"),
                format!("sys.sql_modules: {name} has execute_as {as_whom} and contains {construct}"),
                format!("ALTER the module to run as CALLER, or drop {name}"),
            ),
        );
        callers::edges(ctx, rights, graph, m);
    }
}

/// Modules and synonyms outside the shipped code: those are the goal's own.
pub(super) fn callable(ctx: &Context, o: &Object) -> bool {
    (o.kind.is_module() || o.kind == ObjectKind::Synonym)
        && o.kind != ObjectKind::DatabaseTrigger
        && !o.schema.is_empty()
        && !ctx.is_shipped(o)
}

/// Whoever may create a database DDL trigger reaches whoever runs DDL here:
/// the deploy's migrations, as a member of db_owner.
fn ddl_trigger_rights(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    let Some(admin) = ddl_runner(ctx) else { return };
    for right in rights.iter().filter(|r| r.permission.on == Securable::Database) {
        let Some(unless) = denies::reaches(ctx, right, &Securable::Database, "ALTER ANY DATABASE DDL TRIGGER") else {
            continue;
        };
        graph.add(
            right.node(),
            &right.holder,
            Edge::new(
                admin.clone(),
                Kind::Acts,
                format!(
                    "ALTER ANY DATABASE DDL TRIGGER{}: a DDL trigger it creates runs as whoever runs DDL here, the \
                     deploy's migrations as a member of db_owner",
                    hierarchy_note(ctx, right, "ALTER ANY DATABASE DDL TRIGGER", "the database")
                ),
                right.evidence.clone(),
                right.cut.clone(),
            )
            .unless(unless),
        );
    }
}
