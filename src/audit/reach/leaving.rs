//! Which roles a principal may leave ("ALTER ROLE": dropping a member of a
//! user-defined role needs ALTER on it, ALTER ANY ROLE, membership in
//! db_securityadmin, or owning it, as the owner or a member of the owning
//! role). A DENY made to a role binds a session only while it is in the
//! role, so a member that may take itself out is not bound by it. Fixed
//! roles take and lose members by db_owner's members only, whom no DENY
//! binds, and no one leaves public.

use std::collections::BTreeSet;

use super::super::catalog::{PrincipalKind, Securable};
use super::super::rules::{Context, Leaving};
use super::fixed_roles::is_fixed;
use super::held;
use super::right::Right;

/// The sessions `principal` may make of itself by dropping memberships it
/// may drop: each with its principals (itself, its roles, public) and the
/// memberships dropped: one each, then all of them, so that a caller may
/// keep a role that holds the right it needs. `allowed` judges whether a
/// right to alter a role survives the DENYs as the roles stand.
pub(super) fn options(ctx: &Context, principal: &str, allowed: Judge) -> std::rc::Rc<Vec<Leaving>> {
    ctx.leavings(principal, || compute(ctx, principal, allowed))
}

/// Whether a right gives a permission on a securable past the DENYs.
pub(super) type Judge = fn(&Context, &Right, &Securable, &str) -> bool;

fn compute(ctx: &Context, principal: &str, allowed: Judge) -> Vec<Leaving> {
    let holders = ctx.holders(principal);
    let held = held::held(ctx);
    let droppable: Vec<(String, String)> = ctx
        .catalog
        .memberships
        .iter()
        .filter(|m| holders.contains(&m.member.to_lowercase()))
        .filter(|m| !is_fixed(&m.role) && !m.role.eq_ignore_ascii_case("public"))
        .filter(|m| {
            ctx.catalog
                .principal(&m.role)
                .is_none_or(|p| p.kind == PrincipalKind::Role)
        })
        .filter(|m| {
            let on = Securable::Principal { name: m.role.clone() };
            held.iter()
                .filter(|r| holders.contains(&r.holder.to_lowercase()) && !r.login)
                .any(|r| {
                    ["ALTER", "TAKE OWNERSHIP"]
                        .into_iter()
                        .any(|w| ctx.reaches(&r.permission, &on, w) && (r.undeniable || allowed(ctx, r, &on, w)))
                })
        })
        .map(|m| (m.member.clone(), m.role.clone()))
        .collect();
    if droppable.is_empty() {
        return Vec::new();
    }
    // One membership at a time first, so a finding names only what it
    // drops; then all of them.
    let mut out: Vec<Leaving> = droppable
        .iter()
        .map(|d| session(ctx, principal, std::slice::from_ref(d)))
        .collect();
    if droppable.len() > 1 {
        out.push(session(ctx, principal, &droppable));
    }
    out
}

/// The principals of a session of `principal` once `dropped` are gone.
fn session(ctx: &Context, principal: &str, dropped: &[(String, String)]) -> Leaving {
    let gone = |member: &str, role: &str| {
        dropped
            .iter()
            .any(|(m, r)| m.eq_ignore_ascii_case(member) && r.eq_ignore_ascii_case(role))
    };
    let mut seen = BTreeSet::from([principal.to_lowercase(), "public".to_string()]);
    let mut queue = vec![principal.to_lowercase()];
    while let Some(p) = queue.pop() {
        for m in &ctx.catalog.memberships {
            if m.member.eq_ignore_ascii_case(&p) && !gone(&m.member, &m.role) && seen.insert(m.role.to_lowercase()) {
                queue.push(m.role.to_lowercase());
            }
        }
    }
    (seen, dropped.to_vec())
}
