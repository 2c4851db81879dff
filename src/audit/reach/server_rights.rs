//! Server-wide rights as edges ("Permissions of Fixed Server Roles", "GRANT
//! Server Permissions", ALTER LOGIN, ALTER SERVER ROLE): CONTROL SERVER
//! passes every check as sysadmin does; IMPERSONATE ANY LOGIN acts as any
//! login; ALTER ANY LOGIN resets the password of a SQL login that is neither
//! sysadmin nor holds CONTROL SERVER; securityadmin grants server
//! permissions and is documented as sysadmin's equal; ALTER on a server
//! role, ALTER ANY SERVER ROLE on a user-defined one, and owning one add
//! members; ALTER ANY AVAILABILITY GROUP forces a failover with data loss.

use super::super::catalog::{LoginKind, ServerFacts, ServerPermission};
use super::super::hierarchy::implies;
use super::super::rules::{Context, is_server_role, server_holders};
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::{Goal, Node};
use super::server_denies::denied;
use crate::tsql::quote_name;

/// What fixed server roles hold without a row in `sys.server_permissions`
/// ("Server-level roles": dbcreator "can create, alter, drop, and restore
/// any database"; ##MS_DatabaseConnector## holds CONNECT ANY DATABASE).
const FIXED: [(&str, &[&str]); 6] = [
    ("securityadmin", &["ALTER ANY LOGIN"]),
    ("##MS_LoginManager##", &["CREATE LOGIN", "ALTER ANY LOGIN"]),
    ("##MS_DatabaseManager##", &["CREATE ANY DATABASE", "ALTER ANY DATABASE"]),
    ("dbcreator", &["CREATE ANY DATABASE", "ALTER ANY DATABASE"]),
    ("##MS_DatabaseConnector##", &["CONNECT ANY DATABASE"]),
    (
        "serveradmin",
        &["ALTER SETTINGS", "ALTER ANY ENDPOINT", "ALTER SERVER STATE", "SHUTDOWN"],
    ),
];

/// A server-wide right and where it comes from.
pub(super) struct Held {
    pub(super) holder: String,
    pub(super) permission: String,
    pub(super) evidence: String,
    pub(super) cut: String,
}

pub(super) fn edges(ctx: &Context, graph: &mut Graph) {
    let Some(server) = &ctx.catalog.server else { return };
    let node = |name: &str| {
        if is_server_role(server, name) {
            Node::server_role(name)
        } else {
            Node::login(name)
        }
    };
    let logins: Vec<Node> = graph
        .names
        .keys()
        .filter(|n| matches!(n, Node::Login(_)))
        .cloned()
        .collect();
    for h in held(server) {
        let from = node(&h.holder);
        graph.actor(from.clone(), &h.holder);
        // A DENY of the right, or of one covering it, cuts the edge it gives.
        let wants =
            |w: &str| implies("SERVER", &h.permission, "SERVER", w) && !denied(server, &h.holder, "SERVER", w, None);
        let named = |w: &str| {
            if h.permission.eq_ignore_ascii_case(w) {
                w.to_string()
            } else {
                format!("{} (implies {w})", h.permission.to_uppercase())
            }
        };
        let edge = |to: Node, kind: Kind, step: String| Edge::new(to, kind, step, h.evidence.clone(), h.cut.clone());
        if wants("CONTROL SERVER") {
            graph.add(
                from,
                &h.holder,
                edge(
                    Node::server_role("sysadmin"),
                    Kind::Holds,
                    format!(
                        "{}: passes every permission check, as sysadmin does",
                        named("CONTROL SERVER")
                    ),
                ),
            );
            continue;
        }
        if wants("IMPERSONATE ANY LOGIN") {
            for login in &logins {
                let name = graph.spelling(login);
                if !super::singleton::login(ctx, &name)
                    || denied(server, &h.holder, "LOGIN", "IMPERSONATE", Some(&name))
                {
                    continue;
                }
                let step = format!("{} (EXECUTE AS LOGIN = '{name}')", named("IMPERSONATE ANY LOGIN"));
                graph.add(from.clone(), &h.holder, edge(login.clone(), Kind::Acts, step).reverts());
            }
        }
        if wants("ALTER ANY LOGIN") {
            for (login, kind) in sql_logins(ctx, server) {
                if denied(server, &h.holder, "LOGIN", "ALTER", Some(&login)) {
                    continue;
                }
                let step = format!(
                    "{}: resets the password of {login} (ALTER LOGIN {} WITH PASSWORD = '...'){}",
                    named("ALTER ANY LOGIN"),
                    quote_name(&login),
                    if kind.is_none() {
                        ", as it may be a SQL login: the catalog read does not say"
                    } else {
                        ""
                    }
                );
                graph.add(from.clone(), &h.holder, edge(Node::login(&login), Kind::Acts, step));
            }
        }
        if wants("ALTER ANY SERVER ROLE") {
            for role in server
                .roles
                .iter()
                .filter(|r| user_defined(r) && !denied(server, &h.holder, "SERVER ROLE", "ALTER", Some(r)))
            {
                let step = format!(
                    "{}: may add itself to server role {role} (ALTER SERVER ROLE {} ADD MEMBER)",
                    named("ALTER ANY SERVER ROLE"),
                    quote_name(role)
                );
                graph.add(from.clone(), &h.holder, edge(Node::server_role(role), Kind::Acts, step));
            }
        }
        if wants("ALTER ANY AVAILABILITY GROUP") {
            let step = format!(
                "{}: may force a failover with data loss (ALTER AVAILABILITY GROUP ... FORCE_FAILOVER_ALLOW_DATA_LOSS) to \
                 a secondary that has not seen the latest fence writes, which takes generations back as a restore \
                 does; whether this database is in an availability group the catalog read does not show",
                named("ALTER ANY AVAILABILITY GROUP")
            );
            graph.add(
                from,
                &h.holder,
                edge(Node::Goal(Goal::WriteFence), Kind::Acts, step).on("the fence's generations"),
            );
        }
    }
    roles(server, graph);
}

/// Server-wide rights: granted ones, and the fixed roles' documented ones.
pub(super) fn held(server: &ServerFacts) -> Vec<Held> {
    let mut held: Vec<Held> = server
        .permissions
        .iter()
        .filter(|p| p.on_login.is_none())
        .map(|p| Held {
            holder: p.grantee.clone(),
            permission: p.permission.to_uppercase(),
            evidence: format!(
                "sys.server_permissions: GRANT {} TO {}",
                p.permission.to_uppercase(),
                p.grantee
            ),
            cut: format!(
                "REVOKE {} FROM {};",
                p.permission.to_uppercase(),
                quote_name(&p.grantee)
            ),
        })
        .collect();
    for (role, permissions) in FIXED.into_iter().filter(|(r, _)| has_members(server, r)) {
        for permission in permissions {
            held.push(Held {
                holder: role.to_string(),
                permission: permission.to_string(),
                evidence: format!(
                    "fixed server role {role}: its documented rights ({})",
                    permissions.join(", ")
                ),
                cut: format!("(a fixed role's rights cannot be revoked: take its members out of {role})"),
            });
        }
    }
    held
}

/// The row of a grant on one login or server role, and its REVOKE.
pub(super) fn grant_on(p: &ServerPermission, class: &str, on: &str) -> (String, String) {
    (
        format!(
            "sys.server_permissions: GRANT {} ON {class}::{on} TO {}",
            p.permission.to_uppercase(),
            p.grantee
        ),
        format!(
            "REVOKE {} ON {class}::{} FROM {};",
            p.permission.to_uppercase(),
            quote_name(on),
            quote_name(&p.grantee)
        ),
    )
}

/// The logins whose password ALTER ANY LOGIN resets, those behind this
/// database's users and every other login the server facts name: SQL logins, or of a kind not read, that are not sysadmin and hold
/// no CONTROL SERVER (those need CONTROL SERVER to reset).
pub(super) fn sql_logins(ctx: &Context, server: &ServerFacts) -> Vec<(String, Option<LoginKind>)> {
    let mut out: Vec<(String, Option<LoginKind>)> = Vec::new();
    for p in &ctx.catalog.principals {
        let Some(login) = p.login.as_deref() else { continue };
        if !matches!(p.login_kind, None | Some(LoginKind::Sql))
            || controls_server(server, login)
            || out.iter().any(|(l, _)| l.eq_ignore_ascii_case(login))
        {
            continue;
        }
        out.push((login.to_string(), p.login_kind));
    }
    // Every other login the server facts name (a role member, a grantee, a
    // login a permission is on, a role owner): ALTER ANY LOGIN resets it
    // whether or not it has a user here, and its kind is not read, so it
    // may be a SQL login. One behind a user here was judged by its kind.
    let named = server
        .role_members
        .iter()
        .map(|m| &m.member)
        .chain(server.permissions.iter().map(|p| &p.grantee))
        .chain(server.permissions.iter().filter_map(|p| p.on_login.as_ref()))
        .chain(server.role_owners.iter().map(|o| &o.owner));
    for login in named {
        let has_user = ctx
            .catalog
            .principals
            .iter()
            .any(|p| p.login.as_deref().is_some_and(|l| l.eq_ignore_ascii_case(login)));
        if has_user
            || is_server_role(server, login)
            || controls_server(server, login)
            || out.iter().any(|(l, _)| l.eq_ignore_ascii_case(login))
        {
            continue;
        }
        out.push((login.clone(), None));
    }
    out
}

/// Whether `login` is sysadmin or holds CONTROL SERVER, itself or through
/// its server roles.
fn controls_server(server: &ServerFacts, login: &str) -> bool {
    let holders = server_holders(server, login);
    let holds = |name: &str| holders.iter().any(|h| h.eq_ignore_ascii_case(name));
    holds("sysadmin")
        || server.permissions.iter().any(|p| {
            p.on_login.is_none() && implies("SERVER", &p.permission, "SERVER", "CONTROL SERVER") && holds(&p.grantee)
        })
}

/// Whether a server role has members: a role no one is in reaches nothing.
fn has_members(server: &ServerFacts, role: &str) -> bool {
    server.role_members.iter().any(|m| m.role.eq_ignore_ascii_case(role))
}

fn user_defined(role: &str) -> bool {
    const FIXED_ROLES: [&str; 9] = [
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
    !role.starts_with("##") && !FIXED_ROLES.iter().any(|f| f.eq_ignore_ascii_case(role))
}

/// Who adds members to a server role: securityadmin to sysadmin's equal (it
/// grants server permissions), an owner or owning role, and ALTER, CONTROL
/// or TAKE OWNERSHIP on the role.
fn roles(server: &ServerFacts, graph: &mut Graph) {
    if has_members(server, "securityadmin") {
        graph.add(
            Node::server_role("securityadmin"),
            "securityadmin",
            Edge::new(
                Node::server_role("sysadmin"),
                Kind::Acts,
                "may GRANT server permissions, CONTROL SERVER included: the documentation treats securityadmin as \
                 equivalent to sysadmin",
                "fixed server role securityadmin: \"can GRANT, DENY, and REVOKE server-level permissions\"",
                "(take the members out of securityadmin)",
            ),
        );
    }
    // RESTORE over an existing database is for sysadmin, dbcreator and its
    // owner ("RESTORE Statements": Permissions).
    if has_members(server, "dbcreator") {
        graph.add(
            Node::server_role("dbcreator"),
            "dbcreator",
            Edge::new(
                Node::Goal(Goal::WriteFence),
                Kind::Acts,
                "may restore an older backup over this database (RESTORE DATABASE ... WITH REPLACE), which takes \
                 the fence's generations back",
                "fixed server role dbcreator: \"can create, alter, drop, and restore any database\"",
                "(take the members out of dbcreator)",
            )
            .on("the fence's generations"),
        );
    }
    let node = |name: &str| {
        if is_server_role(server, name) {
            Node::server_role(name)
        } else {
            Node::login(name)
        }
    };
    for o in &server.role_owners {
        graph.actor(node(&o.owner), &o.owner);
        graph.add(
            node(&o.owner),
            &o.owner,
            Edge::new(
                Node::server_role(&o.role),
                Kind::Acts,
                format!(
                    "owns server role {}: may add itself to it (ALTER SERVER ROLE {} ADD MEMBER)",
                    o.role,
                    quote_name(&o.role)
                ),
                format!("sys.server_principals: {} has owning_principal_id {}", o.role, o.owner),
                format!("ALTER AUTHORIZATION ON SERVER ROLE::{} TO [sa];", quote_name(&o.role)),
            ),
        );
    }
    for p in &server.permissions {
        let Some(role) = p.on_login.as_deref().filter(|r| is_server_role(server, r)) else {
            continue;
        };
        let Some(wanted) = ["ALTER", "TAKE OWNERSHIP"].into_iter().find(|w| {
            implies("SERVER ROLE", &p.permission, "SERVER ROLE", w)
                && !denied(server, &p.grantee, "SERVER ROLE", w, Some(role))
        }) else {
            continue;
        };
        graph.actor(node(&p.grantee), &p.grantee);
        let on = grant_on(p, "SERVER ROLE", role);
        graph.add(
            node(&p.grantee),
            &p.grantee,
            Edge::new(
                Node::server_role(role),
                Kind::Acts,
                format!(
                    "{} on SERVER ROLE::{role}{}: may add itself to it (ALTER SERVER ROLE {} ADD MEMBER)",
                    p.permission.to_uppercase(),
                    if p.permission.eq_ignore_ascii_case(wanted) {
                        String::new()
                    } else {
                        format!(" (implies {wanted})")
                    },
                    quote_name(role)
                ),
                on.0,
                on.1,
            ),
        );
    }
}
