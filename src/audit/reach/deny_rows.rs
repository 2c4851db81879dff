//! Which DENY rows refuse a right, as "Permissions Hierarchy (Database
//! Engine)" and "DENY Object Permissions" describe them: a DENY of the
//! permission, or of one that covers or contains it, made anywhere that
//! contains the target, save a column-level DENY (which refuses that column
//! only), one a column-level GRANT overrides, and one the holder of CONTROL
//! where it is made may revoke. db_denydatawriter and db_denydatareader
//! count as DENYs made to them.

use std::collections::BTreeSet;

use super::super::catalog::{Permission, PermissionState, Securable};
use super::super::rules::Context;
use super::fixed_roles;
use super::right::Right;

/// Every principal (lower-cased) a DENY refusing `right` `wanted` on
/// `target` is made to, wherever it stands: a session holding one of them
/// is refused the right.
pub(super) fn refused_by(ctx: &Context, right: &Right, target: &Securable, wanted: &str) -> Vec<String> {
    applicable(ctx, right, target, wanted, &BTreeSet::new()).1
}

/// The principals (lower-cased) of the DENYs that refuse `right` `wanted`
/// on `target`: those among `holders`, which refuse it to every context
/// that holds it, and the others, which refuse it to the contexts that
/// contain them.
pub(super) fn applicable(
    ctx: &Context,
    right: &Right,
    target: &Securable,
    wanted: &str,
    holders: &BTreeSet<String>,
) -> (Vec<String>, Vec<String>) {
    let revocable = right.permission.permission.eq_ignore_ascii_case("CONTROL");
    sorted(ctx, right, target, wanted, holders, revocable)
}

/// Every principal (lower-cased) a DENY refusing `right` `wanted` on
/// `target` is made to, for a module's fixed text: a DENY binds there even
/// where the right is CONTROL over it, since the text revokes none.
pub(super) fn refused_in_fixed_text(ctx: &Context, right: &Right, target: &Securable, wanted: &str) -> Vec<String> {
    sorted(ctx, right, target, wanted, &BTreeSet::new(), false).1
}

/// [`applicable`]'s answer, leaving out the DENYs CONTROL where they are
/// made may revoke when `revocable`.
fn sorted(
    ctx: &Context,
    right: &Right,
    target: &Securable,
    wanted: &str,
    holders: &BTreeSet<String>,
    revocable: bool,
) -> (Vec<String>, Vec<String>) {
    let class = ctx.class_of(target);
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
        if revocable && ctx.contains(&right.permission.on, &d.on) && !ctx.implies(d, &ctx.class_of(&d.on), "CONTROL") {
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
pub(super) fn overridden_by_column(ctx: &Context, right: &Right, d: &Permission) -> bool {
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
