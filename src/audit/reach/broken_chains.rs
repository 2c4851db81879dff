//! Lent writes and calls through an object of another owner that stands
//! for a fence table or a fence_admin procedure: a synonym for it
//! ("Synonyms (Database Engine)"), or a view a write through goes on to it
//! ("Modify Data Through a View"). "Ownership Chains": the statement's
//! check on that object is skipped when the module has its owner, or made
//! against the principal the module runs as; the chain breaks at the base,
//! whose permission is then checked against that principal too. So such a
//! write or call reaches the fence when the principal lending it may make
//! it on the base ([`super::lent_targets`] follows the objects of the
//! base's own owner, where the base is not checked at all).

use super::super::catalog::{Object, ObjectKind, Securable};
use super::super::rules::Context;
use super::code::{admin_procedures, ordered_tables};
use super::lent_names::Statements;
use super::lent_write::{Lender, Made, context_user, how_held, lent};
use super::node::{Goal, Node};
use super::right::Right;
use super::synonyms::synonyms_for;
use super::trigger_header::{DATA, header};
use super::updatable::writes_through;

/// Whether `by` is owned by `owner`, so that a chain from it skips the
/// check there.
pub(super) fn chains(ctx: &Context, owner: Option<&str>, by: &Object) -> Option<String> {
    let owner = owner?;
    (ctx.catalog.engine.chains_ownership && ctx.catalog.owner_of(by).is_some_and(|o| o.eq_ignore_ascii_case(owner)))
        .then(|| owner.to_string())
}

/// The first fence_admin procedure `text` runs by a synonym of another
/// owner, that one of `contexts` may run there and on the procedure.
pub(super) fn admin(
    ctx: &Context,
    rights: &[Right],
    text: &Statements,
    contexts: &[&Lender],
    owner: Option<&str>,
) -> Option<Made> {
    admin_procedures(ctx).into_iter().find_map(|proc| {
        let (schema, _) = proc.split_once('.')?;
        let base_owner = match ctx.catalog.object(&proc) {
            Some(o) => ctx.catalog.owner_of(o),
            None => ctx.catalog.schema_owner(schema),
        };
        let by = stand_ins(ctx, &proc, base_owner, false);
        through(
            ctx,
            rights,
            (text, &by, &["EXECUTE"]),
            (&proc, base_owner),
            contexts,
            owner,
        )
        .map(|made| Made {
            to: Node::Goal(Goal::RunAdmin),
            ..made
        })
    })
}

/// The first write `text` makes through a
/// synonym or view of another owner for a fence table, that one of
/// `contexts` may make there and on the table.
pub(super) fn write(
    ctx: &Context,
    rights: &[Right],
    text: &Statements,
    contexts: &[&Lender],
    owner: Option<&str>,
) -> Option<Made> {
    let verbs: Vec<&str> = text.written().iter().copied().filter(|v| DATA.contains(v)).collect();
    if verbs.is_empty() {
        return None;
    }
    let fence = &ctx.policy.fence_schema;
    let base_owner = ctx.tables_owner();
    ordered_tables(ctx).into_iter().find_map(|t| {
        let table = format!("{fence}.{t}");
        let by = stand_ins(ctx, &table, base_owner, true);
        through(ctx, rights, (text, &by, &verbs), (&table, base_owner), contexts, owner).map(|made| Made {
            to: Node::Goal(Goal::WriteFence),
            ..made
        })
    })
}

/// The synonyms for `base` (`schema.name`) and, for a table, the views
/// over it that do not have `base_owner`: on an engine that does not chain
/// ownership, every one (each object on the way is checked).
fn stand_ins<'a>(ctx: &Context<'a>, base: &str, base_owner: Option<&str>, table: bool) -> Vec<&'a Object> {
    let other = |o: &Object| {
        !ctx.catalog.engine.chains_ownership
            || !ctx
                .catalog
                .owner_of(o)
                .zip(base_owner)
                .is_some_and(|(a, b)| a.eq_ignore_ascii_case(b))
    };
    let views = ctx.catalog.objects.iter().filter(move |o| {
        table && o.kind == ObjectKind::View && o.definition.as_deref().is_some_and(|d| writes_through(d, base))
    });
    synonyms_for(ctx, base).chain(views).filter(|o| other(o)).collect()
}

/// The first of `verbs` `text` makes on one of `by` (each standing for
/// `base`, owned by `base_owner`) that a chain from `owner` or a right of
/// one of `contexts` lets through there, and a right of that context on
/// `base`.
fn through(
    ctx: &Context,
    rights: &[Right],
    (text, by, verbs): (&Statements, &[&Object], &[&str]),
    (base, base_owner): (&str, Option<&str>),
    contexts: &[&Lender],
    owner: Option<&str>,
) -> Option<Made> {
    let user = context_user(contexts);
    let (schema, name) = base.split_once('.')?;
    let on_base = Securable::Object {
        schema: schema.to_string(),
        name: name.to_string(),
        column: None,
    };
    for x in by.iter().filter(|x| text.names(ctx, user, &x.schema, &x.name)) {
        let x_name = x.qualified_name();
        let x_owner = ctx.catalog.owner_of(x).unwrap_or("its owner");
        let replaced = instead_of(ctx, x);
        let on_x = Securable::Object {
            schema: x.schema.clone(),
            name: x.name.clone(),
            column: None,
        };
        for v in verbs.iter().filter(|v| !replaced.iter().any(|r| r == *v)) {
            for c in contexts {
                let first = match chains(ctx, owner, x) {
                    Some(o) => (
                        format!("owned by {o} as the caller is: ownership chaining skips the check there"),
                        format!("{x_name} is owned by {o}"),
                        Vec::new(),
                    ),
                    None => {
                        let Some(r) = lent(ctx, rights, &c.principal, &on_x, v) else {
                            continue;
                        };
                        let Some(refused) = c.refusal(ctx, r, &on_x, v) else {
                            continue;
                        };
                        (
                            format!(
                                "which {} may make{}",
                                c.principal,
                                how_held(ctx, r, &c.principal, v, &x_name)
                            ),
                            r.evidence.clone(),
                            refused,
                        )
                    }
                };
                let Some(r) = lent(ctx, rights, &c.principal, &on_base, v) else {
                    continue;
                };
                let Some(refused) = c.refusal(ctx, r, &on_base, v) else {
                    continue;
                };
                let what = if x.kind == ObjectKind::Synonym {
                    format!("a synonym for {base}")
                } else {
                    format!("a view over {base}")
                };
                return Some(Made {
                    what: format!(
                        "makes {v} on {x_name}, {}, {what} owned by {x_owner}, not by {base}'s owner {}: the chain \
                         breaks there, and {v} on {base} is checked against {}, which may make it{}",
                        first.0,
                        base_owner.unwrap_or("its owner"),
                        c.principal,
                        how_held(ctx, r, &c.principal, v, base)
                    ),
                    to: Node::Goal(Goal::WriteFence),
                    table: base.to_string(),
                    chained: false,
                    anything: false,
                    evidence: format!("{}; {}; {x_name}'s owner is {x_owner}", first.1, r.evidence),
                    cut: r.cut.clone(),
                    refused: [first.2, refused].concat(),
                });
            }
        }
    }
    None
}

/// The events INSTEAD OF triggers on `x` take in place of the statement
/// ("CREATE TRIGGER"): those never go on to the base (the trigger's own
/// statements are followed as a fired trigger's). One whose text is hidden
/// takes none: a possible false finding, never a missed one.
fn instead_of(ctx: &Context, x: &Object) -> Vec<&'static str> {
    ctx.catalog
        .objects
        .iter()
        .filter(|t| t.kind == ObjectKind::Trigger && !t.disabled && t.parent.as_deref().is_some_and(|p| x.is(p)))
        .filter_map(|t| t.definition.as_deref().map(header))
        .filter(|(instead, _)| *instead)
        .flat_map(|(_, events)| events)
        .collect()
}
