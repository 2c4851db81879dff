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
//! refuses the right to every session that holds it, unless the session may
//! drop its way out of that role; one made to some member of a role that
//! holds the right only refuses it to contexts that contain that member,
//! which [`super::closure`] follows along each path. db_denydatawriter and
//! db_denydatareader refuse their members as DENYs on the database do.
//! Which DENY rows apply is [`super::deny_rows`]'s answer.

use super::super::catalog::{Permission, PermissionState, Securable};
use super::super::rules::Context;
use super::bound::Bound;
use super::deny_rows::{applicable, overridden_by_column};
use super::leaving;
use super::right::Right;

/// Whether `right` gives `wanted` on `target` past the database's DENYs:
/// `None` when it does not, else whom the DENYs bind. A DENY made to a
/// role some session may take itself out of ("ALTER ROLE ... DROP MEMBER") binds it only until it does, so it is no
/// cut for that session: the holder's own drops are named with the edge,
/// and a DENY the holder cannot drop is left for [`super::closure`] to
/// judge for each session that acts (a member that may drop a link higher
/// up, or that someone it acted as may drop).
pub(super) fn allows(ctx: &Context, right: &Right, target: &Securable, wanted: &str) -> Option<Bound> {
    let keep = right.holder.to_lowercase();
    if right.undeniable || right.login {
        return Some(Bound {
            keep,
            ..Bound::default()
        });
    }
    let holders = ctx.holders(&right.holder);
    let (cutting, denied) = applicable(ctx, right, target, wanted, &holders);
    if cutting.is_empty() {
        return Some(Bound {
            denied,
            keep,
            ..Bound::default()
        });
    }
    let own = leaving::holder_gets_past(ctx, &right.holder, &cutting);
    let refused = own.is_none();
    Some(Bound {
        denied,
        keep,
        cutting,
        refused,
        left: own.unwrap_or_default(),
    })
}

/// ` (a column-level GRANT overrides ...)` when a table-level DENY of
/// `wanted` made to a holder of `right` yields to it, for the step that
/// names it.
pub(super) fn column_override_note(ctx: &Context, right: &Right, target: &Securable, wanted: &str) -> String {
    let holders = ctx.holders(&right.holder);
    let class = ctx.class_of(target);
    let overridden = ctx.catalog.permissions.iter().find(|d| {
        d.state == PermissionState::Deny
            && holders.contains(&d.grantee.to_lowercase())
            && ctx.contains(&d.on, target)
            && ctx.implies(d, &class, wanted)
            && overridden_by_column(ctx, right, d)
    });
    match overridden {
        Some(d) => format!(
            " (a column-level GRANT overrides the table-level DENY {} ON {} TO {}, as SQL Server keeps for backward \
             compatibility unless common criteria compliance is enabled)",
            d.permission.to_uppercase(),
            ctx.describe(&d.on),
            d.grantee
        ),
        None => String::new(),
    }
}

/// Whether grant `p`, held as it stands, gives `wanted` on `target` past
/// the database's DENYs for some context that holds it: what FP003 asks
/// of a grant before naming it.
pub(crate) fn grant_survives(ctx: &Context, p: &Permission, target: &Securable, wanted: &str) -> bool {
    let right = Right {
        holder: p.grantee.clone(),
        permission: p.clone(),
        held: None,
        evidence: String::new(),
        cut: String::new(),
        plain_grant: p.state == PermissionState::Grant,
        login: false,
        undeniable: false,
        taken: false,
    };
    reaches(ctx, &right, target, wanted)
        .is_some_and(|b| !b.refused || leaving::some_member_gets_past(ctx, &right.holder, &b.cutting))
}

/// Whether `right` gives `wanted` on `target` by the hierarchy and past the
/// DENYs, as [`allows`] answers.
pub(super) fn reaches(ctx: &Context, right: &Right, target: &Securable, wanted: &str) -> Option<Bound> {
    if ctx.reaches(&right.permission, target, wanted) {
        allows(ctx, right, target, wanted)
    } else {
        None
    }
}
