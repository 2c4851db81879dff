//! ALTER on one login (granted, or implied by CONTROL on it) changes that
//! login's properties, its password included ("Permissions (Database
//! Engine)": ALTER "confers the ability to change the properties ... of a
//! particular securable"; ALTER ANY LOGIN implies it on every login). A
//! DENY of IMPERSONATE on the login leaves it: only a DENY of ALTER or
//! CONTROL there cuts it. A sysadmin's or CONTROL SERVER grantee's password
//! needs CONTROL SERVER, as for ALTER ANY LOGIN.

use super::super::catalog::ServerFacts;
use super::super::hierarchy::implies;
use super::super::rules::{Context, is_server_role};
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::Node;
use super::server_denies::denied;
use super::server_rights::{grant_on, sql_logins};
use crate::tsql::quote_name;

pub(super) fn edges(ctx: &Context, server: &ServerFacts, graph: &mut Graph) {
    let resettable = sql_logins(ctx, server);
    for p in &server.permissions {
        let Some(login) = p.on_login.as_deref().filter(|l| !is_server_role(server, l)) else {
            continue;
        };
        let Some((_, kind)) = resettable.iter().find(|(l, _)| l.eq_ignore_ascii_case(login)) else {
            continue;
        };
        if !implies("LOGIN", &p.permission, "LOGIN", "ALTER")
            || denied(server, &p.grantee, "LOGIN", "ALTER", Some(login))
        {
            continue;
        }
        let from = if is_server_role(server, &p.grantee) {
            Node::server_role(&p.grantee)
        } else {
            Node::login(&p.grantee)
        };
        graph.actor(from.clone(), &p.grantee);
        let on = grant_on(p, "LOGIN", login);
        graph.add(
            from,
            &p.grantee,
            Edge::new(
                Node::login(login),
                Kind::Acts,
                format!(
                    "{} on LOGIN::{login}{}: resets its password (ALTER LOGIN {} WITH PASSWORD = '...'){}",
                    p.permission.to_uppercase(),
                    if p.permission.eq_ignore_ascii_case("ALTER") {
                        ""
                    } else {
                        " (implies ALTER)"
                    },
                    quote_name(login),
                    if kind.is_none() {
                        ", as it may be a SQL login: the catalog read does not say"
                    } else {
                        ""
                    }
                ),
                on.0,
                on.1,
            ),
        );
    }
}
