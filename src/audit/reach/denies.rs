//! Database-level DENYs, as "Permissions Hierarchy (Database Engine)"
//! describes the check: a permission is refused when it, or a permission
//! that covers it or contains it (DENY UPDATE on a schema, DENY CONTROL on a
//! table), is denied to any principal of the security context, the user
//! itself, one of its roles, or public. A fixed database role's documented
//! rights are refused the same way to a member denied them.
//!
//! A DENY binds neither an owner on what it owns nor whoever holds CONTROL
//! over where the DENY is made, who may revoke it, unless the DENY is of
//! CONTROL itself; a column-level DENY refuses that column only, so it leaves
//! a table's rows writable.
//!
//! A DENY made to the holder of a right, to a role it is in, or to public
//! removes the edge the right gives; one made to some member of a role that
//! holds the right only refuses it to contexts that contain that member,
//! which [`super::closure`] follows along each path.

use super::super::catalog::{PermissionState, Securable};
use super::super::rules::Context;
use super::right::Right;

/// Whether `right` gives `wanted` on `target` past the database's DENYs:
/// `None` when every context that holds it is refused, else the principals
/// (lower-cased) whose contexts are.
pub(super) fn allows(ctx: &Context, right: &Right, target: &Securable, wanted: &str) -> Option<Vec<String>> {
    if right.undeniable || right.login {
        return Some(Vec::new());
    }
    let class = ctx.class_of(target);
    let control = right.permission.permission.eq_ignore_ascii_case("CONTROL");
    let holders = ctx.holders(&right.holder);
    let mut bound = Vec::new();
    for d in ctx
        .catalog
        .permissions
        .iter()
        .filter(|d| d.state == PermissionState::Deny)
    {
        let column = matches!(&d.on, Securable::Object { column: Some(_), .. });
        if column || !ctx.contains(&d.on, target) || !ctx.implies(d, &class, wanted) {
            continue;
        }
        // CONTROL where the DENY is made revokes it, unless CONTROL is
        // what is denied there.
        if control && ctx.contains(&right.permission.on, &d.on) && !ctx.implies(d, &ctx.class_of(&d.on), "CONTROL") {
            continue;
        }
        let grantee = d.grantee.to_lowercase();
        if holders.contains(&grantee) {
            return None;
        }
        if !bound.contains(&grantee) {
            bound.push(grantee);
        }
    }
    Some(bound)
}

/// Whether `right` gives `wanted` on `target` by the hierarchy and past the
/// DENYs, as [`allows`] answers.
pub(super) fn reaches(ctx: &Context, right: &Right, target: &Securable, wanted: &str) -> Option<Vec<String>> {
    if ctx.reaches(&right.permission, target, wanted) {
        allows(ctx, right, target, wanted)
    } else {
        None
    }
}
