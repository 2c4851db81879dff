//! Creating a procedure in a schema the fence tables' owner owns: "CREATE
//! PROCEDURE" needs CREATE PROCEDURE on the database and ALTER on the
//! schema, and the new procedure belongs to the schema's owner, not its
//! creator ("CREATE SCHEMA"). Its statements chain to the fence tables (and
//! to fence_admin's procedures, where the same owner owns them) unchecked,
//! so whoever may also run it (EXECUTE on the schema) writes the fence with
//! code of its own, though no object is in the schema yet. Functions and
//! views change nothing by themselves, so only CREATE PROCEDURE counts.

use super::super::catalog::{PrincipalKind, Securable};
use super::super::rules::Context;
use super::code::admin_procedures;
use super::denies;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::{Goal, Node};
use super::right::Right;

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    let Some(owner) = ctx.tables_owner() else { return };
    let owned = |o: &str| o.eq_ignore_ascii_case(owner);
    // fence_admin's procedures chain from the new one only when they share
    // its owner.
    let admin_chains = admin_procedures(ctx).iter().any(|p| {
        ctx.catalog
            .object(p)
            .and_then(|o| ctx.catalog.owner_of(o))
            .is_some_and(owned)
    });
    for p in &ctx.catalog.principals {
        // A role's rights are its members', weighed on them; administrators
        // pass every check and reach the fence more plainly.
        if matches!(p.kind, PrincipalKind::Role | PrincipalKind::ApplicationRole) || ctx.is_admin(&p.name) {
            continue;
        }
        // Rights held by the principal or through its roles, which combine
        // in one session; one a DENY stands against is left out (it is
        // weighed on the holder's own edges).
        let holders = ctx.holders(&p.name);
        let held: Vec<&Right> = rights
            .iter()
            .filter(|r| !r.login && holders.contains(&r.holder.to_lowercase()))
            .collect();
        let open = |target: &Securable, wanted: &str| {
            held.iter()
                .copied()
                .find(|r| denies::reaches(ctx, r, target, wanted).is_some_and(|u| u.is_empty()))
        };
        let Some(create) = open(&Securable::Database, "CREATE PROCEDURE") else {
            continue;
        };
        for schema in ctx.catalog.schemas.iter().filter(|s| owned(&s.owner)) {
            let on = Securable::Schema {
                schema: schema.name.clone(),
            };
            let (Some(alter), Some(run)) = (open(&on, "ALTER"), open(&on, "EXECUTE")) else {
                continue;
            };
            let goals: &[Goal] = if admin_chains {
                &[Goal::WriteFence, Goal::RunAdmin]
            } else {
                &[Goal::WriteFence]
            };
            for goal in goals {
                graph.add(
                    Node::principal(&p.name),
                    &p.name,
                    Edge::new(
                        Node::Goal(*goal),
                        Kind::Acts,
                        format!(
                            "CREATE PROCEDURE on the database and ALTER on SCHEMA::{s}: creates a procedure in {s}, \
                             owned by {s}'s owner {owner} as the fence tables are, that chains to them, and runs \
                             it (EXECUTE on SCHEMA::{s}), so it may {}",
                            goal.describe(),
                            s = schema.name
                        ),
                        format!("{}; {}; {}", create.evidence, alter.evidence, run.evidence),
                        format!("{} or {}", create.cut, alter.cut),
                    )
                    .on(format!("SCHEMA::{}", schema.name)),
                );
            }
            break;
        }
    }
}
