//! FP028, and what FP027 needs read: the ways out of T-SQL are each named as
//! "cannot verify", with what they run as, because what an operating-system
//! account, CLR code or a remote connection may do here no catalog view
//! connects to a principal; a part that could not be read names the view or
//! right that would show it. The expressions on the tables and the keys'
//! owners feed FP027's graph, and their absence leaves it unproven.

use super::super::catalog::{OutsideItem, OutsideKind, ProxyUserKind};
use super::super::hierarchy::implies;
use super::{CannotVerify, Context, Report, Rule, is_server_role};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    proxies(ctx, report);
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
                cannot(Rule::OutsideTsql, describe(item, &settings_holders(ctx)));
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
    if ctx.catalog.foreign_keys.is_none() {
        cannot(
            Rule::ReachesFence,
            "foreign keys (sys.foreign_keys, sys.foreign_key_columns) could not be read: a DELETE or UPDATE of a \
             table that a fence table's key references with ON DELETE or ON UPDATE CASCADE, SET NULL or SET \
             DEFAULT writes fence rows with no permission checked on them (the checking login needs VIEW \
             DEFINITION on the database)"
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

/// Who may turn a server option on (ALTER SETTINGS, granted or through
/// serveradmin, or CONTROL SERVER), as a finding names them: `login x`,
/// `server role serveradmin`; `None` when the server facts are unread.
fn settings_holders(ctx: &Context) -> Option<Vec<String>> {
    let server = ctx.catalog.server.as_ref()?;
    let mut holders: Vec<String> = server
        .permissions
        .iter()
        .filter(|p| p.on_login.is_none() && implies("SERVER", &p.permission, "SERVER", "ALTER SETTINGS"))
        .map(|p| {
            let kind = if is_server_role(server, &p.grantee) {
                "server role"
            } else {
                "login"
            };
            format!("{kind} {} ({})", p.grantee, p.permission.to_uppercase())
        })
        .collect();
    if server
        .role_members
        .iter()
        .any(|m| m.role.eq_ignore_ascii_case("serveradmin"))
    {
        holders.push("server role serveradmin".into());
    }
    holders.push("sysadmin".into());
    Some(holders)
}

fn describe(item: &OutsideItem, settings: &Option<Vec<String>>) -> String {
    let detail = item.detail.as_deref().unwrap_or("");
    // An option that is off is one ALTER SETTINGS away from on.
    let off = match (detail.ends_with("; off now"), settings) {
        (false, _) => String::new(),
        (true, Some(holders)) => format!(", and may be turned on by {}", holders.join(", ")),
        (true, None) => ", and may be turned on by whoever holds ALTER SETTINGS".into(),
    };
    match item.kind {
        OutsideKind::AgentStep => format!(
            "SQL Server Agent job step {} runs {detail}: an operating-system process that may sign in to this server \
             as that Windows account, whose logins and groups no catalog view connects to it (check the account's \
             logins, and who may edit the job or use the proxy: msdb.dbo.sysproxylogin)",
            item.name
        ),
        OutsideKind::XpCmdshell => format!(
            "{} may run operating-system commands through xp_cmdshell ({detail}{off}): what that account may do \
             here the catalog cannot tell (REVOKE EXECUTE ON xp_cmdshell FROM {} in master, or turn xp_cmdshell off)",
            item.name, item.name
        ),
        OutsideKind::OleAutomation => format!(
            "{} may run the OLE Automation procedures (sp_OACreate: {detail}{off}): a COM object such as a shell \
             runs outside T-SQL, and what it may do here the catalog cannot tell (REVOKE EXECUTE ON sp_OACreate \
             FROM {} in master)",
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

/// Agent proxies whose account no login here stands for, or whose users
/// are msdb roles: what their steps may do here no catalog view connects
/// to a principal. FP027 follows the rest as edges.
fn proxies(ctx: &Context, report: &mut Report) {
    let Some(proxies) = &ctx.catalog.agent_proxies else {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::OutsideTsql,
            reason: "SQL Server Agent proxies and who may use them (msdb.dbo.sysproxies, msdb.dbo.sysproxylogin) \
                     could not be read: a CmdExec or PowerShell step runs as a proxy's Windows account for whoever \
                     it is granted to (the checking login needs SELECT on those tables, or sysadmin)"
                .into(),
        });
        return;
    };
    for p in proxies.iter().filter(|p| !p.users.is_empty()) {
        let users: Vec<String> = p
            .users
            .iter()
            .map(|u| match u.kind {
                ProxyUserKind::Login => format!("login {}", u.name),
                ProxyUserKind::ServerRole => format!("server role {}", u.name),
                ProxyUserKind::MsdbRole => format!("msdb role {}", u.name),
            })
            .collect();
        let followed = p.identity.as_deref().is_some_and(|i| known_login(ctx, i));
        let roles = p.users.iter().any(|u| u.kind == ProxyUserKind::MsdbRole);
        if followed && !roles {
            continue;
        }
        let account = match p.identity.as_deref() {
            Some(i) if followed => format!(
                "Windows account {i}, whose login FP027 follows, but the members of its msdb roles are not read"
            ),
            Some(i) => {
                format!("Windows account {i}, which no login the catalog shows stands for: its groups' logins may")
            }
            None => {
                "a Windows account the checking login cannot see (VIEW ANY DEFINITION shows sys.credentials)".into()
            }
        };
        report.cannot_verify.push(CannotVerify {
            rule: Rule::OutsideTsql,
            reason: format!(
                "SQL Server Agent proxy {} runs CmdExec and PowerShell steps as {account}; {} may use it in a job \
                 of their own (EXEC msdb.dbo.sp_revoke_login_from_proxy for each that should not)",
                p.name,
                users.join(", ")
            ),
        });
    }
}

/// Whether a login of that name is one the catalog shows: behind a user
/// here, or named by the server facts.
fn known_login(ctx: &Context, login: &str) -> bool {
    let same = |l: &str| l.eq_ignore_ascii_case(login);
    ctx.catalog
        .principals
        .iter()
        .any(|p| p.login.as_deref().is_some_and(same))
        || ctx.catalog.server.as_ref().is_some_and(|s| {
            s.role_members.iter().any(|m| same(&m.member)) || s.permissions.iter().any(|p| same(&p.grantee))
        })
}
