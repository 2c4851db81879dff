//! Writes a lending module makes through the procedures it runs and the
//! triggers its writes fire ([`super::lent_triggers`]). "EXECUTE
//! AS Clause": the context a module WITH EXECUTE AS switches to stays in
//! force in the modules it calls until it returns, so the EXEC of another
//! procedure is checked against that principal (unless the caller's and
//! the callee's owners chain, "Ownership Chains"), and so are the callee's
//! statements, unless its owner is the fence tables' and the chain skips
//! the check. "ADD SIGNATURE" (Countersignatures): a signature's rights are
//! lost when the signed module runs another, unless that one is
//! countersigned with the same key, which grants nothing by itself but
//! keeps them for the call. A callee's own EXECUTE AS or signatures lend
//! as they would to any caller. "Nesting Stored Procedures": calls nest up
//! to 32 levels, so every call is followed, however deep
//! ([`super::call_walk`] walks them once per audit).

use super::super::catalog::Object;
use super::super::rules::Context;
use super::call_walk::{Step, Walk};
use super::lent_write::{Lender, Made};
use super::node::Goal;
use super::right::Right;
use super::written_through::Through;

/// The first write (or fence_admin call, for `goal`) that code `m` runs or
/// fires makes with `lender`'s rights kept, or unchecked by a chain from
/// that code's owner.
pub(super) fn made<'a>(
    ctx: &Context<'a>,
    rights: &[Right],
    to: (Goal, &[Through]),
    walk: &mut Walk<'a>,
    m: &'a Object,
    body: &str,
    lender: &Lender,
) -> Option<Made> {
    let (steps, inner) = walk.path(ctx, rights, to, m, body, lender)?;
    Some(steps.iter().rev().fold(inner, |inner, s| wrap(s, inner)))
}

/// `inner`, made by the code `s` reaches, as its caller's text makes it.
fn wrap(s: &Step, inner: Made) -> Made {
    let name = &s.name;
    let kept = match s.key.as_deref() {
        Some(key) if s.keeps => format!("; countersigned with {key}, it keeps that signature's rights"),
        _ => String::new(),
    };
    let reaches = match &s.on {
        None => format!("runs {name} ({}{kept})", s.call),
        Some(on) => format!("{}, which fires {name}, a trigger on {on}{kept}", s.call),
    };
    Made {
        what: format!("{reaches}; {name}'s text {}", inner.what),
        to: inner.to,
        table: inner.table,
        chained: false,
        anything: inner.anything,
        evidence: format!("{}; {name}: {}", s.evidence, inner.evidence),
        cut: format!("{} (or {})", s.cut, inner.cut),
        refused: inner.refused,
    }
}
