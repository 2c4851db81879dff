//! CHECK and DEFAULT constraints and computed columns of the fence tables
//! that call a user function: the function runs inside every write the
//! shipped procedures make to the table, and so does every function it
//! calls, and every function those call, to the end of the chain (by their
//! text and by `sys.sql_expression_dependencies`). Whoever may ALTER any
//! function of the chain decides the values a DEFAULT writes, or refuses the
//! fence's writes through a CHECK, as if it could write the table.

use std::collections::BTreeMap;

use super::super::catalog::{Object, ObjectKind, TableExpression};
use super::super::module_text::{contains_words, normalized, referenced_tables};
use super::super::rules::Context;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::module_change;
use super::node::{Goal, Node};
use super::right::Right;

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    for e in ctx.catalog.table_expressions.iter().flatten() {
        let Some((schema, table)) = e.table.split_once('.') else {
            continue;
        };
        if !ctx.is_fence_table(schema, table) {
            continue;
        }
        for (f, chain) in called(ctx, e) {
            let calls = chain
                .iter()
                .map(|caller| format!(", which {caller} calls"))
                .collect::<String>();
            for right in rights {
                let Some((alter, unless)) = module_change::alters(ctx, right, f) else {
                    continue;
                };
                graph.add(
                    right.node(),
                    &right.holder,
                    Edge::new(
                        Node::Goal(Goal::WriteFence),
                        Kind::Acts,
                        format!(
                            "{alter}{calls}, which {} {} of {} calls: its rewrite runs inside every write the shipped \
                             procedures make to {}, deciding what a DEFAULT writes or refusing the write",
                            e.kind, e.name, e.table, e.table
                        ),
                        format!(
                            "{}; {} {} on {}: {}",
                            right.evidence, e.kind, e.name, e.table, e.definition
                        ),
                        right.cut.clone(),
                    )
                    .on(e.table.clone())
                    .unless(unless),
                );
            }
        }
    }
}

/// Every user function `e` runs, with the functions that call it on the
/// way (innermost caller first): those its text names, whole identifiers
/// only (a CHECK calling app.ValidKey does not call app.Valid), then, to a
/// fixpoint, those each of them names or depends on.
fn called<'a>(ctx: &Context<'a>, e: &TableExpression) -> Vec<(&'a Object, Vec<String>)> {
    let functions: Vec<&Object> = ctx
        .catalog
        .objects
        .iter()
        .filter(|o| o.kind == ObjectKind::Function && !o.schema.is_empty())
        .collect();
    let text = normalized(&e.definition);
    // Each function reached, by lower-cased name, with its callers.
    let mut reached: BTreeMap<String, (&Object, Vec<String>)> = BTreeMap::new();
    let mut queue: Vec<&Object> = Vec::new();
    for f in functions
        .iter()
        .filter(|f| contains_words(&text, &normalized(&f.qualified_name())))
    {
        reached.insert(f.qualified_name().to_lowercase(), (f, Vec::new()));
        queue.push(f);
    }
    while let Some(caller) = queue.pop() {
        let caller_name = caller.qualified_name();
        let chain = reached[&caller_name.to_lowercase()].1.clone();
        for g in &functions {
            let key = g.qualified_name().to_lowercase();
            if reached.contains_key(&key) || !calls(ctx, caller, g) {
                continue;
            }
            let mut via = vec![caller_name.clone()];
            via.extend(chain.iter().cloned());
            reached.insert(key, (g, via));
            queue.push(g);
        }
    }
    reached.into_values().collect()
}

/// Whether function `caller` calls `callee`: its text names it (its own
/// CREATE aside), or the engine recorded the dependency.
fn calls(ctx: &Context, caller: &Object, callee: &Object) -> bool {
    let callee_name = callee.qualified_name();
    if caller.qualified_name().eq_ignore_ascii_case(&callee_name) {
        return false;
    }
    let named = caller
        .definition
        .as_deref()
        .is_some_and(|d| !referenced_tables(d, &callee.schema, [&callee.name]).is_empty());
    named
        || ctx.catalog.dependencies.iter().flatten().any(|d| {
            d.referencing.eq_ignore_ascii_case(&caller.qualified_name())
                && d.referenced.eq_ignore_ascii_case(&callee_name)
        })
}
