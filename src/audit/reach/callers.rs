//! Whoever may run a module: each right that implies EXECUTE on it, past
//! the DENYs, leads to the module's node, from which its edges say what
//! running it does.

use super::super::catalog::{Object, Securable};
use super::super::rules::Context;
use super::denies;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::Node;
use super::principals::hierarchy_note;
use super::right::Right;

/// An edge from each holder of EXECUTE on `m` to `m`'s node, once: a module
/// that both runs SQL built at run time and lends a write needs its callers
/// named one way.
pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph, m: &Object) {
    let name = m.qualified_name();
    let to = Node::code(&name);
    let target = Securable::Object {
        schema: m.schema.clone(),
        name: m.name.clone(),
        column: None,
    };
    for right in rights {
        let Some(unless) = denies::reaches(ctx, right, &target, "EXECUTE") else {
            continue;
        };
        let step = format!(
            "EXECUTE on {name}{}{}",
            hierarchy_note(ctx, right, "EXECUTE", &name),
            right.grant_option()
        );
        let from = right.node();
        if graph.edges(&from).iter().any(|e| e.to == to && e.step.step == step) {
            continue;
        }
        graph.add(
            from,
            &right.holder,
            Edge::new(to.clone(), Kind::Acts, step, right.evidence.clone(), right.cut.clone()).unless(unless),
        );
    }
}
