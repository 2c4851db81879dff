//! Procedures and DML triggers that lend one write: "EXECUTE AS Clause"
//! runs a module's statements as the principal it names (OWNER: the
//! module's owner; a trigger's is its table's), and "Module Signing" / "ADD
//! SIGNATURE" runs a signed module with the rights of the key's user added
//! to the caller's. Whoever may run such a procedure, or make a statement
//! that fires such a trigger, makes the writes its text makes with that
//! principal's rights, and those of the procedures it runs
//! ([`super::lending_calls`]), and only those: the edge goes from the
//! module to the goal, never to the principal, since the caller cannot do
//! anything else it may. SQL built at run time is [`super::runners`]' (the
//! caller then runs what it likes as that principal).

use super::super::catalog::{Object, ObjectKind};
use super::super::rules::Context;
use super::code::chain_owner;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::lent_write::{body, lenders, own_write};
use super::node::{Goal, Node};
use super::right::Right;
use super::runners::callable;
use super::{callers, lending_calls as calls};
use crate::audit::module_text::may_write;

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    for m in ctx.catalog.objects.iter().filter(|o| lending_kind(ctx, o)) {
        let Some(body) = body(m) else { continue };
        let name = m.qualified_name();
        // A trigger runs for whoever makes a statement that fires it, which
        // [`super::writers`] follows to this node.
        let caller = if m.kind == ObjectKind::Trigger {
            "whoever fires it"
        } else {
            "its caller"
        };
        let mut lends = false;
        for lender in lenders(ctx, m) {
            let Some(made) =
                own_write(ctx, rights, body, &[&lender], None).or_else(|| calls::made(ctx, rights, m, body, &lender))
            else {
                continue;
            };
            graph.add(
                Node::code(&name),
                &name,
                Edge::new(
                    Node::Goal(Goal::WriteFence),
                    Kind::Acts,
                    format!(
                        "{name} {} and its text {}: {caller} makes that write, and nothing else {p} may do",
                        lender.how,
                        made.what,
                        p = lender.principal,
                    ),
                    format!("{}; {}", lender.evidence, made.evidence),
                    format!("{} (or {})", lender.cut, made.cut),
                )
                .on(made.table),
            );
            lends = true;
        }
        if lends && m.kind == ObjectKind::Procedure {
            callers::edges(ctx, rights, graph, m);
        }
    }
}

/// Procedures and enabled DML triggers: both may be created WITH EXECUTE
/// AS and signed ("CREATE TRIGGER", "ADD SIGNATURE").
fn lending_kind(ctx: &Context, o: &Object) -> bool {
    (o.kind == ObjectKind::Procedure || o.kind == ObjectKind::Trigger && !o.disabled) && callable(ctx, o)
}

/// Enabled DML triggers that run as someone else and may write (or run a
/// procedure that does), with the
/// owner of what they are on: [`super::writers`] leads each write that
/// fires one to its node, whose edge this module adds when the write it
/// lends is allowed.
pub(super) fn triggers<'a>(ctx: &Context<'a>) -> Vec<(&'a Object, String)> {
    ctx.catalog
        .objects
        .iter()
        .filter(|o| o.kind == ObjectKind::Trigger && lending_kind(ctx, o))
        .filter(|o| body(o).is_some_and(may_write) && !lenders(ctx, o).is_empty())
        .filter_map(|o| chain_owner(ctx, o).map(|owner| (o, owner.to_string())))
        .collect()
}
