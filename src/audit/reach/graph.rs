//! The graph itself: nodes with their spelling, edges in a stable order, and
//! who the policy trusts.

use std::collections::{BTreeMap, BTreeSet};

use super::bound::Bound;
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
    /// For each of them, the contexts it may make of itself by leaving
    /// roles it may drop itself from.
    pub(super) leavings: BTreeMap<Node, Vec<BTreeSet<String>>>,
}

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

    /// Whether a DENY made to one of `unless.denied` binds a session acting
    /// as `who`: `who` is one of them, or in one of their roles, and cannot
    /// leave those roles while keeping the role that holds the right.
    pub(crate) fn denied(&self, who: &Node, unless: &Bound) -> bool {
        let Some(context) = self.contexts.get(who) else {
            return false;
        };
        let bound = |c: &BTreeSet<String>| unless.denied.iter().any(|u| c.contains(u));
        if !bound(context) {
            return false;
        }
        let keeps = |c: &BTreeSet<String>| c.contains(&unless.keep);
        !self
            .leavings
            .get(who)
            .into_iter()
            .flatten()
            .any(|c| keeps(c) && !bound(c))
    }

    pub(crate) fn is_trusted(&self, node: &Node) -> bool {
        self.trusted.contains(node)
    }

    /// The logins that enter the database as `node`: a path from a user
    /// does not pass through its own login, which is a start of its own.
    pub(crate) fn logins_of(&self, node: &Node) -> BTreeSet<Node> {
        self.edges
            .iter()
            .filter(|(from, edges)| {
                matches!(from, Node::Login(_)) && edges.iter().any(|e| e.kind == Kind::Holds && e.to == *node)
            })
            .map(|(from, _)| from.clone())
            .collect()
    }

    /// Every node a finding may name, in a stable order.
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
