//! Which memberships a session may drop to get out from under a DENY, as a
//! fixpoint rather than a list of combinations. A DENY made to a role binds
//! a session only while the session is in that role ("DENY Object
//! Permissions"); "ALTER ROLE ... DROP MEMBER" takes the link out, for
//! whoever holds ALTER on the role past the DENYs of its own session. Every
//! link the session may drop that brings a DENY into it is dropped, one at a
//! time, as long as the session keeps the principal holding the right it is
//! after; a drop that keeps every role it may alter within its reach is
//! taken before one that does not, and each drop may lift a DENY of ALTER on
//! another role (leaving A first lets it leave B).
//!
//! Pure data, worked out once per catalog by [`super::leaving::drops`].

use std::collections::BTreeSet;

/// A right to drop members from a role: ALTER or TAKE OWNERSHIP on it by
/// the hierarchy, owning it, or being in the role that owns it.
#[derive(Clone, Debug)]
pub(crate) struct AlterRight {
    /// Lower-cased holder.
    pub(crate) holder: String,
    /// Lower-cased role.
    pub(crate) role: String,
    /// Lower-cased principals a DENY of the right is made to: a session
    /// that holds one of them is refused it. Empty for an owner.
    pub(crate) denied_by: Vec<String>,
}

/// The memberships of a catalog, who may drop members from which role, and
/// which principals any DENY is made to.
#[derive(Clone, Debug, Default)]
pub(crate) struct Drops {
    /// Every membership, `(member, role)` lower-cased.
    pub(crate) links: Vec<(String, String)>,
    /// The same, as the catalog spells them, for the statements named.
    pub(crate) spelled: Vec<(String, String)>,
    /// Whether each membership may be dropped at all: not from a fixed
    /// role (only db_owner's members change those) nor from public.
    pub(crate) droppable: Vec<bool>,
    pub(crate) alters: Vec<AlterRight>,
    /// Every principal a DENY is made to, lower-cased.
    pub(crate) deny_grantees: BTreeSet<String>,
}

impl Drops {
    /// The principals of a session from `roots` through the memberships not
    /// in `dropped`, with public.
    pub(crate) fn session(&self, roots: &[String], dropped: &BTreeSet<usize>) -> BTreeSet<String> {
        let mut seen: BTreeSet<String> = roots.iter().cloned().collect();
        seen.insert("public".into());
        let mut queue: Vec<String> = roots.to_vec();
        while let Some(p) = queue.pop() {
            for (i, (m, r)) in self.links.iter().enumerate() {
                if *m == p && !dropped.contains(&i) && seen.insert(r.clone()) {
                    queue.push(r.clone());
                }
            }
        }
        seen
    }

    /// The roles whose members `session` may drop, by its own rights past
    /// its own DENYs, or by a right of one of `helpers` (the sessions the
    /// path acted as before, which run their ALTER ROLE first) past theirs.
    fn alterable(&self, session: &BTreeSet<String>, helpers: &[BTreeSet<String>]) -> BTreeSet<String> {
        let passes =
            |a: &AlterRight, s: &BTreeSet<String>| s.contains(&a.holder) && !a.denied_by.iter().any(|d| s.contains(d));
        self.alters
            .iter()
            .filter(|a| passes(a, session) || helpers.iter().any(|h| passes(a, h)))
            .map(|a| a.role.clone())
            .collect()
    }

    /// Whether the session from `roots` minus `dropped` reaches a principal
    /// some DENY is made to through `role`.
    fn carries_deny(&self, role: &str, dropped: &BTreeSet<usize>) -> bool {
        self.session(&[role.to_string()], dropped)
            .iter()
            .any(|p| p != "public" && self.deny_grantees.contains(p))
    }

    /// The memberships (as spelled, in the order dropped) a session from
    /// `roots` drops so that none of `denied` is among its principals while
    /// `keep` still is; `None` when it cannot.
    pub(crate) fn get_past(
        &self,
        roots: &[String],
        keep: &str,
        denied: &[String],
        helpers: &[BTreeSet<String>],
    ) -> Option<Vec<(String, String)>> {
        let mut dropped: BTreeSet<usize> = BTreeSet::new();
        let mut order: Vec<usize> = Vec::new();
        loop {
            let session = self.session(roots, &dropped);
            if !session.contains(keep) {
                return None;
            }
            if !denied.iter().any(|d| session.contains(d)) {
                return Some(order.iter().map(|&i| self.spelled[i].clone()).collect());
            }
            let alterable = self.alterable(&session, helpers);
            let candidates: Vec<usize> = (0..self.links.len())
                .filter(|&i| {
                    let (m, r) = &self.links[i];
                    !dropped.contains(&i)
                        && self.droppable[i]
                        && session.contains(m)
                        && alterable.contains(r)
                        && self.carries_deny(r, &dropped)
                })
                .collect();
            let left_after = |i: usize| {
                let mut after = dropped.clone();
                after.insert(i);
                self.session(roots, &after)
            };
            // A drop that keeps every role the session may alter and stays
            // in comes first, so no later drop loses the right it needs; when
            // there is none, a drop that costs such a right is still a drop
            // the session may make now (the right was used, not kept).
            let keeps_rights = candidates.iter().copied().find(|&i| {
                let left = left_after(i);
                let still = self.alterable(&left, helpers);
                left.contains(keep)
                    && alterable
                        .iter()
                        .filter(|a| left.contains(*a))
                        .all(|a| still.contains(a))
            });
            let next = keeps_rights.or_else(|| candidates.iter().copied().find(|&i| left_after(i).contains(keep)))?;
            dropped.insert(next);
            order.push(next);
        }
    }
}
