//! Procedures that run a lending module through an ownership chain
//! ("Ownership Chains": when a procedure runs another of the same owner,
//! the EXECUTE permission on the second is not evaluated). A procedure that
//! runs as its caller, or the part of one WITH EXECUTE AS that runs as its
//! caller again after EXECUTE AS CALLER ([`super::as_caller`]), and names
//! the module (in two parts, or in one in its own schema) leads whoever may
//! run it to the module, which a signature lends in that caller's context:
//! the caller need not hold EXECUTE on the module itself. Followed to any
//! depth, each caller once.

use std::collections::BTreeSet;

use super::super::catalog::{Object, ObjectKind};
use super::super::module_text::{contains_words, executed_unqualified, normalized};
use super::super::rules::Context;
use super::as_caller::caller_part;
use super::code::chain_owner;
use super::lent_write::body;

/// Each procedure that runs `m` through a chain, directly or through other
/// such procedures, with the chain of calls it makes (`ops.A runs ops.B`).
pub(super) fn chained_callers<'a>(ctx: &Context<'a>, m: &'a Object) -> Vec<(&'a Object, String)> {
    if !ctx.catalog.engine.chains_ownership {
        return Vec::new();
    }
    let Some(owner) = chain_owner(ctx, m) else {
        return Vec::new();
    };
    let mut out: Vec<(&'a Object, String)> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::from([m.qualified_name().to_lowercase()]);
    let mut next: Vec<(&'a Object, String)> = vec![(m, m.qualified_name())];
    while let Some((callee, chain)) = next.pop() {
        for p in ctx.catalog.objects.iter().filter(|p| {
            // The shipped procedures are the fence's own way in.
            p.kind == ObjectKind::Procedure
                && !ctx.is_shipped(p)
                && chain_owner(ctx, p).is_some_and(|o| o.eq_ignore_ascii_case(owner))
        }) {
            if seen.contains(&p.qualified_name().to_lowercase()) || !runs_as_caller(p, callee) {
                continue;
            }
            seen.insert(p.qualified_name().to_lowercase());
            let chain = format!("{} runs {chain}", p.qualified_name());
            out.push((p, chain.clone()));
            next.push((p, chain));
        }
    }
    out
}

/// Whether statements of `p` that run as its caller name `callee` as a
/// procedure they run.
fn runs_as_caller(p: &Object, callee: &Object) -> bool {
    let Some(text) = body(p) else { return false };
    let text = if p.runs_as().is_some() {
        caller_part(text)
    } else {
        text.to_string()
    };
    let two = normalized(&callee.qualified_name());
    contains_words(&normalized(&text), &two)
        || p.schema.eq_ignore_ascii_case(&callee.schema)
            && executed_unqualified(&text)
                .iter()
                .any(|n| n.eq_ignore_ascii_case(&callee.name))
}
