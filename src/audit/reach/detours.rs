//! Detours: a session acts as a user it may impersonate, drops a membership
//! there, and comes back. "EXECUTE AS" changes the session's context and
//! "REVERT" returns it to the one before; what it did in between (an
//! ALTER ROLE ... DROP MEMBER included) stays done. So the users a context
//! may impersonate, and those they may impersonate in turn, lend it their
//! rights to drop members from roles without the path ever staying in
//! them.
//!
//! Only an impersonation no DENY binds is a detour: one a DENY binds would
//! need drops of its own first, which a detour does not chain (it errs
//! towards a path not found, never towards a false one).

use std::collections::{BTreeSet, VecDeque};

use super::graph::Graph;
use super::node::Node;

/// A user a context may become and come back from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Detour {
    /// The user acted as.
    pub(crate) user: Node,
    /// Its principals (itself, its roles, public), lower-cased: the session
    /// its ALTER ROLE runs in.
    pub(crate) context: BTreeSet<String>,
    /// The impersonation steps from the context to it, first to last.
    pub(crate) via: Vec<String>,
}

/// The users `from` may impersonate, directly or through others, each
/// with the steps that lead to it: breadth first, so each by its shortest
/// chain.
impl Graph {
    pub(crate) fn detours(&self, from: &Node) -> Vec<Detour> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::from([from.clone()]);
        let mut queue = VecDeque::from([(from.clone(), Vec::<String>::new())]);
        while let Some((at, via)) = queue.pop_front() {
            for edge in self.edges(&at) {
                if !edge.reverts || !edge.unless.is_empty() {
                    continue;
                }
                let Some(context) = self.contexts.get(&edge.to) else {
                    continue;
                };
                if !seen.insert(edge.to.clone()) {
                    continue;
                }
                let mut steps = via.clone();
                steps.push(edge.step.step.clone());
                out.push(Detour {
                    user: edge.to.clone(),
                    context: context.clone(),
                    via: steps.clone(),
                });
                queue.push_back((edge.to.clone(), steps));
            }
        }
        out
    }
}
