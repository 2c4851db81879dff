//! Which roles a session may leave ("ALTER ROLE": dropping a member of a
//! user-defined role needs ALTER on it, ALTER ANY ROLE, membership in
//! db_securityadmin, or owning it, as the owner or a member of the owning
//! role). A DENY made to a role binds a session only while it is in the
//! role, so a session that may take the link out is not bound by it: the
//! link may be any on the way up from the session's user (a role holding a
//! grant nested in a denied role), and whoever acts may drop it, not only
//! the holder of the right. Fixed roles take and lose members by
//! db_owner's members only, whom no DENY binds, and no one leaves public.

use std::collections::BTreeSet;
use std::rc::Rc;

use super::super::catalog::{PrincipalKind, Securable};
use super::super::rules::Context;
use super::drops::{AlterRight, Drops, Leaving};
use super::fixed_roles::is_fixed;
use super::{deny_rows, held};

/// The catalog's memberships and rights to drop members, worked out once.
pub(super) fn drops(ctx: &Context) -> Rc<Drops> {
    ctx.drops(|| compute(ctx))
}

fn compute(ctx: &Context) -> Drops {
    let catalog = ctx.catalog;
    let is_role = |name: &str| catalog.principal(name).is_none_or(|p| p.kind == PrincipalKind::Role);
    let droppable = |role: &str| !is_fixed(role) && !role.eq_ignore_ascii_case("public") && is_role(role);
    let spelled = catalog
        .memberships
        .iter()
        .map(|m| (m.member.clone(), m.role.clone()))
        .collect();
    let flags = catalog.memberships.iter().map(|m| droppable(&m.role)).collect();
    let roles: BTreeSet<String> = catalog
        .memberships
        .iter()
        .filter(|m| droppable(&m.role))
        .map(|m| m.role.clone())
        // A role with no members yet may still be joined for its rights.
        .chain(
            catalog
                .principals
                .iter()
                .filter(|p| p.kind == PrincipalKind::Role && droppable(&p.name))
                .map(|p| p.name.clone()),
        )
        .collect();
    let mut alters = Vec::new();
    for right in held::held(ctx).iter().filter(|r| !r.login) {
        for role in &roles {
            let on = Securable::Principal { name: role.clone() };
            for wanted in ["ALTER", "TAKE OWNERSHIP"] {
                if !ctx.reaches(&right.permission, &on, wanted) {
                    continue;
                }
                let denied_by = if right.undeniable {
                    Vec::new()
                } else {
                    deny_rows::refused_by(ctx, right, &on, wanted)
                };
                alters.push(AlterRight {
                    holder: right.holder.to_lowercase(),
                    role: role.to_lowercase(),
                    denied_by,
                });
            }
        }
    }
    let names: Vec<String> = catalog.principals.iter().map(|p| p.name.clone()).collect();
    Drops::new(spelled, flags, alters, &names)
}

/// The memberships a session of `holder` alone drops so that none of
/// `denied` binds it while it keeps `holder`: `None` when it cannot.
pub(super) fn holder_gets_past(ctx: &Context, holder: &str, denied: &[String]) -> Option<Leaving> {
    let holder = holder.to_lowercase();
    drops(ctx).get_past(std::slice::from_ref(&holder), &holder, denied, &[])
}

/// The users, groups and application roles in `holder` (or holding it)
/// that may drop their way out from under every one of `denied` and keep
/// `holder`, each with the memberships it adds and drops: for each, a
/// right `holder` is refused as it stands still reaches.
pub(super) fn members_getting_past(ctx: &Context, holder: &str, denied: &[String]) -> Vec<(String, Leaving)> {
    let holder = holder.to_lowercase();
    let drops = drops(ctx);
    ctx.catalog
        .principals
        .iter()
        .filter(|p| p.kind != PrincipalKind::Role && ctx.holders(&p.name).contains(&holder))
        .filter_map(|p| {
            drops
                .get_past(&[p.name.to_lowercase()], &holder, denied, &[])
                .map(|left| (p.name.clone(), left))
        })
        .collect()
}

/// Whether some user, group or application role in `holder` (or holding
/// it) may drop its way out from under every one of `denied` and keep
/// `holder`: then a right `holder` is refused as it stands still reaches.
pub(super) fn some_member_gets_past(ctx: &Context, holder: &str, denied: &[String]) -> bool {
    !members_getting_past(ctx, holder, denied).is_empty()
}
