//! Orphaned users: a user made for a SQL login (authentication INSTANCE)
//! whose SID no login has any more. "CREATE LOGIN": the SID option "is used
//! to recreate a login" and applies to SQL Server authentication logins; it
//! needs ALTER ANY LOGIN (or, from SQL Server 2022, CREATE LOGIN, which
//! ##MS_LoginManager## holds). Whoever holds either creates a login with the
//! orphan's SID and a password of its choosing, signs in with it, and enters
//! this database as the orphan. A user whose kind was not read may be one.

use super::super::catalog::{PrincipalKind, UserAuthentication};
use super::super::hierarchy::implies;
use super::super::rules::{Context, is_server_role};
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::Node;
use super::server_denies::denied;
use super::server_rights::held;
use crate::tsql::quote_name;

/// Users no one signs in as, whatever their SID.
const BUILTIN: [&str; 4] = ["dbo", "guest", "sys", "INFORMATION_SCHEMA"];

pub(super) fn edges(ctx: &Context, graph: &mut Graph) {
    let Some(server) = &ctx.catalog.server else { return };
    let orphans: Vec<(&str, &str)> = ctx
        .catalog
        .principals
        .iter()
        .filter(|p| p.kind == PrincipalKind::User && p.login.is_none())
        .filter(|p| !BUILTIN.iter().any(|b| b.eq_ignore_ascii_case(&p.name)))
        .filter_map(|p| match p.authentication {
            Some(UserAuthentication::Instance) => Some((p.name.as_str(), "")),
            None => Some((
                p.name.as_str(),
                ", as it may be one: the catalog read does not say how it authenticates",
            )),
            Some(_) => None,
        })
        .collect();
    if orphans.is_empty() {
        return;
    }
    for h in held(server) {
        let Some(wanted) = ["ALTER ANY LOGIN", "CREATE LOGIN"].into_iter().find(|w| {
            implies("SERVER", &h.permission, "SERVER", w)
                && !implies("SERVER", &h.permission, "SERVER", "CONTROL SERVER")
                && !denied(server, &h.holder, "SERVER", w, None)
        }) else {
            continue;
        };
        let from = if is_server_role(server, &h.holder) {
            Node::server_role(&h.holder)
        } else {
            Node::login(&h.holder)
        };
        graph.actor(from.clone(), &h.holder);
        let named = if h.permission.eq_ignore_ascii_case(wanted) {
            wanted.to_string()
        } else {
            format!("{} (implies {wanted})", h.permission)
        };
        for (user, maybe) in &orphans {
            graph.add(
                from.clone(),
                &h.holder,
                Edge::new(
                    Node::principal(user),
                    Kind::Acts,
                    format!(
                        "{named}: creates a SQL login with the SID of {user}, a user no login has the SID of \
                         (CREATE LOGIN ... WITH PASSWORD = '...', SID = <its SID>), and enters the database as \
                         {user}{maybe}"
                    ),
                    format!(
                        "{}; sys.database_principals: user {user} has no login of its SID",
                        h.evidence
                    ),
                    format!("DROP USER {};", quote_name(user)),
                ),
            );
        }
    }
}
