//! FP024: SQL Server Agent job steps that run T-SQL in this database. A step
//! runs unattended as its job's owner (often sysadmin), outside the
//! procedures: one whose text reaches the fence, or cannot be shown not to,
//! is a way in that no database grant shows.

use super::indirect_code::text_reach;
use super::{CannotVerify, Context, Finding, Report, Rule};

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
    for s in steps {
        let Some(command) = &s.command else {
            hidden.push(format!("{} (step {})", s.job, s.step_id));
            continue;
        };
        // Calling a shipped procedure is what the procedures are for.
        let how = text_reach(ctx, &s.job, command, false);
        if how.is_empty() {
            continue;
        }
        let owner = s.owner.as_deref().unwrap_or("an unknown login");
        report.findings.push(Finding {
            rule: Rule::AgentJob,
            principal: s.owner.clone(),
            object: format!("JOB::{}", s.job),
            permission: Some(format!("step {} ({}): {}", s.step_id, s.step, how.join(", "))),
            why: format!(
                "the Agent job {} runs T-SQL in this database as its owner {owner}, outside the procedures, and its \
                 step {} reaches the fence or runs SQL built at run time ({}): review it, and who may edit the job",
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
    }
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
}
