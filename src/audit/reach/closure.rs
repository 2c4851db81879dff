//! The closure of the graph from one node: breadth first, so each goal is
//! reached by a shortest path, and in the graph's settled edge order, so the
//! same catalog always gives the same path.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use super::super::finding::Step;
use super::bound::note;
use super::edge::Kind;
use super::graph::{Dropped, Graph};
use super::node::{Goal, Node};

/// A node, whether every step to it so far only held rights, whose
/// security context the path acts in (the last user it became), which a
/// DENY made to that user or one of its roles binds, and whom it acted as
/// first. Every context the path acted in before the current one may drop
/// memberships for the later ones ([`passed`]).
type State = (Node, bool, Option<Node>, Option<Node>);

/// How each state was first reached: the state before, its edge's index,
/// and the memberships dropped to get past the edge's DENYs.
type Previous = HashMap<State, (State, usize, Dropped)>;

/// A goal reached, with the path and the object at its end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Reached {
    pub(crate) path: Vec<Step>,
    pub(crate) object: String,
    /// The nodes the path passes through after the start, in order.
    pub(crate) through: Vec<Node>,
}

/// The shortest path from `start` to each goal it reaches, leaving out the
/// first steps into `avoid`. A path counts a [`Kind::Designed`] grant only
/// after an act: a fence role's members run its procedures by design, but
/// whoever can make itself a member does not.
pub(crate) fn shortest(graph: &Graph, start: &Node, avoid: &BTreeSet<Node>) -> BTreeMap<Goal, Reached> {
    let mut previous: Previous = HashMap::new();
    let mut seen: BTreeSet<State> = BTreeSet::new();
    let mut queue: VecDeque<State> = VecDeque::new();
    let mut found = BTreeMap::new();
    let first: State = (start.clone(), true, graph.identity(start), graph.identity(start));
    seen.insert(first.clone());
    queue.push_back(first.clone());
    while let Some(state) = queue.pop_front() {
        let (node, pure, who, actor) = &state;
        for (i, edge) in graph.edges(node).iter().enumerate() {
            if *node == *start && avoid.contains(&edge.to) {
                continue;
            }
            if edge.kind == Kind::Designed && *pure {
                continue;
            }
            if edge
                .after
                .as_ref()
                .is_some_and(|a| !visited(&previous, &state, &first, a))
            {
                continue;
            }
            let passed = if edge.unless.is_empty() {
                Vec::new()
            } else {
                passed(&previous, &state, &first)
            };
            let Some(dropped) = graph.get_past(who.as_ref(), &passed, &edge.unless) else {
                continue;
            };
            let who = graph.identity(&edge.to).or_else(|| who.clone());
            // The first context acted in counts only when it may help a
            // later one past a DENY: paths that differ in a first context
            // that cannot are one, and the states stay linear in the nodes
            // (500 users who may impersonate one another were cubic).
            let actor = actor.clone().or_else(|| who.clone().filter(|w| graph.may_help(w)));
            let next: State = (edge.to.clone(), *pure && edge.kind == Kind::Holds, who, actor);
            if let Node::Goal(goal) = &edge.to {
                if !found.contains_key(goal) {
                    let (path, through) = walk(graph, &previous, &state, &first, (i, &dropped));
                    found.insert(
                        *goal,
                        Reached {
                            path,
                            object: edge.object.clone().unwrap_or_default(),
                            through,
                        },
                    );
                }
                continue;
            }
            // The start is never passed through again, and a node with no
            // way on to a goal is no way there.
            if edge.to == *start || !graph.may_reach_a_goal(&edge.to) || !seen.insert(next.clone()) {
                continue;
            }
            previous.insert(next.clone(), (state.clone(), i, dropped));
            queue.push_back(next);
        }
    }
    found
}

/// The security contexts the path to `state` acted in before its current
/// one, first to last: "EXECUTE AS" stacks, so each ran its ALTER ROLE
/// before it changed to the next, and what it did stays done.
fn passed(previous: &Previous, state: &State, first: &State) -> Vec<Node> {
    let mut out: Vec<Node> = Vec::new();
    let mut at = state;
    loop {
        if let Some(who) = &at.2
            && Some(who) != state.2.as_ref()
            && !out.contains(who)
        {
            out.push(who.clone());
        }
        if at == first {
            break;
        }
        match previous.get(at) {
            Some((prev, _, _)) => at = prev,
            None => break,
        }
    }
    if let Some(actor) = &state.3
        && Some(actor) != state.2.as_ref()
        && !out.contains(actor)
    {
        out.push(actor.clone());
    }
    out.reverse();
    out
}

/// Whether the path to `state` passed through `node`, its own node included.
fn visited(previous: &Previous, state: &State, first: &State, node: &Node) -> bool {
    let mut at = state;
    loop {
        if at.0 == *node {
            return true;
        }
        if at == first {
            return false;
        }
        match previous.get(at) {
            Some((prev, _, _)) => at = prev,
            None => return false,
        }
    }
}

fn walk(
    graph: &Graph,
    previous: &Previous,
    last: &State,
    first: &State,
    (last_edge, dropped): (usize, &Dropped),
) -> (Vec<Step>, Vec<Node>) {
    let step = |state: &State, i: usize, dropped: &Dropped| {
        let mut step = graph.edges(&state.0)[i].step.clone();
        step.step.push_str(&note(dropped));
        step
    };
    let mut steps = vec![step(last, last_edge, dropped)];
    let mut through = Vec::new();
    let mut at = last.clone();
    while at != *first {
        through.push(at.0.clone());
        let (prev, i, dropped) = previous.get(&at).expect("every reached state has a previous one");
        steps.push(step(prev, *i, dropped));
        at = prev.clone();
    }
    steps.reverse();
    through.reverse();
    (steps, through)
}

/// Why `start` is trusted, if it is: the policy names it, or it holds a
/// trusted principal's rights by membership or as its login
/// (`member of db_owner`). Only [`Kind::Holds`] steps pass trust on.
pub(crate) fn trusted_as(graph: &Graph, start: &Node) -> Option<String> {
    if graph.is_trusted(start) {
        return Some("named by the policy".into());
    }
    let mut previous: HashMap<Node, (Node, String)> = HashMap::new();
    let mut queue = VecDeque::from([start.clone()]);
    let mut seen = BTreeSet::from([start.clone()]);
    while let Some(node) = queue.pop_front() {
        for edge in graph.edges(&node).iter().filter(|e| e.kind == Kind::Holds) {
            if !seen.insert(edge.to.clone()) {
                continue;
            }
            previous.insert(edge.to.clone(), (node.clone(), edge.step.step.clone()));
            if graph.is_trusted(&edge.to) {
                let mut steps = Vec::new();
                let mut at = edge.to.clone();
                while let Some((prev, step)) = previous.get(&at) {
                    steps.push(step.clone());
                    at = prev.clone();
                }
                steps.reverse();
                return Some(steps.join(", "));
            }
            queue.push_back(edge.to.clone());
        }
    }
    None
}
