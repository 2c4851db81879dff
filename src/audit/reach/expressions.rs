//! CHECK and DEFAULT constraints and computed columns of the fence tables
//! that call a user function: the function runs inside every write the
//! shipped procedures make to the table, so whoever may ALTER it decides
//! the values a DEFAULT writes, or refuses the fence's writes through a
//! CHECK, as if it could write the table.

use super::super::catalog::{ObjectKind, Securable};
use super::super::module_text::{contains_words, normalized};
use super::super::rules::Context;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::{Goal, Node};
use super::principals::hierarchy_note;
use super::right::Right;

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    for e in ctx.catalog.table_expressions.iter().flatten() {
        let Some((schema, table)) = e.table.split_once('.') else {
            continue;
        };
        if !ctx.is_fence_table(schema, table) {
            continue;
        }
        let text = normalized(&e.definition);
        // Whole identifiers only: a CHECK calling app.ValidKey does not
        // call app.Valid. Identifiers compare case-insensitively, as under
        // the usual case-insensitive database collation.
        for f in ctx
            .catalog
            .objects
            .iter()
            .filter(|o| o.kind == ObjectKind::Function && contains_words(&text, &normalized(&o.qualified_name())))
        {
            let name = f.qualified_name();
            let target = Securable::Object {
                schema: f.schema.clone(),
                name: f.name.clone(),
                column: None,
            };
            for right in rights.iter().filter(|r| ctx.reaches(&r.permission, &target, "ALTER")) {
                graph.add(
                    Node::principal(&right.holder),
                    &right.holder,
                    Edge::new(
                        Node::Goal(Goal::WriteFence),
                        Kind::Acts,
                        format!(
                            "ALTER on {name}{}, which {} {} of {} calls: its rewrite runs inside every write the \
                             shipped procedures make to {}, deciding what a DEFAULT writes or refusing the write",
                            hierarchy_note(ctx, right, "ALTER", &name),
                            e.kind,
                            e.name,
                            e.table,
                            e.table
                        ),
                        format!(
                            "{}; {} {} on {}: {}",
                            right.evidence, e.kind, e.name, e.table, e.definition
                        ),
                        right.cut.clone(),
                    )
                    .on(e.table.clone()),
                );
            }
        }
    }
}
