//! The edges of the reachability graph.

use super::super::finding::Step;
use super::bound::Bound;
use super::node::Node;

/// How an edge passes rights on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// The source holds the target's rights as they stand, by no act of its
    /// own: role membership, a login entering the database as its user,
    /// sysadmin entering as dbo. Trust passes along it: a member of a
    /// trusted role is trusted as that role.
    Holds,
    /// The source can make itself the target, or do what the target stands
    /// for, by an act: impersonating, adding a member, resetting a
    /// password, changing code, using a right on a goal.
    Acts,
    /// A grant the deploy makes by design (EXECUTE on a fence_admin
    /// procedure to the fence role it is meant for): it counts only on a
    /// path that has already taken an act, never for the role's members.
    Designed,
}

/// One edge: `from` reaches `to` by `step`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Edge {
    pub(crate) to: Node,
    pub(crate) kind: Kind,
    pub(crate) step: Step,
    /// For an edge into a goal, the object reached (`fence.Resource`).
    pub(crate) object: Option<String>,
    /// The database principals (lower-cased) a DENY binds on this edge:
    /// whoever acts as one of them, or as a member of one, is refused it
    /// unless it may leave them and keep the right's holder.
    pub(crate) unless: Bound,
    /// A node the path must have passed through for the edge to count: the
    /// principal whose act (adding a member) the edge rests on.
    pub(crate) after: Option<Node>,
    /// Whether the session can come back from `to` by REVERT (EXECUTE AS
    /// USER or LOGIN), keeping what it did there.
    pub(crate) reverts: bool,
}

impl Edge {
    pub(crate) fn new(
        to: Node,
        kind: Kind,
        step: impl Into<String>,
        evidence: impl Into<String>,
        cut: impl Into<String>,
    ) -> Self {
        Self {
            to,
            kind,
            step: Step {
                step: step.into(),
                evidence: evidence.into(),
                cut: cut.into(),
            },
            object: None,
            unless: Bound::default(),
            after: None,
            reverts: false,
        }
    }

    pub(crate) fn on(mut self, object: impl Into<String>) -> Self {
        self.object = Some(object.into());
        self
    }

    /// Counts only on a path that passed through `node` first.
    pub(crate) fn after(mut self, node: Node) -> Self {
        self.after = Some(node);
        self
    }

    /// An impersonation the session can come back from by REVERT.
    pub(crate) fn reverts(mut self) -> Self {
        self.reverts = true;
        self
    }

    /// Refused to whoever acts as one of `bound`'s denied principals or a
    /// member of one, unless it drops its way out; the path's step names
    /// the memberships dropped first.
    pub(crate) fn unless(mut self, bound: Bound) -> Self {
        self.unless = bound;
        self
    }
}
