//! FP028, and what FP027 needs read: the ways out of T-SQL are each named as
//! "cannot verify", with what they run as, because what an operating-system
//! account, CLR code or a remote connection may do here no catalog view
//! connects to a principal; a part that could not be read names the view or
//! right that would show it. The expressions on the tables and the keys'
//! owners feed FP027's graph, and their absence leaves it unproven.

use super::super::catalog::{OutsideItem, OutsideKind};
use super::{CannotVerify, Context, Report, Rule};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let mut cannot = |rule: Rule, reason: String| report.cannot_verify.push(CannotVerify { rule, reason });
    match &ctx.catalog.outside_tsql {
        None => cannot(
            Rule::OutsideTsql,
            "the ways out of T-SQL (Agent steps of other subsystems, xp_cmdshell, start-up procedures, assemblies, \
             external data sources) could not be read: the checking login needs VIEW ANY DEFINITION, SELECT on \
             msdb.dbo.sysjobsteps and msdb.dbo.sysproxies, and VIEW DEFINITION on this database"
                .into(),
        ),
        Some(outside) => {
            for u in &outside.unread {
                cannot(Rule::OutsideTsql, format!("{} could not be read: {}", u.what, u.needs));
            }
            for item in &outside.items {
                cannot(Rule::OutsideTsql, describe(item));
            }
        }
    }
    if ctx.catalog.table_expressions.is_none() {
        cannot(
            Rule::ReachesFence,
            "CHECK and DEFAULT constraints and computed columns (sys.check_constraints, sys.default_constraints, \
             sys.computed_columns) could not be read: a function one of them calls on a fence table runs inside \
             every fence write (the checking login needs VIEW DEFINITION on the database)"
                .into(),
        );
    }
    if ctx.catalog.assemblies.is_none() && ctx.catalog.objects.iter().any(|o| o.assembly.is_some()) {
        cannot(
            Rule::ReachesFence,
            "the owners of the assemblies that hold CLR modules' code (sys.assemblies) could not be read: an owner \
             replaces a module's code with ALTER ASSEMBLY (the checking login needs VIEW DEFINITION on the database)"
                .into(),
        );
    }
    if ctx.catalog.signing_keys.is_none() {
        cannot(
            Rule::ReachesFence,
            "the owners of certificates and asymmetric keys (sys.certificates, sys.asymmetric_keys) could not be \
             read: an owner signs modules with its key's rights (the checking login needs VIEW DEFINITION on the \
             database)"
                .into(),
        );
    }
}

fn describe(item: &OutsideItem) -> String {
    let detail = item.detail.as_deref().unwrap_or("");
    match item.kind {
        OutsideKind::AgentStep => format!(
            "SQL Server Agent job step {} runs {detail}: an operating-system process that may sign in to this server \
             as that Windows account, whose logins and groups no catalog view connects to it (check the account's \
             logins, and who may edit the job or use the proxy: msdb.dbo.sysproxylogin)",
            item.name
        ),
        OutsideKind::XpCmdshell => format!(
            "{} may run operating-system commands through xp_cmdshell ({detail}): what that account may do here \
             the catalog cannot tell (REVOKE EXECUTE ON xp_cmdshell FROM {} in master, or turn xp_cmdshell off)",
            item.name, item.name
        ),
        OutsideKind::StartupProcedure => format!(
            "{} runs at every start of the server as sysadmin: whoever may alter it in master acts as sysadmin, and \
             master's permissions are not read (sp_procoption '{}', 'startup', 'off' if it is not needed)",
            item.name, item.name
        ),
        OutsideKind::Assembly => format!(
            "assembly {} has permission set {detail}: its code runs outside T-SQL and may connect back to this \
             server as the service account, which no catalog view shows (ALTER ASSEMBLY ... WITH PERMISSION_SET = \
             SAFE)",
            item.name
        ),
        OutsideKind::ExternalDataSource => format!(
            "external data source {} ({detail}) connects out of the database as its credential: whether that is \
             this server, or a copy of it, the catalog cannot tell (DROP EXTERNAL DATA SOURCE if it is not needed)",
            item.name
        ),
    }
}
