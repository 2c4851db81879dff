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

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

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

/// The memberships (as spelled, in order) a session adds and drops to get
/// out from under a DENY: it joins roles first, for their rights over
/// other roles, then leaves the denied ones.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Leaving {
    /// `(member, role)` memberships added ("ALTER ROLE ... ADD MEMBER").
    pub(crate) joined: Vec<(String, String)>,
    /// `(member, role)` memberships dropped, in the order dropped.
    pub(crate) dropped: Vec<(String, String)>,
    /// The users the session acted as for some of the drops and came back
    /// from (REVERT), each with the impersonations that lead to it.
    pub(crate) detours: Vec<(String, Vec<String>)>,
}

/// The memberships of a catalog and who may drop members from which role.
#[derive(Clone, Debug, Default)]
pub(crate) struct Drops {
    /// Every membership, `(member, role)` lower-cased.
    links: Vec<(String, String)>,
    /// The same, as the catalog spells them, for the statements named.
    spelled: Vec<(String, String)>,
    /// Whether each membership may be dropped at all: not from a fixed
    /// role (only db_owner's members change those) nor from public.
    droppable: Vec<bool>,
    alters: Vec<AlterRight>,
    /// The memberships out of each member, by index into `links`, so a
    /// session is walked in time linear in its links.
    by_member: HashMap<String, Vec<usize>>,
    /// Each principal's name as the catalog spells it, by its lower-cased
    /// name, for the memberships a session adds.
    spellings: HashMap<String, String>,
    /// What [`Drops::get_past`] answered, by its question: the same holder
    /// and DENYs are asked about for every edge its right is on.
    answers: RefCell<HashMap<Question, Option<Leaving>>>,
}

/// What a drop costs the session, cheapest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Cost {
    /// Every right over a role it stays in is kept.
    Nothing,
    /// Only rights over roles that bring no DENY that matters are lost.
    UnneededRights,
    /// A right over a role it still has to leave is lost.
    NeededRights,
}

/// The session's roots, the principal kept, the DENYs' principals and the
/// helpers' sessions.
type Question = (Vec<String>, String, Vec<String>, Vec<BTreeSet<String>>);

impl Drops {
    /// The memberships `(member, role)` as spelled, whether each may be
    /// dropped, the rights to drop members, and every principal's spelling.
    pub(crate) fn new(
        spelled: Vec<(String, String)>,
        droppable: Vec<bool>,
        alters: Vec<AlterRight>,
        names: &[String],
    ) -> Drops {
        let links: Vec<(String, String)> = spelled
            .iter()
            .map(|(m, r)| (m.to_lowercase(), r.to_lowercase()))
            .collect();
        let mut by_member: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, (m, _)) in links.iter().enumerate() {
            by_member.entry(m.clone()).or_default().push(i);
        }
        let spellings = names.iter().map(|n| (n.to_lowercase(), n.clone())).collect();
        Drops {
            links,
            spelled,
            droppable,
            alters,
            by_member,
            spellings,
            answers: RefCell::default(),
        }
    }

    /// The principals of a session from `roots` through the memberships not
    /// in `dropped`, with public.
    pub(crate) fn session(&self, roots: &[String], dropped: &BTreeSet<usize>) -> BTreeSet<String> {
        let mut seen: BTreeSet<String> = roots.iter().cloned().collect();
        seen.insert("public".into());
        let mut queue: Vec<String> = roots.to_vec();
        while let Some(p) = queue.pop() {
            for &i in self.by_member.get(&p).map_or(&[][..], Vec::as_slice) {
                let r = &self.links[i].1;
                if !dropped.contains(&i) && seen.insert(r.clone()) {
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

    /// Whether a session of `session`'s principals may drop members from
    /// `role` (lower-cased) past its own DENYs.
    pub(crate) fn may_alter(&self, session: &BTreeSet<String>, role: &str) -> bool {
        self.alterable(session, &[]).contains(role)
    }

    /// Whether a role reaches one of `denying` (the principals a DENY that
    /// matters here is made to) through the memberships not in `dropped`.
    fn carries_deny(&self, role: &str, dropped: &BTreeSet<usize>, denying: &BTreeSet<String>) -> bool {
        self.session(&[role.to_string()], dropped)
            .iter()
            .any(|p| p != "public" && denying.contains(p))
    }

    /// The principals whose DENYs matter to a session after `denied`: those
    /// DENYs themselves and the DENYs of a right to drop members from a
    /// role. A DENY of anything else ("DENY Object Permissions": it refuses
    /// the permission it names, on the securable it names) is no reason to
    /// leave a role nor to stay out of one.
    fn denying(&self, denied: &[String]) -> BTreeSet<String> {
        denied
            .iter()
            .cloned()
            .chain(self.alters.iter().flat_map(|a| a.denied_by.iter().cloned()))
            .collect()
    }

    fn spelling(&self, name: &str) -> String {
        self.spellings.get(name).cloned().unwrap_or_else(|| name.to_string())
    }

    /// The memberships (as spelled) a session from `roots` adds and drops
    /// so that none of `denied` is among its principals while `keep` still
    /// is; `None` when it cannot. A role the session may add members to
    /// and that brings no DENY with it is joined when no drop is left to
    /// make: its rights may let the session leave a denied role, and
    /// staying in it costs nothing.
    pub(crate) fn get_past(
        &self,
        roots: &[String],
        keep: &str,
        denied: &[String],
        helpers: &[BTreeSet<String>],
    ) -> Option<Leaving> {
        let question: Question = (roots.to_vec(), keep.to_string(), denied.to_vec(), helpers.to_vec());
        if let Some(known) = self.answers.borrow().get(&question) {
            return known.clone();
        }
        let answer = self.work_out(roots, keep, denied, helpers);
        self.answers.borrow_mut().insert(question, answer.clone());
        answer
    }

    fn work_out(
        &self,
        roots: &[String],
        keep: &str,
        denied: &[String],
        helpers: &[BTreeSet<String>],
    ) -> Option<Leaving> {
        let mut roots = roots.to_vec();
        let joiner = roots.first()?.clone();
        let mut joined: Vec<(String, String)> = Vec::new();
        let mut dropped: BTreeSet<usize> = BTreeSet::new();
        let mut order: Vec<usize> = Vec::new();
        let denying = self.denying(denied);
        loop {
            let session = self.session(&roots, &dropped);
            if !session.contains(keep) {
                return None;
            }
            if !denied.iter().any(|d| session.contains(d)) {
                return Some(Leaving {
                    joined,
                    dropped: order.iter().map(|&i| self.spelled[i].clone()).collect(),
                    detours: Vec::new(),
                });
            }
            let alterable = self.alterable(&session, helpers);
            // Each role's own principals, walked once a round.
            let mut reach: HashMap<&str, BTreeSet<String>> = HashMap::new();
            let mut candidates: Vec<usize> = Vec::new();
            for (i, (m, r)) in self.links.iter().enumerate() {
                if dropped.contains(&i) || !self.droppable[i] || !session.contains(m) || !alterable.contains(r) {
                    continue;
                }
                let principals = reach
                    .entry(r)
                    .or_insert_with(|| self.session(std::slice::from_ref(r), &dropped));
                if principals.iter().any(|p| p != "public" && denying.contains(p)) {
                    candidates.push(i);
                }
            }
            // A drop whose role brings in neither the principal kept nor a
            // holder of a right over a role the session is in, or may join,
            // costs nothing:
            // every such drop is made at once, so a long chain of roles is
            // left in a round each rather than a search each.
            let needed: BTreeSet<&str> = self
                .alters
                .iter()
                .filter(|a| session.contains(&a.role) || !self.carries_deny(&a.role, &dropped, &denying))
                .map(|a| a.holder.as_str())
                .chain([keep])
                .collect();
            let free: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| {
                    reach[self.links[i].1.as_str()]
                        .iter()
                        .all(|p| p == "public" || !needed.contains(p.as_str()))
                })
                .collect();
            if !free.is_empty() {
                dropped.extend(free.iter().copied());
                order.extend(free);
                continue;
            }
            let left_after = |i: usize| {
                let mut after = dropped.clone();
                after.insert(i);
                self.session(&roots, &after)
            };
            // A drop that keeps every role the session may alter and stays
            // in comes first, so no later drop loses the right it needs; then
            // one that loses only rights over roles bringing no DENY that
            // matters (rights the session has no use for), whatever the
            // order the catalog lists them in; when there is neither, a drop
            // that costs a needed right is still a drop the session may make
            // now (the right was used, not kept).
            let mut cheapest: Option<(Cost, usize)> = None;
            for &i in &candidates {
                let left = left_after(i);
                if !left.contains(keep) {
                    continue;
                }
                let still = self.alterable(&left, helpers);
                let mut lost = alterable.iter().filter(|a| left.contains(*a) && !still.contains(*a));
                let cost = if lost.clone().next().is_none() {
                    Cost::Nothing
                } else if lost.all(|a| !self.carries_deny(a, &dropped, &denying)) {
                    Cost::UnneededRights
                } else {
                    Cost::NeededRights
                };
                if cheapest.is_none_or(|(c, _)| cost < c) {
                    cheapest = Some((cost, i));
                }
                if cost == Cost::Nothing {
                    break;
                }
            }
            if let Some((_, next)) = cheapest {
                dropped.insert(next);
                order.push(next);
                continue;
            }
            let joins: Vec<String> = alterable
                .iter()
                .filter(|r| !session.contains(*r) && !self.carries_deny(r, &dropped, &denying))
                .cloned()
                .collect();
            if joins.is_empty() {
                return None;
            }
            for role in joins {
                joined.push((self.spelling(&joiner), self.spelling(&role)));
                roots.push(role);
            }
        }
    }
}
