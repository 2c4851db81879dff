//! A principal that may add members to a role and may act as a user adds
//! that user to the role, then acts as it: "ALTER ROLE ... ADD MEMBER"
//! takes any database principal, not only the caller, and "EXECUTE AS
//! USER" then runs as the user with the role's rights. It matters when the
//! principal is refused what the role holds (a DENY made to itself) and the
//! user is not. The edge from the user to the role counts only on a path
//! that acted as the principal first.

use std::collections::BTreeMap;

use super::super::catalog::{PrincipalKind, Securable};
use super::super::rules::Context;
use super::denies;
use super::edge::{Edge, Kind};
use super::fixed_roles::is_fixed;
use super::graph::Graph;
use super::node::Node;
use super::right::Right;
use crate::tsql::quote_name;

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    let principals = &ctx.catalog.principals;
    // Each holder's roles it may add members to, and users it may act as,
    // where no DENY stands in the way (one that does is weighed on the
    // holder's own edges).
    let mut roles: BTreeMap<String, Vec<(&str, &'static str)>> = BTreeMap::new();
    let mut users: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for right in rights.iter().filter(|r| !r.login) {
        for p in principals
            .iter()
            .filter(|p| !p.name.eq_ignore_ascii_case(&right.holder))
        {
            let on = Securable::Principal { name: p.name.clone() };
            let clear = |wanted: &str| denies::reaches(ctx, right, &on, wanted).is_some_and(|u| u.is_empty());
            match p.kind {
                PrincipalKind::Role if !is_fixed(&p.name) && !p.name.eq_ignore_ascii_case("public") => {
                    if let Some(w) = ["ALTER", "TAKE OWNERSHIP"].into_iter().find(|w| clear(w)) {
                        roles.entry(right.holder.clone()).or_default().push((&p.name, w));
                    }
                }
                PrincipalKind::User if super::singleton::user(ctx, p) && clear("IMPERSONATE") => {
                    users.entry(right.holder.clone()).or_default().push(&p.name);
                }
                _ => {}
            }
        }
    }
    for (holder, roles) in &roles {
        let Some(users) = users.get(holder) else {
            continue;
        };
        let by = holder;
        for (role, wanted) in roles {
            for user in users {
                graph.add(
                    Node::principal(user),
                    user,
                    Edge::new(
                        Node::principal(role),
                        Kind::Acts,
                        format!(
                            "{by} holds {wanted} on ROLE::{role} and IMPERSONATE on USER::{user}: it adds {user} to \
                             {role} before acting as it (ALTER ROLE {} ADD MEMBER {})",
                            quote_name(role),
                            quote_name(user)
                        ),
                        format!("sys.database_permissions: {by} may alter {role} and impersonate {user}"),
                        format!("(revoke {by}'s {wanted} on ROLE::{role} or its IMPERSONATE on USER::{user})"),
                    )
                    .after(Node::principal(holder)),
                );
            }
        }
    }
}
