//! Triggers a lent write fires. "CREATE TRIGGER": a DML trigger runs as its
//! caller unless it is created WITH EXECUTE AS, and "EXECUTE AS Clause":
//! the context a module switches to stays in force in what it runs. A
//! write a lending module makes to a table or view, when the principal it
//! runs as may make it there (or the chain from the module skips that
//! check), fires each enabled trigger on it for that event, and a trigger
//! that runs as its caller makes its own statements with that principal's
//! rights: checked against it, unless the chain from the owner of what the
//! trigger is on skips the check ([`super::writers`] follows that chain).
//! A trigger WITH EXECUTE AS of its own lends as it would to anyone
//! ([`super::lending`]); a signature's rights carry into it only when it is
//! countersigned with the same key ("ADD SIGNATURE").

use super::super::catalog::{Object, ObjectKind, Securable};
use super::super::rules::Context;
use super::broken_chains::chains;
use super::call_walk::Walk;
use super::code::chain_owner;
use super::lending_calls as calls;
use super::lent_names::Statements;
use super::lent_targets::own;
use super::lent_write::{Lender, Made, body as statements, context_user, how_held, lenders, lent, written};
use super::node::Goal;
use super::right::Right;
use super::trigger_header::{DATA, header};
use super::written_through::Through;

/// The first write (or fence_admin call, for `goal`) a trigger fired by a
/// write in `m`'s statements `body` makes with `lender`'s rights.
pub(super) fn made<'a>(
    ctx: &Context<'a>,
    rights: &[Right],
    to: (Goal, &[Through]),
    walk: &mut Walk<'a>,
    m: &Object,
    body: &str,
    lender: &Lender,
) -> Option<Made> {
    let verbs: Vec<&str> = written(body).into_iter().filter(|v| DATA.contains(v)).collect();
    if verbs.is_empty() {
        return None;
    }
    let text = Statements::new(ctx, m, body);
    let user = context_user(&[lender]);
    let owner = chain_owner(ctx, m);
    for t in ctx
        .catalog
        .objects
        .iter()
        .filter(|t| t.kind == ObjectKind::Trigger && !t.disabled && !ctx.is_shipped(t))
    {
        let Some(on) = t.parent.as_deref().and_then(|p| ctx.catalog.object(p)) else {
            continue;
        };
        let own_lenders = lenders(ctx, t);
        let keeps = !own_lenders.iter().any(|l| l.key.is_none())
            && lender
                .key
                .as_ref()
                .is_none_or(|k| t.counter_signed_by.iter().any(|c| c.eq_ignore_ascii_case(k)));
        let (Some(t_body), Some(definition)) = (statements(t), t.definition.as_deref()) else {
            continue;
        };
        if !keeps || !text.names(ctx, user, &on.schema, &on.name) {
            continue;
        }
        let events = header(definition).1;
        let Some((fires, evidence)) = verbs
            .iter()
            .filter(|v| events.contains(v))
            .find_map(|v| write_to(ctx, rights, on, v, lender, owner))
        else {
            continue;
        };
        let mut contexts = vec![lender];
        contexts.extend(own_lenders.iter());
        let inner = own(ctx, rights, to, t, t_body, &contexts, chain_owner(ctx, t))
            .filter(|inner| !inner.chained)
            .or_else(|| calls::made(ctx, rights, to, walk, t, t_body, lender));
        let Some(inner) = inner else { continue };
        let (name, on_name) = (t.qualified_name(), on.qualified_name());
        return Some(Made {
            what: format!(
                "{fires}, which fires its trigger {name}; {name} runs as its caller, so with {}'s rights, and its \
                 text {}",
                lender.principal, inner.what
            ),
            to: inner.to,
            table: inner.table,
            chained: false,
            evidence: format!(
                "{evidence}; sys.triggers: {name} is on {on_name}; {name}: {}",
                inner.evidence
            ),
            cut: inner.cut,
        });
    }
    None
}

/// `makes INSERT on ops.Orders, ...`, and its evidence, when the write
/// `v` to `on` passes: the chain from `owner` skips the check, or the
/// lender may make it.
fn write_to(
    ctx: &Context,
    rights: &[Right],
    on: &Object,
    v: &str,
    lender: &Lender,
    owner: Option<&str>,
) -> Option<(String, String)> {
    let name = on.qualified_name();
    if let Some(o) = chains(ctx, owner, on) {
        return Some((
            format!("makes {v} on {name}, owned by {o} as the caller is: ownership chaining skips the check"),
            format!("{name} is owned by {o}"),
        ));
    }
    let target = Securable::Object {
        schema: on.schema.clone(),
        name: on.name.clone(),
        column: None,
    };
    let right = lent(ctx, rights, &lender.principal, &target, v)?;
    Some((
        format!(
            "makes {v} on {name}, which {} may make{}",
            lender.principal,
            how_held(ctx, right, &lender.principal, v, &name)
        ),
        right.evidence.clone(),
    ))
}
