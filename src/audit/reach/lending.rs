//! Procedures and DML triggers that lend one write: "EXECUTE AS Clause"
//! runs a module's statements as the principal it names (OWNER: the
//! module's owner; a trigger's is its table's), and "Module Signing" / "ADD
//! SIGNATURE" runs a signed module with the rights of the key's user added
//! to the caller's. Whoever may run such a procedure, or make a statement
//! that fires such a trigger, makes the writes its text makes with that
//! principal's rights (to a fence table, or through an object that writes
//! one), and the fence_admin procedures it runs ([`super::lent_targets`]),
//! and those of the procedures it runs and the triggers its writes fire
//! ([`super::lending_calls`]), with the users it switches to by EXECUTE AS
//! USER ([`super::lent_switch`]), and only those: the edge goes from the module to the goal (or to the object
//! written through), never to the principal, since the caller cannot do
//! anything else it may. SQL built at run time is [`super::runners`]' (the
//! caller then runs what it likes as that principal).

use std::borrow::Cow;

use super::super::catalog::{Object, ObjectKind};
use super::super::rules::Context;
use super::as_caller::lent_part;
use super::bound::Bound;
use super::call_walk::Walk;
use super::code::chain_owner;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::lent_switch::{switched, switched_part};
use super::lent_targets::own;
use super::lent_write::{Lender, body, lenders};
use super::node::{Goal, Node};
use super::right::Right;
use super::runners::callable;
use super::written_through::{Through, fence_synonyms};
use super::{callers, lending_calls as calls};
use crate::audit::module_text::may_write;

/// `through`: the objects a write goes through to the fence
/// ([`super::writers`]), to which the synonyms for the fence tables are
/// added here.
pub(super) fn edges<'a>(ctx: &Context<'a>, rights: &[Right], mut through: Vec<Through<'a>>, graph: &mut Graph) {
    through.extend(fence_synonyms(ctx));
    let mut walk = Walk::new(ctx);
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
        let own_contexts = lenders(ctx, m);
        let switches: Vec<Lender> = own_contexts
            .iter()
            .flat_map(|l| switched(ctx, rights, body, l))
            .collect();
        // After an EXECUTE AS CALLER the module runs as its caller again
        // ([`super::as_caller`]); a signature's rights are not the module's
        // context; a user switched to runs only the statements before the
        // REVERT ([`super::lent_switch`]).
        let lent = |l: &Lender| {
            if l.key.is_none() {
                lent_part(body)
            } else {
                Cow::Borrowed(body)
            }
        };
        let contexts: Vec<(&Lender, Cow<str>)> = own_contexts
            .iter()
            .map(|l| (l, lent(l)))
            .chain(switches.iter().map(|l| (l, switched_part(body, &l.principal).into())))
            .collect();
        for ((lender, body), goal) in contexts
            .iter()
            .flat_map(|c| [(c, Goal::WriteFence), (c, Goal::RunAdmin)])
        {
            let to = (goal, through.as_slice());
            // A call a chain from the module's own owner lets through is
            // [`super::code`]'s, which weighs the wrappers the fence roles
            // alone may run.
            let owner = (goal == Goal::RunAdmin).then(|| chain_owner(ctx, m)).flatten();
            let Some(made) = own(ctx, rights, to, m, body, &[lender], owner)
                .filter(|made| !made.chained)
                .or_else(|| calls::made(ctx, rights, to, &mut walk, m, body, lender))
            else {
                continue;
            };
            let mut edge = Edge::new(
                made.to.clone(),
                Kind::Acts,
                format!(
                    "{name} {} and its text {}: {caller} makes that {}, and {}",
                    lender.how,
                    made.what,
                    if goal == Goal::RunAdmin { "call" } else { "write" },
                    if made.anything {
                        format!("anything else {} may do, by the text it hands", lender.principal)
                    } else {
                        format!("nothing else {} may do", lender.principal)
                    },
                ),
                format!("{}; {}", lender.evidence, made.evidence),
                format!("{} (or {})", lender.cut, made.cut),
            );
            if !made.refused.is_empty() {
                // The caller's DENYs stay in force beside a signature's
                // rights ([`Lender::refusal`]).
                edge = edge.unless(Bound {
                    denied: made.refused.clone(),
                    keep: lender.principal.to_lowercase(),
                    ..Bound::default()
                });
            }
            if matches!(made.to, Node::Goal(_)) {
                edge = edge.on(made.table);
            }
            graph.add(Node::code(&name), &name, edge);
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
