//! Writes a lending module makes through the procedures it runs. "EXECUTE
//! AS Clause": the context a module WITH EXECUTE AS switches to stays in
//! force in the modules it calls until it returns, so the EXEC of another
//! procedure is checked against that principal (unless the caller's and
//! the callee's owners chain, "Ownership Chains"), and so are the callee's
//! statements, unless its owner is the fence tables' and the chain skips
//! the check. "ADD SIGNATURE" (Countersignatures): a signature's rights are
//! lost when the signed module runs another, unless that one is
//! countersigned with the same key, which grants nothing by itself but
//! keeps them for the call. A callee's own EXECUTE AS or signatures lend
//! as they would to any caller.

use super::super::catalog::{Object, ObjectKind, Securable};
use super::super::module_text::referenced_tables;
use super::super::rules::Context;
use super::code::chain_owner;
use super::lent_targets::own as reached;
use super::lent_write::{Lender, Made, body as statements, held, lenders, lent};
use super::node::Goal;
use super::principals::hierarchy_note;
use super::right::Right;
use super::runners::callable;
use super::written_through::Through;
use crate::tsql::code_only;

/// How many calls deep a lent context is followed.
const DEPTH: usize = 4;

/// The first write (or fence_admin call, for `goal`) a procedure `m` runs
/// makes with `lender`'s rights kept, or unchecked by a chain from that
/// procedure's owner.
pub(super) fn made(
    ctx: &Context,
    rights: &[Right],
    to: (Goal, &[Through]),
    m: &Object,
    body: &str,
    lender: &Lender,
) -> Option<Made> {
    through(ctx, rights, to, m, body, lender, &mut vec![m.qualified_name()])
}

fn through(
    ctx: &Context,
    rights: &[Right],
    to: (Goal, &[Through]),
    m: &Object,
    body: &str,
    lender: &Lender,
    seen: &mut Vec<String>,
) -> Option<Made> {
    if seen.len() > DEPTH {
        return None;
    }
    let code = code_only(body);
    let owner = chain_owner(ctx, m);
    for p in ctx
        .catalog
        .objects
        .iter()
        .filter(|o| o.kind == ObjectKind::Procedure && callable(ctx, o))
    {
        let name = p.qualified_name();
        if seen.iter().any(|s| s.eq_ignore_ascii_case(&name))
            || referenced_tables(&code, &p.schema, [&p.name]).is_empty()
        {
            continue;
        }
        let Some(p_body) = statements(p) else { continue };
        let Some((call, call_evidence, call_cut)) = runs(ctx, rights, owner, p, lender) else {
            continue;
        };
        // An EXECUTE AS of its own replaces the caller's context; a
        // signature's rights carry only into a module countersigned with
        // its key.
        let own = lenders(ctx, p);
        let switches = own.iter().any(|l| l.key.is_none());
        let keeps = !switches
            && lender
                .key
                .as_ref()
                .is_none_or(|k| p.counter_signed_by.iter().any(|c| c.eq_ignore_ascii_case(k)));
        let mut contexts: Vec<&Lender> = own.iter().collect();
        if keeps {
            contexts.insert(0, lender);
        }
        seen.push(name.clone());
        let inner = reached(ctx, rights, to, p, p_body, &contexts, chain_owner(ctx, p)).or_else(|| {
            contexts
                .iter()
                .find_map(|c| through(ctx, rights, to, p, p_body, c, &mut seen.clone()))
        });
        seen.pop();
        let Some(inner) = inner else { continue };
        let kept = match lender.key.as_deref() {
            Some(key) if keeps => format!("; countersigned with {key}, it keeps that signature's rights"),
            _ => String::new(),
        };
        return Some(Made {
            what: format!("runs {name} ({call}{kept}); {name}'s text {}", inner.what),
            to: inner.to,
            table: inner.table,
            chained: false,
            evidence: format!("{call_evidence}; {name}: {}", inner.evidence),
            cut: format!("{call_cut} (or {})", inner.cut),
        });
    }
    None
}

/// Why the EXEC of `p` passes for a module owned by `owner` running with
/// `lender`'s rights: the owners chain, or the lender may run `p`.
fn runs(
    ctx: &Context,
    rights: &[Right],
    owner: Option<&str>,
    p: &Object,
    lender: &Lender,
) -> Option<(String, String, String)> {
    let name = p.qualified_name();
    let p_owner = ctx.catalog.owner_of(p);
    if ctx.catalog.engine.chains_ownership
        && let (Some(o), Some(q)) = (owner, p_owner)
        && o.eq_ignore_ascii_case(q)
    {
        return Some((
            format!("owned by {q} as the caller is: ownership chaining skips the EXECUTE check"),
            format!("{name} is owned by {q}"),
            format!("(move {name} to another owner)"),
        ));
    }
    let target = Securable::Object {
        schema: p.schema.clone(),
        name: p.name.clone(),
        column: None,
    };
    let right = lent(ctx, rights, &lender.principal, &target, "EXECUTE")?;
    Some((
        format!(
            "which {} may EXECUTE{}{}",
            lender.principal,
            held(right, &lender.principal),
            hierarchy_note(ctx, right, "EXECUTE", &name)
        ),
        right.evidence.clone(),
        right.cut.clone(),
    ))
}
