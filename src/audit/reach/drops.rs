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
//! Principals are numbered and sets of them are bits: every round weighs
//! every candidate drop against the session it leaves, and a long chain of
//! roles asks that of sets of names the length of the chain.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};

use super::bits::Bits;

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
#[derive(Clone, Debug)]
pub(crate) struct Drops {
    /// Every principal named by a membership or a right, by its number.
    names: Vec<String>,
    numbers: HashMap<String, usize>,
    /// Every membership, `(member, role)` by number.
    links: Vec<(usize, usize)>,
    /// The same, as the catalog spells them, for the statements named.
    spelled: Vec<(String, String)>,
    /// Whether each membership may be dropped at all: not from a fixed
    /// role (only db_owner's members change those) nor from public.
    droppable: Vec<bool>,
    alters: Vec<Alter>,
    /// The memberships out of each member and into each role, by index
    /// into `links`, so a session is walked in time linear in its links.
    by_member: Vec<Vec<usize>>,
    by_role: Vec<Vec<usize>>,
    /// Each principal's name as the catalog spells it, by its lower-cased
    /// name, for the memberships a session adds.
    spellings: HashMap<String, String>,
    /// What [`Drops::get_past`] answered, by its question: the same holder
    /// and DENYs are asked about for every edge its right is on.
    answers: RefCell<HashMap<Question, Option<Leaving>>>,
}

/// An [`AlterRight`] by the numbers of its principals.
#[derive(Clone, Debug)]
struct Alter {
    holder: usize,
    role: usize,
    denied_by: Vec<usize>,
}

/// Every session holds public, numbered first.
const PUBLIC: usize = 0;

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
        let mut numbers: HashMap<String, usize> = HashMap::new();
        let mut all: Vec<String> = Vec::new();
        let mut number = |name: &str| {
            *numbers.entry(name.to_string()).or_insert_with(|| {
                all.push(name.to_string());
                all.len() - 1
            })
        };
        number("public");
        let links: Vec<(usize, usize)> = spelled
            .iter()
            .map(|(m, r)| (number(&m.to_lowercase()), number(&r.to_lowercase())))
            .collect();
        let alters: Vec<Alter> = alters
            .iter()
            .map(|a| Alter {
                holder: number(&a.holder),
                role: number(&a.role),
                denied_by: a.denied_by.iter().map(|d| number(d)).collect(),
            })
            .collect();
        let mut by_member: Vec<Vec<usize>> = vec![Vec::new(); all.len()];
        let mut by_role: Vec<Vec<usize>> = vec![Vec::new(); all.len()];
        for (i, &(m, r)) in links.iter().enumerate() {
            by_member[m].push(i);
            by_role[r].push(i);
        }
        let spellings = names.iter().map(|n| (n.to_lowercase(), n.clone())).collect();
        Drops {
            names: all,
            numbers,
            links,
            spelled,
            droppable,
            alters,
            by_member,
            by_role,
            spellings,
            answers: RefCell::default(),
        }
    }

    /// The principals of a session from `roots` through the memberships not
    /// in `dropped`, with public.
    fn session(&self, roots: &[usize], dropped: &Bits) -> Bits {
        let mut seen = Bits::with_size(self.names.len());
        seen.insert(PUBLIC);
        for &r in roots {
            seen.insert(r);
        }
        let mut queue: Vec<usize> = roots.to_vec();
        while let Some(p) = queue.pop() {
            for &i in self.by_member.get(p).map_or(&[][..], Vec::as_slice) {
                let r = self.links[i].1;
                if !dropped.contains(i) && seen.insert(r) {
                    queue.push(r);
                }
            }
        }
        seen
    }

    /// The principals whose session, through the memberships not in
    /// `dropped`, holds one of `targets` other than public: walked back
    /// from them once, rather than a session walked for each principal. A
    /// session never goes on through public, so neither does this.
    fn reaching(&self, targets: &Bits, dropped: &Bits) -> Bits {
        let mut seen = Bits::with_size(self.names.len());
        let mut queue: Vec<usize> = targets.iter().filter(|&t| t != PUBLIC).collect();
        for &t in &queue {
            seen.insert(t);
        }
        while let Some(p) = queue.pop() {
            if p == PUBLIC {
                continue;
            }
            for &i in self.by_role.get(p).map_or(&[][..], Vec::as_slice) {
                let m = self.links[i].0;
                if !dropped.contains(i) && seen.insert(m) {
                    queue.push(m);
                }
            }
        }
        seen
    }

    /// The roles whose members `session` may drop, by its own rights past
    /// its own DENYs, or by a right of one of `helpers` (the sessions the
    /// path acted as before, which run their ALTER ROLE first) past theirs.
    fn alterable(&self, session: &Bits, helpers: &[Bits]) -> Bits {
        let passes = |a: &Alter, s: &Bits| s.contains(a.holder) && !a.denied_by.iter().any(|&d| s.contains(d));
        let mut out = Bits::with_size(self.names.len());
        for a in &self.alters {
            if passes(a, session) || helpers.iter().any(|h| passes(a, h)) {
                out.insert(a.role);
            }
        }
        out
    }

    /// Whether one of `session`'s principals (lower-cased) holds a right to
    /// drop members from some role: only such a context may help another
    /// get past a DENY.
    pub(crate) fn alters_any(&self, session: &BTreeSet<String>) -> bool {
        session
            .iter()
            .filter_map(|n| self.numbers.get(n))
            .any(|&n| self.alters.iter().any(|a| a.holder == n))
    }

    /// Whether a session of `session`'s principals (lower-cased) may drop
    /// members from `role` past its own DENYs.
    pub(crate) fn may_alter(&self, session: &BTreeSet<String>, role: &str) -> bool {
        let Some(&role) = self.numbers.get(role) else {
            return false;
        };
        let mut bits = Bits::with_size(self.names.len());
        for n in session.iter().filter_map(|n| self.numbers.get(n)) {
            bits.insert(*n);
        }
        self.alterable(&bits, &[]).contains(role)
    }

    /// The principals whose DENYs matter to a session after `denied`: those
    /// DENYs themselves and the DENYs of a right to drop members from a
    /// role. A DENY of anything else ("DENY Object Permissions": it refuses
    /// the permission it names, on the securable it names) is no reason to
    /// leave a role nor to stay out of one.
    fn denying(&self, denied: &[usize]) -> Bits {
        let mut out = Bits::with_size(self.names.len());
        for &d in denied.iter().chain(self.alters.iter().flat_map(|a| &a.denied_by)) {
            out.insert(d);
        }
        out
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
        let joiner = roots.first()?.clone();
        // A principal no membership nor right names is numbered after the
        // catalog's, for this question only.
        let mut extra: Vec<String> = Vec::new();
        let mut number = |name: &String| {
            self.numbers.get(name).copied().unwrap_or_else(|| {
                let at = extra.iter().position(|e| e == name).unwrap_or_else(|| {
                    extra.push(name.clone());
                    extra.len() - 1
                });
                self.names.len() + at
            })
        };
        let mut roots: Vec<usize> = roots.iter().map(&mut number).collect();
        let keep = number(&keep.to_string());
        let denied: Vec<usize> = denied.iter().map(&mut number).collect();
        // A helper's principal outside the catalog holds no right to drop.
        let helpers: Vec<Bits> = helpers
            .iter()
            .map(|h| {
                let mut bits = Bits::with_size(self.names.len());
                for n in h.iter().filter_map(|n| self.numbers.get(n)) {
                    bits.insert(*n);
                }
                bits
            })
            .collect();
        let mut joined: Vec<(String, String)> = Vec::new();
        let mut dropped = Bits::with_size(self.links.len());
        let mut order: Vec<usize> = Vec::new();
        let denying = self.denying(&denied);
        loop {
            let session = self.session(&roots, &dropped);
            if !session.contains(keep) {
                return None;
            }
            if !denied.iter().any(|&d| session.contains(d)) {
                return Some(Leaving {
                    joined,
                    dropped: order.iter().map(|&i| self.spelled[i].clone()).collect(),
                    detours: Vec::new(),
                });
            }
            let alterable = self.alterable(&session, &helpers);
            // The roles that bring a DENY that matters into the session.
            let carriers = self.reaching(&denying, &dropped);
            let candidates: Vec<usize> = (0..self.links.len())
                .filter(|&i| {
                    let (m, r) = self.links[i];
                    !dropped.contains(i)
                        && self.droppable[i]
                        && session.contains(m)
                        && alterable.contains(r)
                        && carriers.contains(r)
                })
                .collect();
            // A drop whose role brings in neither the principal kept nor a
            // holder of a right over a role the session is in, or may join,
            // costs nothing:
            // every such drop is made at once, so a long chain of roles is
            // left in a round each rather than a search each.
            let mut needed = Bits::with_size(self.names.len());
            needed.insert(keep);
            for a in &self.alters {
                if session.contains(a.role) || !carriers.contains(a.role) {
                    needed.insert(a.holder);
                }
            }
            let needing = self.reaching(&needed, &dropped);
            let free: Vec<usize> = candidates
                .iter()
                .copied()
                .filter(|&i| !needing.contains(self.links[i].1))
                .collect();
            if !free.is_empty() {
                for &i in &free {
                    dropped.insert(i);
                }
                order.extend(free);
                continue;
            }
            // A drop that keeps every role the session may alter and stays
            // in comes first, so no later drop loses the right it needs; then
            // one that loses only rights over roles bringing no DENY that
            // matters (rights the session has no use for), whatever the
            // order the catalog lists them in; when there is neither, a drop
            // that costs a needed right is still a drop the session may make
            // now (the right was used, not kept).
            let mut cheapest: Option<(Cost, usize)> = None;
            for &i in &candidates {
                let mut after = dropped.clone();
                after.insert(i);
                let left = self.session(&roots, &after);
                if !left.contains(keep) {
                    continue;
                }
                let still = self.alterable(&left, &helpers);
                let lost: Vec<usize> = alterable
                    .iter()
                    .filter(|&a| left.contains(a) && !still.contains(a))
                    .collect();
                let cost = if lost.is_empty() {
                    Cost::Nothing
                } else if lost.iter().all(|&a| !carriers.contains(a)) {
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
            // Joined in the order of their names, as the catalog's reader
            // would list them.
            let mut joins: Vec<usize> = alterable
                .iter()
                .filter(|&r| !session.contains(r) && !carriers.contains(r))
                .collect();
            if joins.is_empty() {
                return None;
            }
            joins.sort_by(|&a, &b| self.names[a].cmp(&self.names[b]));
            for role in joins {
                joined.push((self.spelling(&joiner), self.spelling(&self.names[role])));
                roots.push(role);
            }
        }
    }
}
