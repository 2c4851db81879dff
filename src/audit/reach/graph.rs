//! The graph itself: nodes with their spelling, edges in a stable order, and
//! who the policy trusts.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

use super::bound::Bound;
use super::drops::{Drops, Leaving};
use super::edge::{Edge, Kind};
use super::node::Node;

pub(crate) struct Graph {
    pub(super) edges: BTreeMap<Node, Vec<Edge>>,
    pub(super) names: BTreeMap<Node, String>,
    pub(super) trusted: BTreeSet<Node>,
    /// The nodes a finding may name, in order.
    pub(super) starts: Vec<Node>,
    /// For each database principal a session can act as (a user, a group,
    /// an application role): itself, its roles and public, lower-cased.
    pub(super) contexts: BTreeMap<Node, BTreeSet<String>>,
    /// The memberships and who may drop them.
    pub(super) drops: Rc<Drops>,
    /// What [`Graph::get_past`] answered, by its question.
    pub(super) answers: RefCell<HashMap<Question, Option<Dropped>>>,
    /// For each node, the logins that enter the database as it, gathered
    /// once the graph is built ([`Graph::logins_of`]).
    pub(super) entered_by: OnceCell<HashMap<Node, BTreeSet<Node>>>,
    /// The nodes with a path to some goal, DENYs and the order of steps
    /// aside, gathered once ([`Graph::may_reach_a_goal`]).
    pub(super) toward_goals: OnceCell<BTreeSet<Node>>,
}

/// The memberships (as spelled) a session drops to get past an edge's DENYs.
pub(crate) type Dropped = Leaving;

/// The session's roots, the holder kept, the DENYs' principals, and the
/// principals of each context the path acted in before.
type Question = (Vec<String>, String, Vec<String>, Vec<Vec<String>>);

impl Graph {
    /// Adds `edge` from `from`, naming `from` `name` if it has no name yet.
    pub(crate) fn add(&mut self, from: Node, name: &str, edge: Edge) {
        self.names.entry(from.clone()).or_insert_with(|| name.to_string());
        self.edges.entry(from).or_default().push(edge);
    }

    /// Names a node that acts (a login, a server role) and lets findings
    /// start from it.
    pub(crate) fn actor(&mut self, node: Node, name: &str) {
        self.names.entry(node.clone()).or_insert_with(|| name.to_string());
        self.starts.push(node);
    }

    /// Names a node.
    pub(crate) fn name_node(&mut self, node: Node, name: &str) {
        self.names.entry(node).or_insert_with(|| name.to_string());
    }

    /// The edges out of `node`, in the order they were added.
    pub(crate) fn edges(&self, node: &Node) -> &[Edge] {
        self.edges.get(node).map_or(&[], Vec::as_slice)
    }

    /// How a node reads in a finding: a principal by its name, a login as
    /// `login x`, a server role as `server role x`.
    pub(crate) fn name(&self, node: &Node) -> String {
        let spelled = self.names.get(node).cloned();
        match node {
            Node::Principal(n) | Node::Code(n) => spelled.unwrap_or_else(|| n.clone()),
            Node::Login(n) => format!("login {}", spelled.unwrap_or_else(|| n.clone())),
            Node::ServerRole(n) => format!("server role {}", spelled.unwrap_or_else(|| n.clone())),
            Node::Goal(g) => g.describe().to_string(),
        }
    }

    /// The bare name of a principal node, as the catalog spells it.
    pub(crate) fn spelling(&self, node: &Node) -> String {
        match node {
            Node::Principal(n) | Node::Login(n) | Node::ServerRole(n) | Node::Code(n) => {
                self.names.get(node).cloned().unwrap_or_else(|| n.clone())
            }
            Node::Goal(g) => g.describe().to_string(),
        }
    }

    /// The security context a path acts in once it reaches `node`: the
    /// node itself when a session can act as it, else none new.
    pub(crate) fn identity(&self, node: &Node) -> Option<Node> {
        self.contexts.contains_key(node).then(|| node.clone())
    }

    /// The memberships a session acting as `who` drops to get past the
    /// DENYs of an edge (none when none binds it), or `None` when they
    /// refuse it. A session that acts as no one new (a role's own reach)
    /// is refused only when the holder cannot drop its own way out. Else the
    /// session is `who` with its roles, and the holder when it joined it on
    /// the way; each of `passed`, the contexts the path acted in before, may
    /// drop links for it before changing to the next ("EXECUTE AS" stacks:
    /// ALTER ROLE, then EXECUTE AS, as often as the chain is long).
    /// Whether the context of `node` may drop a membership for a later one
    /// on a path ([`Self::get_past`]'s helpers): it holds a right to drop
    /// members from some role.
    pub(crate) fn may_help(&self, node: &Node) -> bool {
        self.contexts.get(node).is_some_and(|c| self.drops.alters_any(c))
    }

    pub(crate) fn get_past(&self, who: Option<&Node>, passed: &[Node], unless: &Bound) -> Option<Dropped> {
        if unless.is_empty() {
            return Some(Leaving::default());
        }
        let Some(context) = who.and_then(|w| self.contexts.get(w)) else {
            return (!unless.refused).then(|| unless.left.clone());
        };
        let Some(Node::Principal(w)) = who else {
            return None;
        };
        let mut roots = vec![w.clone()];
        if !context.contains(&unless.keep) {
            roots.push(unless.keep.clone());
        }
        let denied = unless.all_denied();
        let helpers: Vec<Vec<String>> = passed
            .iter()
            .filter(|p| Some(*p) != who)
            .filter_map(|p| self.contexts.get(p))
            .map(|c| c.iter().cloned().collect())
            .collect();
        let question: Question = (roots, unless.keep.clone(), denied, helpers);
        if let Some(known) = self.answers.borrow().get(&question) {
            return known.clone();
        }
        let (roots, keep, denied, helpers) = &question;
        let mut helpers: Vec<BTreeSet<String>> = helpers.iter().map(|h| h.iter().cloned().collect()).collect();
        let answer = self.drops.get_past(roots, keep, denied, &helpers).or_else(|| {
            // Only when the path's own contexts cannot: a detour is a longer
            // path, and the shorter one is the one to cut first.
            // Whom the path acted as before: none, and the session is still its
            // login's, which may then impersonate logins too.
            let detours = self.detours(who?, helpers.is_empty());
            helpers.extend(detours.iter().map(|d| d.context.clone()));
            let mut left = self.drops.get_past(roots, keep, denied, &helpers)?;
            left.detours = detours
                .into_iter()
                .filter(|d| {
                    left.dropped
                        .iter()
                        .any(|(_, role)| self.drops.may_alter(&d.context, &role.to_lowercase()))
                })
                .map(|d| (self.spelling(&d.user), d.via))
                .collect();
            Some(left)
        });
        self.answers.borrow_mut().insert(question.clone(), answer.clone());
        answer
    }

    pub(crate) fn is_trusted(&self, node: &Node) -> bool {
        self.trusted.contains(node)
    }

    /// The logins that enter the database as `node`: a path from a user
    /// does not pass through its own login, which is a start of its own.
    pub(crate) fn logins_of(&self, node: &Node) -> BTreeSet<Node> {
        // Asked at every step of every detour's search: one pass over the
        // edges, not one a question.
        let entered_by = self.entered_by.get_or_init(|| {
            let mut by: HashMap<Node, BTreeSet<Node>> = HashMap::new();
            for (from, edges) in self.edges.iter().filter(|(from, _)| matches!(from, Node::Login(_))) {
                for e in edges.iter().filter(|e| e.kind == Kind::Holds) {
                    by.entry(e.to.clone()).or_default().insert(from.clone());
                }
            }
            by
        });
        entered_by.get(node).cloned().unwrap_or_default()
    }

    /// Every node a finding may name, in a stable order.
    /// Whether `node` has a path to some goal when every DENY is left aside
    /// and any step may follow any other: a state at a node without one
    /// reaches nothing, and a search need not go on from it.
    pub(crate) fn may_reach_a_goal(&self, node: &Node) -> bool {
        self.toward_goals
            .get_or_init(|| {
                let mut into: BTreeMap<&Node, Vec<&Node>> = BTreeMap::new();
                for (from, edges) in &self.edges {
                    for e in edges {
                        into.entry(&e.to).or_default().push(from);
                    }
                }
                let mut seen: BTreeSet<Node> = BTreeSet::new();
                let mut queue: Vec<&Node> = into.keys().copied().filter(|n| matches!(n, Node::Goal(_))).collect();
                while let Some(n) = queue.pop() {
                    if !seen.insert(n.clone()) {
                        continue;
                    }
                    queue.extend(
                        into.get(n)
                            .into_iter()
                            .flatten()
                            .copied()
                            .filter(|m| !seen.contains(*m)),
                    );
                }
                seen
            })
            .contains(node)
    }

    pub(crate) fn starts(&self) -> &[Node] {
        &self.starts
    }

    /// Sorts each node's edges by a stable key (kind, target, step) so the
    /// shortest path found does not depend on the catalog's row order,
    /// keeping the order rights were ranked in among equals.
    pub(crate) fn settle(&mut self) {
        for edges in self.edges.values_mut() {
            edges.sort_by(|a, b| (a.kind, &a.to).cmp(&(b.kind, &b.to)));
        }
    }
}
