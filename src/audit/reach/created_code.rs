//! Creating an object in a schema the fence tables' owner owns. Each CREATE
//! statement needs its CREATE permission on the database and ALTER on the
//! schema ("CREATE PROCEDURE", "CREATE VIEW", "CREATE FUNCTION", "CREATE
//! SYNONYM", "CREATE TABLE"), and the new object belongs to the schema's
//! owner, not its creator ("CREATE SCHEMA"), so its statements chain to the
//! fence tables (and to fence_admin's procedures, where the same owner owns
//! them) unchecked, though no object is in the schema yet.
//!
//! The creator is not the owner, so the statement that uses the new object
//! is checked against it. "GRANT Schema Permissions" and "Permissions
//! (Database Engine)": ALTER on a schema implies ALTER on its objects, never
//! EXECUTE, INSERT, UPDATE or DELETE, which come only from the same right on
//! the schema or the database, or CONTROL on either. So each object counts
//! only with the schema-level right its use needs:
//!
//! - a procedure that writes them, or calls fence_admin: EXECUTE;
//! - a view, or an inline table-valued function, over a fence table, written
//!   through ("Modify Data Through a View"): INSERT, UPDATE or DELETE;
//! - a synonym for a fence table: INSERT, UPDATE or DELETE; for a fence_admin
//!   procedure: EXECUTE;
//! - a table with a DML trigger that writes them ("CREATE TRIGGER": ALTER on
//!   the table, which ALTER on the schema implies), fired by INSERT, UPDATE
//!   or DELETE.
//!
//! A scalar or multi-statement function changes nothing ("CREATE FUNCTION"),
//! so EXECUTE on the schema with CREATE FUNCTION writes nothing.

use super::super::catalog::{PrincipalKind, Securable};
use super::super::rules::Context;
use super::code::admin_procedures;
use super::denies;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::{Goal, Node};
use super::right::Right;

/// One object a principal may create and then use.
struct Creatable {
    /// The permission on the database its CREATE needs.
    create: &'static str,
    /// The rights on the schema, one of which its use needs.
    uses: &'static [&'static str],
    goal: Goal,
    /// Whether it reaches the goal only by ownership chaining (a view's
    /// tables are checked as its owner on Babelfish too, and a procedure
    /// was followed on every engine before).
    chains_only: bool,
    /// What is created and how it is used, after "creates".
    how: &'static str,
}

const DATA: &[&str] = &["INSERT", "UPDATE", "DELETE"];

/// In order: the first a principal may use names its edge to each goal.
const CREATABLE: [Creatable; 7] = [
    Creatable {
        create: "CREATE PROCEDURE",
        uses: &["EXECUTE"],
        goal: Goal::WriteFence,
        chains_only: false,
        how: "a procedure",
    },
    Creatable {
        create: "CREATE PROCEDURE",
        uses: &["EXECUTE"],
        goal: Goal::RunAdmin,
        chains_only: false,
        how: "a procedure",
    },
    Creatable {
        create: "CREATE VIEW",
        uses: DATA,
        goal: Goal::WriteFence,
        chains_only: false,
        how: "a view over a fence table, written through",
    },
    Creatable {
        create: "CREATE FUNCTION",
        uses: DATA,
        goal: Goal::WriteFence,
        chains_only: true,
        how: "an inline table-valued function over a fence table, written through",
    },
    Creatable {
        create: "CREATE SYNONYM",
        uses: DATA,
        goal: Goal::WriteFence,
        chains_only: true,
        how: "a synonym for a fence table, written through",
    },
    Creatable {
        create: "CREATE SYNONYM",
        uses: &["EXECUTE"],
        goal: Goal::RunAdmin,
        chains_only: true,
        how: "a synonym for a fence_admin procedure",
    },
    Creatable {
        create: "CREATE TABLE",
        uses: DATA,
        goal: Goal::WriteFence,
        chains_only: true,
        how: "a table and on it a trigger (ALTER on the table, by the schema) that writes them, fired",
    },
];

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    let Some(owner) = ctx.tables_owner() else { return };
    let owned = |o: &str| o.eq_ignore_ascii_case(owner);
    // fence_admin's procedures chain from the new object only when they
    // share its owner.
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
        // A DENY that binds only sessions acting as someone else (a member
        // of db_denydatawriter, say) leaves the principal's own session be.
        let open = |target: &Securable, wanted: &str| {
            held.iter().copied().find(|r| {
                denies::reaches(ctx, r, target, wanted)
                    .is_some_and(|u| u.cutting.is_empty() && !u.denied.iter().any(|d| holders.contains(d)))
            })
        };
        let mut reached: Vec<Goal> = Vec::new();
        for c in &CREATABLE {
            if reached.contains(&c.goal)
                || c.goal == Goal::RunAdmin && !admin_chains
                || c.chains_only && !ctx.catalog.engine.chains_ownership
            {
                continue;
            }
            let Some(create) = open(&Securable::Database, c.create) else {
                continue;
            };
            for schema in ctx.catalog.schemas.iter().filter(|s| owned(&s.owner)) {
                let on = Securable::Schema {
                    schema: schema.name.clone(),
                };
                let Some(alter) = open(&on, "ALTER") else { continue };
                let Some((used, run)) = c.uses.iter().find_map(|u| open(&on, u).map(|r| (*u, r))) else {
                    continue;
                };
                graph.add(
                    Node::principal(&p.name),
                    &p.name,
                    Edge::new(
                        Node::Goal(c.goal),
                        Kind::Acts,
                        format!(
                            "{} on the database and ALTER on SCHEMA::{s}: creates {} in {s}, owned by {s}'s owner \
                             {owner} as the fence tables are, that chains to them, and uses it ({used} on \
                             SCHEMA::{s}), so it may {}",
                            c.create,
                            c.how,
                            c.goal.describe(),
                            s = schema.name
                        ),
                        format!("{}; {}; {}", create.evidence, alter.evidence, run.evidence),
                        format!("{} or {}", create.cut, alter.cut),
                    )
                    .on(format!("SCHEMA::{}", schema.name)),
                );
                reached.push(c.goal);
                break;
            }
        }
    }
}
