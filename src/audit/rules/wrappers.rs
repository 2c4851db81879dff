//! A wrapper over shipped procedures that hands nobody anything: a module
//! that names only shipped procedures, builds no SQL, and that only
//! principals who already hold each of those procedures through their fence
//! role can run (a wrapper over Inspect granted to fence_reader). FP008 does
//! not report it; one that anyone else can reach it still does.

use std::collections::BTreeSet;

use super::super::catalog::{Object, ObjectKind, Securable};
use super::Context;
use super::execute::allowed;
use super::module_text_names;

/// Whether `o`, naming `refs`, reaches no one beyond those refs' own roles.
pub(crate) fn contained(ctx: &Context, o: &Object, refs: &BTreeSet<String>) -> bool {
    // Another module that names it would pass its reach on, unchecked. That
    // reads every module's text, so it comes after the cheap answers.
    granted_contained(ctx, o, refs)
        && !ctx
            .catalog
            .objects
            .iter()
            .any(|c| c.kind.is_module() && !std::ptr::eq(c, o) && module_text_names(ctx.catalog, c, &o.schema, &o.name))
}

/// Whether the grants that reach `o`, naming `refs`, hand no one more than
/// those refs' own roles: [`contained`] but for the modules that call it,
/// which the reachability graph follows as routes of their own.
pub(crate) fn granted_contained(ctx: &Context, o: &Object, refs: &BTreeSet<String>) -> bool {
    let fence = ctx.policy.fence_schema.to_lowercase();
    if refs.is_empty()
        || !matches!(o.kind, ObjectKind::Procedure | ObjectKind::Function)
        || o.definition.is_none()
        || ctx.permissions_hidden.is_some()
        || refs.iter().any(|r| r.to_lowercase().starts_with(&format!("{fence}.")))
    {
        return false;
    }
    // Its owner runs it too, and must be an administrator or the chain's own.
    match ctx.catalog.owner_of(o) {
        Some(owner) if ctx.is_admin(owner) || ctx.tables_owner().is_some_and(|t| t.eq_ignore_ascii_case(owner)) => {}
        _ => return false,
    }
    let needed: BTreeSet<String> = refs.iter().map(|r| r.to_lowercase()).collect();
    let target = Securable::Object {
        schema: o.schema.clone(),
        name: o.name.clone(),
        column: None,
    };
    // Whoever may run it, rewrite it or take it, by any permission that
    // implies one of those on it.
    ctx.grants()
        .filter(|p| {
            ["EXECUTE", "ALTER", "TAKE OWNERSHIP"]
                .iter()
                .any(|w| ctx.reaches(p, &target, w))
        })
        .filter(|p| !ctx.is_admin(&p.grantee))
        .all(|p| {
            let mut reached: Vec<String> = ctx.members_of(&p.grantee).into_iter().collect();
            reached.push(p.grantee.to_lowercase());
            !ctx.is_everyones(&p.grantee)
                && p.permission.eq_ignore_ascii_case("EXECUTE")
                && reached
                    .iter()
                    .all(|r| ctx.is_service(r) && needed.is_subset(&allowed(ctx, r)))
        })
}
