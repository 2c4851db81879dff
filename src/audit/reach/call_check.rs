//! Whether a module's EXEC of a procedure passes in a lent context
//! ("Ownership Chains": unchecked when the caller and the callee have one
//! owner; otherwise EXECUTE is checked against the principal the caller
//! runs as, "EXECUTE AS Clause").

use super::super::catalog::{Object, Securable};
use super::super::rules::Context;
use super::lent_write::{Lender, how_held, lent};
use super::right::Right;

/// Why the EXEC of `p` passes for a module owned by `owner` running with
/// `lender`'s rights: the owners chain, or the lender may run `p`.
pub(super) fn runs(
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
            "which {} may EXECUTE{}",
            lender.principal,
            how_held(ctx, right, &lender.principal, "EXECUTE", &name)
        ),
        right.evidence.clone(),
        right.cut.clone(),
    ))
}
