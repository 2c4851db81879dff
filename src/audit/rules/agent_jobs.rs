//! FP024: SQL Server Agent job steps that run T-SQL in this database. A step
//! runs unattended outside the procedures: one whose text reaches the fence,
//! or cannot be shown not to, is a way in that no database grant shows. A
//! step that is harmless today is one too when it runs privileged and
//! someone who is not an administrator may rewrite it.
//!
//! Who runs a T-SQL step: a sysadmin owner's step runs as the Agent's own
//! sysadmin login, or as the step's `database_user_name` when a sysadmin set
//! one; any other owner's step runs as that owner. Who may rewrite it: the
//! Agent's procedures (sp_update_jobstep, sp_update_job) let members of
//! msdb's SQLAgentUserRole, SQLAgentReaderRole and SQLAgentOperatorRole edit
//! only the jobs they own (the operator role also starts, enables and
//! disables others' jobs, which runs them unchanged), and only sysadmin edits
//! another's job or changes an owner. An owner editing its own job gains
//! nothing: it runs as that owner. Beside the procedures, whoever may write
//! msdb's job tables (its db_owner or db_datawriter, INSERT or UPDATE there)
//! rewrites any step, or any job's owner, directly.

use super::super::catalog::JobStep;
use super::super::module_text::{contains_words, dynamic_constructs, normalized, referenced_tables, same_name, words};
use super::indirect_code::text_reach;
use super::modules::fence_references;
use super::server_rights::{is_admin_login, is_privileged};
use super::{CannotVerify, Context, Finding, Report, Rule};
use crate::tsql::{code_only, quote_name, without_comments};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let Some(steps) = &ctx.catalog.job_steps else {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::AgentJob,
            reason: if ctx.catalog.engine.chains_ownership {
                "SQL Server Agent job steps (msdb.dbo.sysjobsteps) could not be read, and a T-SQL step runs in \
                 this database as its job's owner"
                    .into()
            } else {
                format!(
                    "{} has no SQL Server Agent catalog (msdb.dbo.sysjobsteps), and keeps scheduled jobs (pg_cron) \
                     in PostgreSQL's catalog, which this check does not read",
                    ctx.catalog.engine.product
                )
            },
        });
        return;
    };
    let mut hidden = Vec::new();
    let mut unknown = Vec::new();
    let mut privileged = Vec::new();
    for s in steps {
        let Some(command) = &s.command else {
            hidden.push(format!("{} (step {})", s.job, s.step_id));
            continue;
        };
        let how = reach(ctx, s, command);
        let runs = runs_as(ctx, s);
        if !how.is_empty() {
            let owner = s.owner.as_deref().unwrap_or("an unknown login");
            let runs = match &runs {
                RunsAs::Privileged(as_whom) => format!("runs {as_whom}"),
                _ => format!("runs as its owner {owner}"),
            };
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::AgentJob,
                principal: s.owner.clone(),
                object: format!("JOB::{}", s.job),
                permission: Some(format!("step {} ({}): {}", s.step_id, s.step, how.join(", "))),
                why: format!(
                    "the Agent job {} {runs} in this database, outside the procedures, and its step {} reaches the \
                     fence or runs SQL built at run time ({}): review it, and who may edit the job",
                    s.job,
                    s.step,
                    how.join(", ")
                ),
                fix: format!(
                    "EXEC msdb.dbo.sp_delete_jobstep @job_name = N'{}', @step_id = {};",
                    s.job.replace('\'', "''"),
                    s.step_id
                ),
            });
            continue;
        }
        match runs {
            RunsAs::Unknown(why) => unknown.push(format!("{} (step {}): {why}", s.job, s.step_id)),
            RunsAs::Privileged(as_whom) => privileged.push(format!("step {} of {} runs {as_whom}", s.step_id, s.job)),
            RunsAs::Itself => {}
        }
    }
    editors(ctx, &privileged, report);
    if !hidden.is_empty() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::AgentJob,
            reason: format!(
                "the command of Agent job step{} {} could not be read",
                if hidden.len() == 1 { "" } else { "s" },
                hidden.join(", ")
            ),
        });
    }
    for reason in unknown {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::AgentJob,
            reason: format!("the Agent job step {reason}"),
        });
    }
}

/// Who may write msdb's job tables without being an administrator already:
/// each may make the Agent run T-SQL of their choosing as sysadmin, by
/// rewriting a sysadmin-owned job's step or pointing a job's owner at a
/// sysadmin login, and so write the fence tables here.
fn editors(ctx: &Context, privileged: &[String], report: &mut Report) {
    let Some(editors) = &ctx.catalog.job_editors else {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::AgentJob,
            reason: "who may write msdb's job tables (its db_owner and db_datawriter, INSERT or UPDATE on \
                     dbo.sysjobsteps and dbo.sysjobs) could not be read in full: that needs sysadmin or VIEW \
                     DEFINITION in msdb, and whoever may makes the Agent run any T-SQL as sysadmin"
                .into(),
        });
        return;
    };
    let here = if privileged.is_empty() {
        String::new()
    } else {
        format!("; here {}", privileged.join(", "))
    };
    let mut named: Vec<&str> = Vec::new();
    for e in editors {
        if e.login.as_deref().is_some_and(|l| is_admin_login(ctx, l))
            || named.iter().any(|u| u.eq_ignore_ascii_case(&e.user))
        {
            continue;
        }
        named.push(&e.user);
        let everyone = e.login.is_none() && is_everyone(&e.user);
        let who = if everyone {
            format!("every login (through msdb's {})", e.user)
        } else {
            e.login.clone().unwrap_or_else(|| format!("msdb's user {}", e.user))
        };
        let through = if e.holder.eq_ignore_ascii_case(&e.user) {
            String::new()
        } else {
            format!(" through {}", e.holder)
        };
        let fix = if e.via_role {
            format!(
                "USE msdb; ALTER ROLE {} DROP MEMBER {};",
                quote_name(&e.via),
                quote_name(&e.holder)
            )
        } else {
            format!("USE msdb; REVOKE {} FROM {};", e.via, quote_name(&e.holder))
        };
        report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::AgentJob,
            principal: Some(if everyone || e.login.is_none() {
                e.user.clone()
            } else {
                who.clone()
            }),
            object: "DATABASE::msdb".into(),
            permission: Some(if e.changes_packages() {
                format!("changes the packages the Agent runs through {}{through}{here}", e.via)
            } else {
                format!("writes the Agent's job tables through {}{through}{here}", e.via)
            }),
            why: if e.changes_packages() {
                format!(
                    "{who} may change the Integration Services packages and data collection sets in msdb ({}\
                     {through}) that SQL Server Agent runs as sysadmin: the documentation warns that members of \
                     db_ssisadmin and dc_admin \"may be able to elevate their privileges to sysadmin\", in this \
                     database too{here}",
                    e.via
                )
            } else {
                format!(
                    "{who} may write msdb's job tables ({}{through}), past the Agent's own check that only sysadmin \
                     edits another's job: by rewriting a sysadmin-owned job's step, or pointing a job's owner at a \
                     sysadmin login, it has the Agent run T-SQL of its choosing as sysadmin, in this database too\
                     {here}",
                    e.via
                )
            },
            fix,
        });
    }
}

/// As whom a step runs, as far as it matters to who may rewrite it.
enum RunsAs {
    /// As its owner, who may rewrite it and gains nothing by that.
    Itself,
    /// As someone who may write the fence or act as a service: `as ...`.
    Privileged(String),
    /// The catalog cannot show which.
    Unknown(String),
}

fn runs_as(ctx: &Context, s: &JobStep) -> RunsAs {
    // Without an owner the Agent does not run it; only sysadmin may edit it.
    let Some(owner) = s.owner.as_deref() else {
        return RunsAs::Itself;
    };
    // Without the server's roles, whether the owner is sysadmin is unknown;
    // either way only the owner and sysadmin may edit it through the Agent,
    // and the owner gains nothing by it.
    if ctx
        .catalog
        .server
        .as_ref()
        .is_some_and(|server| is_privileged(server, owner))
    {
        return match s.run_as_user.as_deref() {
            None => RunsAs::Privileged(format!("as the Agent's sysadmin login (its owner {owner} is sysadmin)")),
            Some(user) => match strong(ctx, user) {
                Some(what) => RunsAs::Privileged(format!("as {user}, {what} (its database_user_name)")),
                // A user with no more than its grants: the other rules weigh them.
                None => RunsAs::Itself,
            },
        };
    }
    if let Some((user, what)) = s.run_as_user.as_deref().and_then(|u| strong(ctx, u).map(|w| (u, w))) {
        // The owner may rewrite it; the Agent documents the step's user only
        // for a sysadmin-owned job (a sysadmin set it, then the owner changed).
        return RunsAs::Unknown(format!(
            "its database_user_name is {user}, {what}, while its owner {owner}, who may rewrite it, is not \
             sysadmin: whether it runs as {user} or as {owner}, the catalog cannot show"
        ));
    }
    match ctx
        .catalog
        .principal_or_login(owner)
        .and_then(|u| strong(ctx, &u.name).map(|w| (u, w)))
    {
        Some((user, what)) => RunsAs::Privileged(format!("as its owner {owner}, who enters as {}, {what}", user.name)),
        None => RunsAs::Itself,
    }
}

/// Why running as `user` reaches the fence or a service, if it does.
fn strong(ctx: &Context, user: &str) -> Option<&'static str> {
    if ctx.is_admin(user) {
        Some("which is db_owner here")
    } else if ctx.is_service(user) || !ctx.services_reached_by(user).is_empty() {
        Some("a service principal")
    } else {
        None
    }
}

fn is_everyone(user: &str) -> bool {
    user.eq_ignore_ascii_case("public") || user.eq_ignore_ascii_case("guest")
}

/// What a step's command reaches in this database. A step that runs in
/// another database reaches this one only where it says so: `USE` this
/// database, or three-part names in it; its two-part names are the other
/// database's.
fn reach(ctx: &Context, s: &JobStep, command: &str) -> Vec<String> {
    let here = &ctx.catalog.database;
    let elsewhere = s.database.as_deref().is_some_and(|d| !d.eq_ignore_ascii_case(here));
    if !elsewhere || uses(command, here) {
        return text_reach(ctx, &s.job, command, false);
    }
    let fence = &ctx.policy.fence_schema;
    let prefix = |schema: &str| format!("{here}.{schema}");
    let mut how: Vec<String> = referenced_tables(command, &prefix(fence), ctx.fence_tables())
        .into_iter()
        .map(|t| format!("{here}.{fence}.{t}"))
        .collect();
    for o in ctx
        .catalog
        .objects
        .iter()
        .filter(|o| o.kind.is_module() && !ctx.is_shipped(o))
    {
        if referenced_tables(command, &prefix(&o.schema), [&o.name]).is_empty() {
            continue;
        }
        let reached = fence_references(ctx, o);
        if !reached.is_empty() {
            how.push(format!(
                "calls {here}.{}, which reaches {}",
                o.qualified_name(),
                reached.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    // SQL built at run time in a step that names this database may run here.
    if contains_words(&normalized(&without_comments(command)), &normalized(here)) {
        how.extend(dynamic_constructs(command).into_iter().map(String::from));
    }
    how
}

/// Whether `command` switches to database `db` (`USE db`).
fn uses(command: &str, db: &str) -> bool {
    let words = words(&code_only(command));
    words.windows(2).any(|w| w[0] == "use" && same_name(&w[1], db))
}
