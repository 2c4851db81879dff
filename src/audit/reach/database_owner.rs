//! Taking the database: TAKE OWNERSHIP on it lets its holder run ALTER
//! AUTHORIZATION ON DATABASE::db TO a login, which then enters as dbo. SQL
//! Server refuses a login that already has a user in the database
//! ("sp_changedbowner": drop the user first), and asks IMPERSONATE on any
//! login but the caller's own. So the holders who become dbo are those that
//! act through a login with no user of its own here: the members of a
//! Windows or Entra group whose user holds the right (each signs in with
//! its own login), and a login that enters without a user.

use super::super::catalog::{PrincipalKind, Securable};
use super::super::rules::Context;
use super::denies;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::Node;
use super::right::Right;
use crate::tsql::quote_name;

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    if ctx.principal("dbo").is_none() {
        return;
    }
    for right in rights {
        let p = &right.permission;
        if p.on != Securable::Database
            || !ctx.implies(p, "DATABASE", "TAKE OWNERSHIP")
            || right.holder.eq_ignore_ascii_case("dbo")
        {
            continue;
        }
        // A DENY the holder cannot drop its way out of rides on the edge:
        // the closure judges it for each session that acts, which may be a
        // member that can.
        let Some(unless) = denies::allows(ctx, right, &Securable::Database, "TAKE OWNERSHIP") else {
            continue;
        };
        for (node, name, through) in actors(ctx, right) {
            graph.add(
                node,
                &name,
                Edge::new(
                    Node::principal("dbo"),
                    Kind::Acts,
                    format!(
                        "TAKE OWNERSHIP on the database{through}: ALTER AUTHORIZATION ON DATABASE::{} TO its own \
                         login, which has no user here, makes that login the owner, who enters as dbo",
                        quote_name(&ctx.catalog.database)
                    ),
                    right.evidence.clone(),
                    right.cut.clone(),
                )
                .unless(unless.clone()),
            );
        }
    }
}

/// Who acts on `right` through a login with no user of its own here: the
/// login itself, a group user, or the group users inside a role.
fn actors(ctx: &Context, right: &Right) -> Vec<(Node, String, String)> {
    if right.login {
        return vec![(right.node(), right.holder.clone(), String::new())];
    }
    let is_group = |name: &str| {
        ctx.catalog
            .principal(name)
            .is_some_and(|p| p.kind == PrincipalKind::Group)
    };
    if is_group(&right.holder) {
        return vec![(right.node(), right.holder.clone(), String::new())];
    }
    let members: Vec<String> = if right.holder.eq_ignore_ascii_case("public") {
        ctx.catalog
            .principals
            .iter()
            .filter(|p| p.kind == PrincipalKind::Group)
            .map(|p| p.name.clone())
            .collect()
    } else {
        ctx.members_of(&right.holder)
            .into_iter()
            .filter_map(|m| ctx.principal(&m).map(|p| p.name.clone()))
            .filter(|m| is_group(m))
            .collect()
    };
    members
        .into_iter()
        .map(|m| {
            let through = format!(" (held by {}, which it is in)", right.holder);
            (Node::principal(&m), m, through)
        })
        .collect()
}
