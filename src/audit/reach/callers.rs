//! Whoever may run a module: each right that implies EXECUTE on it, or on a
//! synonym for it of its owner ("Synonyms (Database Engine)": checked on
//! the synonym; "Ownership Chains": the module is not checked), past the
//! DENYs, leads to the module's node, from which its edges say what
//! running it does.

use super::super::catalog::Object;
use super::super::rules::Context;
use super::chained_callers::chained_callers;
use super::denies;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::Node;
use super::right::Right;
use super::synonym_routes::{right_step, securable, ways_to};

/// An edge from each holder of EXECUTE on `m` to `m`'s node, once: a module
/// that both runs SQL built at run time and lends a write needs its callers
/// named one way.
pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph, m: &Object) {
    let name = m.qualified_name();
    let to = Node::code(&name);
    // EXECUTE on a synonym of the module's owner runs it unchecked
    // ([`super::synonym_routes`]).
    for by in ways_to(ctx, m) {
        for right in rights {
            let Some(unless) = denies::reaches(ctx, right, &securable(by), "EXECUTE") else {
                continue;
            };
            let (step, evidence) = right_step(ctx, right, "EXECUTE", by, m);
            let from = right.node();
            if graph.edges(&from).iter().any(|e| e.to == to && e.step.step == step) {
                continue;
            }
            graph.add(
                from,
                &right.holder,
                Edge::new(
                    to.clone(),
                    Kind::Acts,
                    step,
                    format!("{}{evidence}", right.evidence),
                    right.cut.clone(),
                )
                .unless(unless),
            );
        }
    }
    for (p, chain) in chained_callers(ctx, m) {
        for right in rights {
            let Some(unless) = denies::reaches(ctx, right, &securable(p), "EXECUTE") else {
                continue;
            };
            let (step, evidence) = right_step(ctx, right, "EXECUTE", p, p);
            graph.add(
                right.node(),
                &right.holder,
                Edge::new(
                    to.clone(),
                    Kind::Acts,
                    format!(
                        "{step}, and {chain}, each of one owner: ownership chaining skips the EXECUTE check on \
                         {name}"
                    ),
                    format!("{}{evidence}", right.evidence),
                    right.cut.clone(),
                )
                .unless(unless),
            );
        }
    }
}
