//! Logins and server roles, as far as the catalog shows them: a login
//! enters the database as its user, a server role's members hold its
//! rights, sysadmin enters every database as dbo, and IMPERSONATE on a
//! login is acting as it. Server-wide permissions and who joins a server
//! role are [`super::server_rights`]'.

use super::super::hierarchy;
use super::super::rules::Context;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::Node;
use super::server_denies::denied;
use crate::tsql::quote_name;

pub(super) fn edges(ctx: &Context, graph: &mut Graph) {
    for p in &ctx.catalog.principals {
        let Some(login) = p.login.as_deref() else { continue };
        graph.actor(Node::login(login), login);
        graph.add(
            Node::login(login),
            login,
            Edge::new(
                Node::principal(&p.name),
                Kind::Holds,
                format!("enters the database as user {}", p.name),
                format!("sys.database_principals: {} has the SID of login {login}", p.name),
                if p.name.eq_ignore_ascii_case("dbo") {
                    "ALTER AUTHORIZATION ON DATABASE::<db> TO <a login trusted to own it>;".to_string()
                } else {
                    format!("DROP USER {};", quote_name(&p.name))
                },
            ),
        );
    }
    let Some(server) = &ctx.catalog.server else { return };
    let is_role =
        |name: &str| server.roles.iter().any(|r| r.eq_ignore_ascii_case(name)) || name.eq_ignore_ascii_case("sysadmin");
    let node = |name: &str| {
        if is_role(name) {
            Node::server_role(name)
        } else {
            Node::login(name)
        }
    };
    for role in &server.roles {
        graph.actor(Node::server_role(role), role);
    }
    for m in &server.role_members {
        graph.actor(node(&m.member), &m.member);
        graph.actor(Node::server_role(&m.role), &m.role);
        graph.add(
            node(&m.member),
            &m.member,
            Edge::new(
                Node::server_role(&m.role),
                Kind::Holds,
                format!("member of server role {}", m.role),
                format!("sys.server_role_members: {} in {}", m.member, m.role),
                format!(
                    "ALTER SERVER ROLE {} DROP MEMBER {};",
                    quote_name(&m.role),
                    quote_name(&m.member)
                ),
            ),
        );
    }
    if ctx.principal("dbo").is_some() {
        graph.add(
            Node::server_role("sysadmin"),
            "sysadmin",
            Edge::new(
                Node::principal("dbo"),
                Kind::Holds,
                "enters every database as dbo",
                "fixed server role sysadmin: its members are dbo in every database",
                "(take the login out of sysadmin)",
            ),
        );
    }
    for p in &server.permissions {
        let from = node(&p.grantee);
        graph.actor(from.clone(), &p.grantee);
        let evidence = format!(
            "sys.server_permissions: GRANT {}{} TO {}",
            p.permission.to_uppercase(),
            p.on_login
                .as_deref()
                .map(|l| format!(" ON LOGIN::{l}"))
                .unwrap_or_default(),
            p.grantee
        );
        let cut = format!(
            "REVOKE {}{} FROM {};",
            p.permission.to_uppercase(),
            p.on_login
                .as_deref()
                .map(|l| format!(" ON LOGIN::{}", quote_name(l)))
                .unwrap_or_default(),
            quote_name(&p.grantee)
        );
        match p.on_login.as_deref() {
            Some(login)
                if !is_role(login)
                    && super::singleton::login(ctx, login)
                    && hierarchy::implies("LOGIN", &p.permission, "LOGIN", "IMPERSONATE")
                    && !denied(server, &p.grantee, "LOGIN", "IMPERSONATE", Some(login)) =>
            {
                graph.add(
                    from,
                    &p.grantee,
                    Edge::new(
                        node(login),
                        Kind::Acts,
                        format!("IMPERSONATE on LOGIN::{login} (EXECUTE AS LOGIN = '{login}')"),
                        evidence,
                        cut,
                    )
                    .reverts(),
                );
            }
            _ => {}
        }
    }
}
