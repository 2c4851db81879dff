//! FP016, beyond sysadmin-like logins: the server rights of a service login
//! that reach the fence some other way. Acting as a login that is db_owner
//! here or owns the database; restoring over the database (dbcreator);
//! turning cross-database chaining on (ALTER SETTINGS); joining or reshaping
//! a server role that holds such a right; watching every call's @Owner and
//! @Generation (traces, event sessions, the plan cache); reading backup
//! files (bulk operations); code trusted at server level (AUTHENTICATE
//! SERVER, UNSAFE ASSEMBLY).

use super::super::catalog::ServerFacts;
use super::super::hierarchy::implies;
use super::server_rights::{
    FIXED_SERVER_ROLES, holders, holds, implies_on_server, is_privileged, is_server_role, named, privileges,
    server_class,
};
use super::{Context, Finding, Rule};
use crate::tsql::quote_name;

/// Server-wide permissions that reach the fence, and why.
const REACHING: [(&str, &str); 12] = [
    (
        "ALTER SETTINGS",
        "ALTER SETTINGS lets its holder turn on cross db ownership chaining (sp_configure), after which code in \
         any database owned by the fence tables' owner's login reaches them unchecked",
    ),
    (
        "ADMINISTER BULK OPERATIONS",
        "ADMINISTER BULK OPERATIONS lets its holder read any file the server can (OPENROWSET BULK), backups of \
         this database and their fence rows included",
    ),
    (
        "ALTER TRACE",
        "ALTER TRACE lets its holder trace every RPC, and so read each holder's @Owner and @Generation as they \
         are sent: owner plus generation is what a publish presents",
    ),
    (
        "ALTER ANY EVENT SESSION",
        "ALTER ANY EVENT SESSION lets its holder capture every RPC's parameters, each holder's @Owner and \
         @Generation included: owner plus generation is what a publish presents",
    ),
    (
        "CREATE ANY EVENT SESSION",
        "CREATE ANY EVENT SESSION lets its holder capture every RPC's parameters, each holder's @Owner and \
         @Generation included: owner plus generation is what a publish presents",
    ),
    (
        "ALTER ANY EVENT SESSION ADD EVENT",
        "ALTER ANY EVENT SESSION ADD EVENT lets its holder add RPC events to a session, and so capture each \
         holder's @Owner and @Generation",
    ),
    (
        "VIEW SERVER STATE",
        "VIEW SERVER STATE shows the running requests' plans with their parameter values \
         (sys.dm_exec_query_statistics_xml), each holder's @Owner and @Generation included",
    ),
    (
        "VIEW SERVER PERFORMANCE STATE",
        "VIEW SERVER PERFORMANCE STATE shows the running requests' plans with their parameter values, each \
         holder's @Owner and @Generation included",
    ),
    (
        "AUTHENTICATE SERVER",
        "AUTHENTICATE SERVER trusts its holder's database impersonation (EXECUTE AS USER) at server level: as dbo \
         of any database it controls it acts as that database owner's login, and from there in this database",
    ),
    (
        "UNSAFE ASSEMBLY",
        "UNSAFE ASSEMBLY lets its holder load unrestricted CLR code in any database it may create assemblies in; \
         that code runs outside every permission check",
    ),
    (
        "EXTERNAL ACCESS ASSEMBLY",
        "EXTERNAL ACCESS ASSEMBLY lets its holder load CLR code that opens its own connections, outside this \
         login's permission checks",
    ),
    (
        "ALTER ANY SERVER ROLE",
        "ALTER ANY SERVER ROLE lets its holder join any user-defined server role",
    ),
];

/// Fixed server roles and what they hold that reaches the fence, without a
/// row in sys.server_permissions.
const FIXED: [(&str, &str); 6] = [
    (
        "dbcreator",
        "dbcreator may restore over any database (RESTORE DATABASE ... WITH REPLACE): a copy of this one in which \
         it is dbo, with generations of its choosing",
    ),
    ("serveradmin", "ALTER SETTINGS"),
    ("bulkadmin", "ADMINISTER BULK OPERATIONS"),
    ("##MS_ServerStateReader##", "VIEW SERVER STATE"),
    ("##MS_ServerStateManager##", "VIEW SERVER STATE"),
    ("##MS_ServerPerformanceStateReader##", "VIEW SERVER PERFORMANCE STATE"),
];

/// A finding for each further server right of service `principal`'s `login`.
pub(super) fn findings(ctx: &Context, server: &ServerFacts, principal: &str, login: &str) -> Vec<Finding> {
    if is_privileged(server, login) {
        // sysadmin and its equals are FP002's, and include all of these.
        return Vec::new();
    }
    let holders = holders(server, login);
    let via = |h: &str| {
        if h.eq_ignore_ascii_case(login) {
            String::new()
        } else {
            format!(" through {h}")
        }
    };
    let finding = |path: String, why: String, fix: String| Finding {
        path: Vec::new(),
        rule: Rule::ServerPrivilege,
        principal: Some(principal.to_string()),
        object: format!("LOGIN::{login}"),
        permission: Some(path),
        why,
        fix,
    };
    let mut found = Vec::new();
    for (role, what) in FIXED {
        let Some(member) = server
            .role_members
            .iter()
            .find(|m| m.role.eq_ignore_ascii_case(role) && holds(&holders, &m.member))
        else {
            continue;
        };
        let why = REACHING
            .iter()
            .find(|(p, _)| *p == what)
            .map_or(what.to_string(), |(_, why)| why.to_string());
        found.push(finding(
            format!("member of {role}{}", via(&member.member)),
            why,
            format!(
                "ALTER SERVER ROLE {} DROP MEMBER {};",
                quote_name(role),
                quote_name(&member.member)
            ),
        ));
    }
    for p in server
        .permissions
        .iter()
        .filter(|p| p.on_login.is_none() && holds(&holders, &p.grantee))
    {
        let permission = p.permission.to_uppercase();
        // The first right it gives, held or implied (ALTER SERVER STATE
        // gives VIEW SERVER STATE).
        let Some((reached, why)) = REACHING.iter().find(|(name, _)| implies_on_server(p, name)) else {
            continue;
        };
        let why = if *reached == "ALTER ANY SERVER ROLE" {
            match reaching_roles(ctx, server) {
                Some(roles) => format!(
                    "{why}, and {roles} hold{} rights that reach the fence",
                    plural_s(&roles)
                ),
                None => continue,
            }
        } else {
            why.to_string()
        };
        found.push(finding(
            format!("{}{}", named(&permission, reached), via(&p.grantee)),
            why,
            format!("REVOKE {permission} FROM {};", quote_name(&p.grantee)),
        ));
    }
    for p in server.permissions.iter().filter(|p| holds(&holders, &p.grantee)) {
        let Some(target) = p.on_login.as_deref() else { continue };
        let permission = p.permission.to_uppercase();
        let class = server_class(server, p);
        if !["IMPERSONATE", "ALTER", "TAKE OWNERSHIP"]
            .iter()
            .any(|w| implies(class, &permission, class, w))
            || is_privileged(server, target)
            || holds(&holders, target)
        {
            continue;
        }
        let Some(reach) = reaches(ctx, server, target) else {
            continue;
        };
        // A server role is entered by adding a member, a login by acting as it.
        let (class, how) = if is_server_role(server, target) {
            (
                "SERVER ROLE",
                format!("lets its holder add members to the server role {target}, itself or any login it controls"),
            )
        } else {
            (
                "LOGIN",
                format!("lets its holder act as the login {target} (EXECUTE AS LOGIN, or a new password)"),
            )
        };
        found.push(finding(
            format!("{permission} ON {class}::{target}{}", via(&p.grantee)),
            format!("{target} {reach}, and {permission} on it {how}, and so reach the fence tables"),
            format!(
                "REVOKE {permission} ON {class}::{} FROM {};",
                quote_name(target),
                quote_name(&p.grantee)
            ),
        ));
    }
    found
}

/// How a login or server role `name` reaches the fence here, if it does.
fn reaches(ctx: &Context, server: &ServerFacts, name: &str) -> Option<String> {
    if ctx.catalog.owner_login().is_some_and(|o| o.eq_ignore_ascii_case(name)) {
        return Some("owns this database and enters it as dbo".into());
    }
    let user = ctx
        .catalog
        .principals
        .iter()
        .find(|p| p.login.as_deref().is_some_and(|l| l.eq_ignore_ascii_case(name)));
    if let Some(user) = user
        && ctx.is_admin(&user.name)
    {
        return Some(format!("enters this database as {}, which is db_owner here", user.name));
    }
    if let Some(p) = privileges(server, name).first() {
        return Some(format!("holds {}", p.path));
    }
    let holders = holders(server, name);
    FIXED
        .iter()
        .find(|(role, _)| holds(&holders, role))
        .map(|(role, _)| format!("is in {role}"))
        .or_else(|| {
            server
                .permissions
                .iter()
                .find(|p| {
                    p.on_login.is_none()
                        && holds(&holders, &p.grantee)
                        && REACHING.iter().any(|(r, _)| implies_on_server(p, r))
                })
                .map(|p| format!("holds {}", p.permission.to_uppercase()))
        })
}

/// The user-defined server roles that reach the fence, if any, with members
/// or without: the holder of ALTER ANY SERVER ROLE joins an empty one as
/// readily. Roles are those the server lists as roles
/// (sys.server_principals) and those with members; a login is never one.
fn reaching_roles(ctx: &Context, server: &ServerFacts) -> Option<String> {
    let mut roles: Vec<&str> = server
        .role_members
        .iter()
        .map(|m| m.role.as_str())
        .chain(server.roles.iter().map(String::as_str))
        .filter(|r| !FIXED_SERVER_ROLES.iter().any(|f| f.eq_ignore_ascii_case(r)) && !r.starts_with("##"))
        .filter(|r| is_privileged(server, r) || reaches(ctx, server, r).is_some())
        .collect();
    roles.sort();
    roles.dedup();
    (!roles.is_empty()).then(|| roles.join(", "))
}

fn plural_s(list: &str) -> &'static str {
    if list.contains(", ") { "" } else { "s" }
}
