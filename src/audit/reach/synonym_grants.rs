//! Rights granted on a synonym itself ("Synonyms (Database Engine)": a
//! synonym is a securable of its own, on which CONTROL, DELETE, EXECUTE,
//! INSERT, SELECT, TAKE OWNERSHIP and UPDATE can be granted). A statement
//! through a synonym is checked on the synonym; its base object is then
//! reached as any object referenced from another is ("Ownership Chains"):
//! when the synonym has the base object's owner, the base object's own
//! permissions are not checked at all, DENYs there included. So UPDATE on a
//! dbo synonym for a fence table writes the table, and EXECUTE on one for a
//! fence_admin procedure runs it, whatever the grantee holds on the base.
//! With another owner the chain breaks and the base object is checked
//! against the caller, whose own rights there the graph already weighs.
//!
//! A synonym for code that reaches the fence is [`super::synonym_routes`]'.

use super::super::catalog::{Object, Securable};
use super::super::rules::Context;
use super::code::admin_procedures;
use super::denies;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::{Goal, Node};
use super::principals::hierarchy_note;
use super::right::Right;
use super::synonyms::synonyms_for;

/// The rights on a synonym for a fence table that write it through the
/// synonym (ALTER and TAKE OWNERSHIP act on the synonym, not its rows).
const WRITE: [&str; 3] = ["UPDATE", "INSERT", "DELETE"];

/// A synonym whose base object is a goal, when the chain to it holds.
struct Alias<'a> {
    synonym: &'a Object,
    base: String,
    goal: Goal,
    owner: String,
}

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    let aliases = aliases(ctx);
    for right in rights {
        for a in &aliases {
            let target = Securable::Object {
                schema: a.synonym.schema.clone(),
                name: a.synonym.name.clone(),
                column: None,
            };
            let wanted: &[&str] = if a.goal == Goal::RunAdmin { &["EXECUTE"] } else { &WRITE };
            let Some((w, unless)) = wanted
                .iter()
                .find_map(|w| denies::reaches(ctx, right, &target, w).map(|u| (*w, u)))
            else {
                continue;
            };
            let name = a.synonym.qualified_name();
            // The deploy's own grant, made on a synonym instead of the
            // procedure, hands the fence role nothing more than its design.
            let designed = a.goal == Goal::RunAdmin
                && right.plain_grant
                && ctx
                    .policy
                    .expected_grants()
                    .any(|(r, q)| r.eq_ignore_ascii_case(&right.holder) && q.eq_ignore_ascii_case(&a.base));
            graph.add(
                right.node(),
                &right.holder,
                Edge::new(
                    Node::Goal(a.goal),
                    if designed { Kind::Designed } else { Kind::Acts },
                    format!(
                        "{w} on the synonym {name}{}{}, which stands for {} and is owned by {} as {} is: the \
                         permission is checked on the synonym, and ownership chaining skips the check on {}",
                        hierarchy_note(ctx, right, w, &name),
                        right.grant_option(),
                        a.base,
                        a.owner,
                        a.base,
                        a.base
                    ),
                    format!(
                        "{}; sys.synonyms: {name} is for {}; its owner is {}",
                        right.evidence, a.base, a.owner
                    ),
                    right.cut.clone(),
                )
                .on(a.base.clone())
                .unless(unless),
            );
        }
    }
}

/// The synonyms for a fence table or a fence_admin procedure that have its
/// owner, on an engine that chains ownership.
fn aliases<'a>(ctx: &Context<'a>) -> Vec<Alias<'a>> {
    if !ctx.catalog.engine.chains_ownership {
        return Vec::new();
    }
    let fence = &ctx.policy.fence_schema;
    let tables = ctx
        .fence_tables()
        .iter()
        .map(|t| (format!("{fence}.{t}"), Goal::WriteFence, ctx.tables_owner()));
    let procedures = admin_procedures(ctx).into_iter().map(|p| {
        let owner = ctx.catalog.object(&p).and_then(|o| ctx.catalog.owner_of(o));
        (p, Goal::RunAdmin, owner)
    });
    let mut out = Vec::new();
    for (base, goal, owner) in tables.chain(procedures) {
        let Some(owner) = owner else { continue };
        for synonym in synonyms_for(ctx, &base) {
            if ctx
                .catalog
                .owner_of(synonym)
                .is_some_and(|o| o.eq_ignore_ascii_case(owner))
            {
                out.push(Alias {
                    synonym,
                    base: base.clone(),
                    goal,
                    owner: owner.to_string(),
                });
            }
        }
    }
    out
}
