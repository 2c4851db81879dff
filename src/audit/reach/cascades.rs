//! Cascading foreign keys ("Primary and foreign key constraints", cascading
//! referential integrity): a foreign key on a fence table whose ON DELETE or
//! ON UPDATE is CASCADE, SET NULL or SET DEFAULT makes a DELETE or UPDATE of
//! the referenced table delete or change fence rows. SQL Server checks the
//! statement's permission on the referenced table only, never a permission
//! on the table the cascade writes, so whoever may delete or update the
//! referenced table writes the fence table. Cascades go on from table to
//! table ("the specified cascading actions also apply for those rows"), so
//! a key on a table a cascade writes counts as one on a fence table.
//!
//! Each referenced table is a node whose edge names the key and the
//! statement that drops it; holders of the right that starts the cascade
//! lead to it, and [`super::writers`] follows code that writes it as it
//! follows code that writes a fence table.

use super::super::catalog::{ForeignKey, Securable};
use super::super::rules::Context;
use super::denies;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::{Goal, Node};
use super::principals::hierarchy_note;
use super::right::Right;
use crate::tsql::quote_qualified;

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    let keys = cascading(ctx);
    for key in &keys {
        let parent = Node::code(&key.referenced);
        graph.name_node(parent.clone(), &key.referenced);
        let (schema, table) = split(&key.table);
        let to = if ctx.is_fence_table(schema, table) {
            Node::Goal(Goal::WriteFence)
        } else {
            Node::code(&key.table)
        };
        let statements = key.writing_statements();
        let (verbs, clauses): (Vec<&str>, Vec<String>) = statements.into_iter().unzip();
        let mut edge = Edge::new(
            to,
            Kind::Acts,
            format!(
                "a {} on {} writes {} through its foreign key {} ({}): SQL Server checks no permission on {} for a \
                 cascading action",
                verbs.join(" or "),
                key.referenced,
                key.table,
                key.name,
                clauses.join(", "),
                key.table
            ),
            format!(
                "sys.foreign_keys: {} on {} references {}, {}",
                key.name,
                key.table,
                key.referenced,
                clauses.join(", ")
            ),
            format!(
                "ALTER TABLE {} DROP CONSTRAINT {};",
                quote_qualified(schema, table),
                crate::tsql::quote_name(&key.name)
            ),
        );
        if ctx.is_fence_table(schema, table) {
            edge = edge.on(key.table.clone());
        }
        graph.add(parent, &key.referenced, edge);
    }
    for right in rights {
        for (parent, verb, columns) in starts(&keys) {
            let Some((target, unless)) = targets(parent, verb, &columns)
                .into_iter()
                .find_map(|t| denies::reaches(ctx, right, &t, verb).map(|u| (t, u)))
            else {
                continue;
            };
            let on = match &target {
                Securable::Object {
                    column: Some(column), ..
                } => format!("{parent} ({column})"),
                _ => parent.to_string(),
            };
            graph.add(
                right.node(),
                &right.holder,
                Edge::new(
                    Node::code(parent),
                    Kind::Acts,
                    format!(
                        "{verb} on {on}{}{}",
                        hierarchy_note(ctx, right, verb, parent),
                        right.grant_option()
                    ),
                    right.evidence.clone(),
                    right.cut.clone(),
                )
                .unless(unless),
            );
        }
    }
}

/// The referenced tables whose writes cascade to a fence table, each with
/// the owner a chain of code to it needs: what [`super::writers`] adds to
/// the objects it follows writes to.
pub(super) fn parents(ctx: &Context) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for key in cascading(ctx) {
        let Some(owner) = ctx
            .catalog
            .object(&key.referenced)
            .and_then(|t| ctx.catalog.owner_of(t))
        else {
            continue;
        };
        if !out.iter().any(|(t, _)| t.eq_ignore_ascii_case(&key.referenced)) {
            out.push((key.referenced.clone(), owner.to_string()));
        }
    }
    out
}

/// The keys whose actions write a fence table, or a table such a key's
/// cascade writes, found until no key adds a table. A key between two fence
/// tables adds nothing: whoever writes the referenced one has reached the
/// goal already.
fn cascading<'a>(ctx: &Context<'a>) -> Vec<&'a ForeignKey> {
    let fence = |t: &str| {
        let (s, n) = split(t);
        ctx.is_fence_table(s, n)
    };
    let mut written: Vec<String> = Vec::new();
    let mut out: Vec<&ForeignKey> = Vec::new();
    loop {
        let before = out.len();
        for key in ctx.catalog.foreign_keys.iter().flatten() {
            let writes = !key.writing_statements().is_empty();
            let into = fence(&key.table) || written.iter().any(|t| t.eq_ignore_ascii_case(&key.table));
            if !writes || !into || fence(&key.referenced) || out.iter().any(|k| std::ptr::eq(*k, key)) {
                continue;
            }
            out.push(key);
            if !written.iter().any(|t| t.eq_ignore_ascii_case(&key.referenced)) {
                written.push(key.referenced.clone());
            }
        }
        if out.len() == before {
            break;
        }
    }
    out.sort_by_key(|k| {
        (
            k.referenced.to_lowercase(),
            k.table.to_lowercase(),
            k.name.to_lowercase(),
        )
    });
    out
}

/// Each referenced table and statement that starts a cascade, once, with
/// the columns an UPDATE must change to start it.
fn starts<'k>(keys: &[&'k ForeignKey]) -> Vec<(&'k str, &'static str, Vec<&'k str>)> {
    let mut out: Vec<(&str, &'static str, Vec<&str>)> = Vec::new();
    for key in keys {
        for (verb, _) in key.writing_statements() {
            let columns: Vec<&str> = if verb == "UPDATE" {
                key.referenced_columns.iter().map(String::as_str).collect()
            } else {
                Vec::new()
            };
            match out
                .iter_mut()
                .find(|(t, v, _)| t.eq_ignore_ascii_case(&key.referenced) && *v == verb)
            {
                Some((_, _, known)) => known.extend(columns),
                None => out.push((key.referenced.as_str(), verb, columns)),
            }
        }
    }
    out
}

/// What a right must cover to start the cascade: the table for a DELETE;
/// for an UPDATE, one of the referenced columns (a column-level UPDATE of
/// another column changes no key), or the table when the columns are unknown.
fn targets(parent: &str, verb: &str, columns: &[&str]) -> Vec<Securable> {
    let (schema, name) = split(parent);
    let on = |column: Option<&str>| Securable::Object {
        schema: schema.into(),
        name: name.into(),
        column: column.map(str::to_string),
    };
    if verb == "UPDATE" && !columns.is_empty() {
        columns.iter().map(|c| on(Some(c))).collect()
    } else {
        vec![on(None)]
    }
}

fn split(qualified: &str) -> (&str, &str) {
    qualified.split_once('.').unwrap_or(("", qualified))
}
