//! The server rights a login holds that reach the fence: its server roles,
//! through nesting, and the permissions they and it hold, by the strongest
//! path. Shared by the server rules (FP002, FP016) and the group rules.

use super::super::catalog::{ServerFacts, ServerPermission};
use super::super::hierarchy::implies;
use super::{Context, Rule};
use crate::tsql::quote_name;

/// What fixed server roles hold without a row in `sys.server_permissions`
/// (the documented permissions of each role), as far as the rules need them.
const FIXED_ROLE_PERMISSIONS: [(&str, &[&str]); 5] = [
    ("sysadmin", &["CONTROL SERVER"]),
    ("securityadmin", &["ALTER ANY LOGIN"]),
    ("dbcreator", &["CREATE ANY DATABASE"]),
    ("##MS_DatabaseManager##", &["CREATE ANY DATABASE", "ALTER ANY DATABASE"]),
    ("##MS_LoginManager##", &["CREATE LOGIN", "ALTER ANY LOGIN"]),
];

/// Server-wide permissions that reach the fence, and why.
const PRIVILEGED: [(&str, &str); 4] = [
    (
        "ALTER ANY DATABASE",
        "ALTER ANY DATABASE is ALTER on every database: its holder may create code and grant rights in this \
         one, the fence tables included",
    ),
    (
        "IMPERSONATE ANY LOGIN",
        "IMPERSONATE ANY LOGIN lets its holder run EXECUTE AS LOGIN as a sysadmin and update the fence tables",
    ),
    (
        "ALTER ANY LOGIN",
        "ALTER ANY LOGIN lets its holder create and change logins, and so enter the database as someone who \
         can write the fence",
    ),
    (
        "SELECT ALL USER SECURABLES",
        "SELECT ALL USER SECURABLES reads every user table, the fence tables included: they show each holder's \
         owner id, and owner plus generation is what a publish presents",
    ),
];

/// The fixed server roles that predate the `##MS_...##` ones.
pub(super) const FIXED_SERVER_ROLES: [&str; 9] = [
    "sysadmin",
    "securityadmin",
    "serveradmin",
    "setupadmin",
    "processadmin",
    "diskadmin",
    "dbcreator",
    "bulkadmin",
    "public",
];

/// Whether `name` is a server role rather than a login: a fixed role, one
/// the server lists as a role (with or without members), or one with
/// members.
pub(crate) fn is_server_role(server: &ServerFacts, name: &str) -> bool {
    FIXED_SERVER_ROLES.iter().any(|f| f.eq_ignore_ascii_case(name))
        || name.starts_with("##")
        || server.roles.iter().any(|r| r.eq_ignore_ascii_case(name))
        || server.role_members.iter().any(|m| m.role.eq_ignore_ascii_case(name))
}

/// Roles whose members the documentation treats as sysadmin.
const SYSADMIN_LIKE: [&str; 2] = ["sysadmin", "securityadmin"];

/// One way a login holds a server right that reaches the fence.
pub(super) struct Privilege {
    pub(super) rule: Rule,
    /// `member of sysadmin through ops`, `IMPERSONATE ON LOGIN::sa`.
    pub(super) path: String,
    pub(super) why: String,
    pub(super) fix: String,
}

/// The login and every server role it is in, through nesting; every login
/// is also in `public`.
pub(crate) fn holders(server: &ServerFacts, login: &str) -> Vec<String> {
    let mut holders = vec![login.to_string(), "public".to_string()];
    let mut i = 0;
    while i < holders.len() {
        let member = holders[i].clone();
        for m in server
            .role_members
            .iter()
            .filter(|m| m.member.eq_ignore_ascii_case(&member))
        {
            if !holders.iter().any(|h| h.eq_ignore_ascii_case(&m.role)) {
                holders.push(m.role.clone());
            }
        }
        i += 1;
    }
    holders
}

pub(super) fn holds(holders: &[String], name: &str) -> bool {
    holders.iter().any(|h| h.eq_ignore_ascii_case(name))
}

/// The securable class of a server permission: SERVER, or the class of the
/// login or server role it is on.
pub(super) fn server_class(server: &ServerFacts, p: &ServerPermission) -> &'static str {
    match p.on_login.as_deref() {
        None => "SERVER",
        Some(target) if is_server_role(server, target) => "SERVER ROLE",
        Some(_) => "LOGIN",
    }
}

/// Whether server permission `p` gives `wanted` on the server (CONTROL
/// SERVER gives every one; ALTER ANY DATABASE gives CREATE ANY DATABASE).
pub(super) fn implies_on_server(p: &ServerPermission, wanted: &str) -> bool {
    p.on_login.is_none() && implies("SERVER", &p.permission, "SERVER", wanted)
}

/// The permission a path names: `X`, or `Y (implies X)` for a covering one.
pub(super) fn named(held: &str, wanted: &str) -> String {
    if held.eq_ignore_ascii_case(wanted) {
        wanted.to_string()
    } else {
        format!("{} (implies {wanted})", held.to_uppercase())
    }
}

/// Whether `login` administers the server or this database already:
/// sysadmin or as good as, the database's owner, or the login of a user that
/// is db_owner here. Whatever it can reach, it could reach anyway.
pub(super) fn is_admin_login(ctx: &Context, login: &str) -> bool {
    ctx.catalog.server.as_ref().is_some_and(|s| is_privileged(s, login))
        || ctx.catalog.owner_login().is_some_and(|o| o.eq_ignore_ascii_case(login))
        || ctx
            .catalog
            .principals
            .iter()
            .filter(|p| p.login.as_deref().is_some_and(|l| l.eq_ignore_ascii_case(login)))
            .any(|p| ctx.is_admin(&p.name))
}

/// Whether `login` is sysadmin, or as good as: securityadmin or CONTROL SERVER.
pub(super) fn is_privileged(server: &ServerFacts, login: &str) -> bool {
    let holders = holders(server, login);
    SYSADMIN_LIKE.iter().any(|r| holds(&holders, r))
        || server
            .permissions
            .iter()
            .any(|p| implies_on_server(p, "CONTROL SERVER") && holds(&holders, &p.grantee))
}

/// Every server right of `login` that reaches the fence, each once, by the
/// strongest path: sysadmin and CONTROL SERVER (FP002) include the rest.
pub(super) fn privileges(server: &ServerFacts, login: &str) -> Vec<Privilege> {
    let holders = holders(server, login);
    let via = |holder: &str| {
        if holder.eq_ignore_ascii_case(login) {
            String::new()
        } else {
            format!(" through {holder}")
        }
    };
    // The role a login is in directly, on its way to `role`, is the one to leave.
    let direct_member = |role: &str| {
        server
            .role_members
            .iter()
            .find(|m| m.role.eq_ignore_ascii_case(role) && holds(&holders, &m.member))
            .map_or(login.to_string(), |m| m.member.clone())
    };
    let leave = |role: &str| {
        let member = direct_member(role);
        if member.eq_ignore_ascii_case("sa") {
            // sa cannot leave sysadmin: the service must stop using it.
            format!(
                "connect the service with a login of its own that holds only the fence_service role ({} cannot \
                 leave {role})",
                quote_name(&member)
            )
        } else {
            format!(
                "ALTER SERVER ROLE {} DROP MEMBER {};",
                quote_name(role),
                quote_name(&member)
            )
        }
    };
    if holds(&holders, "sysadmin") {
        return vec![Privilege {
            rule: Rule::ServerControl,
            path: format!("member of sysadmin{}", via(&direct_member("sysadmin"))),
            why: "sysadmin is dbo in every database and skips every permission check, so it can update the fence \
                  tables directly"
                .into(),
            fix: leave("sysadmin"),
        }];
    }
    // A server permission held, or implied by one held (the hierarchy).
    let granted = |name: &str| {
        server
            .permissions
            .iter()
            .find(|p| implies_on_server(p, name) && holds(&holders, &p.grantee))
    };
    if let Some(p) = granted("CONTROL SERVER") {
        return vec![Privilege {
            rule: Rule::ServerControl,
            path: format!("CONTROL SERVER{}", via(&p.grantee)),
            why: "CONTROL SERVER passes every permission check in every database, so it can update the fence \
                  tables directly"
                .into(),
            fix: format!("REVOKE CONTROL SERVER FROM {};", quote_name(&p.grantee)),
        }];
    }
    let mut found = Vec::new();
    if holds(&holders, "securityadmin") {
        found.push(Privilege {
            rule: Rule::ServerPrivilege,
            path: format!("member of securityadmin{}", via(&direct_member("securityadmin"))),
            why: "securityadmin may grant server and database permissions and reset logins' passwords; the \
                  documentation treats it as equal to sysadmin"
                .into(),
            fix: leave("securityadmin"),
        });
    }
    for (permission, why) in PRIVILEGED {
        if found.iter().any(|f| f.path.starts_with("member of securityadmin")) && permission == "ALTER ANY LOGIN" {
            continue;
        }
        if let Some(p) = granted(permission) {
            found.push(Privilege {
                rule: Rule::ServerPrivilege,
                path: format!("{}{}", named(&p.permission, permission), via(&p.grantee)),
                why: why.into(),
                fix: format!(
                    "REVOKE {} FROM {};",
                    p.permission.to_uppercase(),
                    quote_name(&p.grantee)
                ),
            });
        } else if let Some((role, _)) = FIXED_ROLE_PERMISSIONS.iter().find(|(role, held)| {
            held.iter().any(|h| implies("SERVER", h, "SERVER", permission)) && holds(&holders, role)
        }) {
            found.push(Privilege {
                rule: Rule::ServerPrivilege,
                path: format!("{permission} as member of {role}{}", via(&direct_member(role))),
                why: why.into(),
                fix: leave(role),
            });
        }
    }
    for p in server.permissions.iter().filter(|p| holds(&holders, &p.grantee)) {
        let Some(target) = p.on_login.as_deref() else { continue };
        let permission = p.permission.to_uppercase();
        if !is_privileged(server, target) {
            continue;
        }
        // A login is acted as; a server role is joined, by whoever may
        // change its members (ALTER, CONTROL, or taking it over).
        let class = server_class(server, p);
        let gives = |wanted: &[&str]| wanted.iter().any(|w| implies(class, &permission, class, w));
        let (class, how) = if class == "SERVER ROLE" {
            if !gives(&["ALTER", "TAKE OWNERSHIP"]) {
                continue;
            }
            (
                "SERVER ROLE",
                format!("lets its holder add members to {target}, itself included,"),
            )
        } else {
            if !gives(&["IMPERSONATE"]) {
                continue;
            }
            (
                "LOGIN",
                format!("lets its holder act as {target} (EXECUTE AS LOGIN, or a new password)"),
            )
        };
        found.push(Privilege {
            rule: Rule::ServerPrivilege,
            path: format!("{permission} ON {class}::{target}{}", via(&p.grantee)),
            why: format!(
                "{target} is sysadmin or as good as, and {permission} on it {how} and update the fence tables"
            ),
            fix: format!(
                "REVOKE {permission} ON {class}::{} FROM {};",
                quote_name(target),
                quote_name(&p.grantee)
            ),
        });
    }
    found
}
