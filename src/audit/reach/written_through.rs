//! Objects a write goes through to the fence: a view or inline function
//! over a fence table, a table whose trigger writes one, a synonym for a
//! fence table ("Modify Data Through a View", "CREATE TRIGGER", "Synonyms
//! (Database Engine)"), each of the owner the chain on needs. A write a
//! module lends ([`super::lent_targets`]) through one of them reaches what
//! a write by its holder does, and only when the principal lending it may
//! make that write there.

use super::super::catalog::Object;
use super::super::rules::Context;
use super::node::{Goal, Node};
use super::synonyms::synonyms_for;
use super::trigger_header::DATA;

/// An object whose `starts` go on to `to`: its own node in the graph, the
/// trigger a write to it fires, or the goal.
pub(super) struct Through<'a> {
    pub(super) object: &'a Object,
    /// How a statement may name it: itself, or a synonym for it of its
    /// owner ([`super::synonym_routes::ways_to`]), found once.
    pub(super) ways: Vec<&'a Object>,
    pub(super) starts: Vec<&'static str>,
    pub(super) to: Node,
    /// What the write does next, when `to` is not the object's own node
    /// (whose edges say it): `; a write to ops.T fires its trigger ...`.
    pub(super) then: String,
    pub(super) evidence: String,
    /// The fence table, when `to` is the goal.
    pub(super) table: Option<String>,
    /// Whether `to` is a trigger signed by a key, whose rights add to the
    /// context of the statement that fires it.
    pub(super) signed_trigger: bool,
}

/// The synonyms for a fence table that have its owner, on an engine that
/// chains ownership: a write through one is checked on the synonym alone.
pub(super) fn fence_synonyms<'a>(ctx: &Context<'a>) -> Vec<Through<'a>> {
    let Some(owner) = ctx.tables_owner() else {
        return Vec::new();
    };
    if !ctx.catalog.engine.chains_ownership {
        return Vec::new();
    }
    let fence = &ctx.policy.fence_schema;
    let mut out = Vec::new();
    for t in ctx.fence_tables() {
        let table = format!("{fence}.{t}");
        for s in synonyms_for(ctx, &table) {
            if !ctx.catalog.owner_of(s).is_some_and(|o| o.eq_ignore_ascii_case(owner)) {
                continue;
            }
            out.push(Through {
                object: s,
                ways: vec![s],
                starts: DATA.to_vec(),
                to: Node::Goal(Goal::WriteFence),
                then: format!(
                    ", a synonym for {table} owned by {owner} as {table} is: ownership chaining skips the permission \
                     check on {table}"
                ),
                evidence: format!(
                    "sys.synonyms: {} is for {table}; its owner is {owner}",
                    s.qualified_name()
                ),
                table: Some(table.clone()),
                signed_trigger: false,
            });
        }
    }
    out
}
