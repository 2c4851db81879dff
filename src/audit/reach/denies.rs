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
//! removes the edge the right gives, unless the holder may leave that role;
//! one made to some member of a role that holds the right only refuses it
//! to contexts that contain that member and cannot leave it, which
//! [`super::closure`] follows along each path. db_denydatawriter and
//! db_denydatareader refuse their members as DENYs on the database do.

use std::collections::BTreeSet;

use super::super::catalog::{Permission, PermissionState, Securable};
use super::super::rules::Context;
use super::bound::Bound;
use super::right::Right;
use super::{fixed_roles, leaving};

/// Whether `right` gives `wanted` on `target` past the database's DENYs:
/// `None` when every context that holds it is refused, else whom the DENYs
/// still bind. A DENY made to a role the holder may leave binds it only
/// until it does ("ALTER ROLE ... DROP MEMBER"), so it is no cut: the
/// memberships it drops first are named with the edge.
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
    let mut left = Vec::new();
    if !cutting.is_empty() {
        let options = leaving::options(ctx, &right.holder, plain);
        let (_, dropped) = options
            .iter()
            .find(|(session, _)| !cutting.iter().any(|d| session.contains(d)))?;
        left = dropped.clone();
    }
    Some(Bound { denied, keep, left })
}

/// Whether no DENY made to the holder of `right`, one of its roles or
/// public refuses it `wanted` on `target`, its roles as they stand.
pub(super) fn plain(ctx: &Context, right: &Right, target: &Securable, wanted: &str) -> bool {
    applicable(ctx, right, target, wanted, &ctx.holders(&right.holder))
        .0
        .is_empty()
}

/// The principals (lower-cased) of the DENYs that refuse `right` `wanted`
/// on `target`: those among `holders`, which refuse it to every context
/// that holds it, and the others, which refuse it to the contexts that
/// contain them.
fn applicable(
    ctx: &Context,
    right: &Right,
    target: &Securable,
    wanted: &str,
    holders: &BTreeSet<String>,
) -> (Vec<String>, Vec<String>) {
    let class = ctx.class_of(target);
    let control = right.permission.permission.eq_ignore_ascii_case("CONTROL");
    let fixed = fixed_roles::denies();
    let mut cutting = Vec::new();
    let mut bound = Vec::new();
    for d in ctx
        .catalog
        .permissions
        .iter()
        .filter(|d| d.state == PermissionState::Deny)
        .chain(fixed.iter())
    {
        let column = matches!(&d.on, Securable::Object { column: Some(_), .. });
        if column
            || !ctx.contains(&d.on, target)
            || !ctx.implies(d, &class, wanted)
            || overridden_by_column(ctx, right, d)
        {
            continue;
        }
        // CONTROL where the DENY is made revokes it, unless CONTROL is
        // what is denied there.
        if control && ctx.contains(&right.permission.on, &d.on) && !ctx.implies(d, &ctx.class_of(&d.on), "CONTROL") {
            continue;
        }
        let grantee = d.grantee.to_lowercase();
        let into = if holders.contains(&grantee) {
            &mut cutting
        } else {
            &mut bound
        };
        if !into.contains(&grantee) {
            into.push(grantee);
        }
    }
    (cutting, bound)
}

/// Whether `d`, a DENY, is one that `right`, a column-level GRANT on the
/// same table, overrides: a table-level DENY yields to a column-level GRANT
/// ("DENY Object Permissions"), kept for backward compatibility unless
/// `common criteria compliance enabled` is on. When the option could not be
/// read, the weaker case holds: the column GRANT wins.
fn overridden_by_column(ctx: &Context, right: &Right, d: &Permission) -> bool {
    let (
        Securable::Object {
            schema,
            name,
            column: Some(_),
        },
        Securable::Object {
            schema: ds,
            name: dn,
            column: None,
        },
    ) = (&right.permission.on, &d.on)
    else {
        return false;
    };
    let common_criteria = ctx.catalog.server_settings.and_then(|s| s.common_criteria_compliance) == Some(true);
    !common_criteria && schema.eq_ignore_ascii_case(ds) && name.eq_ignore_ascii_case(dn)
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
    reaches(ctx, &right, target, wanted).is_some()
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
