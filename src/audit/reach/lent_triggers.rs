//! Triggers a lent write fires. "CREATE TRIGGER": a DML trigger fires for
//! each statement that modifies what it is on, runs as its caller unless it
//! is created WITH EXECUTE AS, and "Create Nested Triggers": a trigger's
//! own writes fire the triggers on what they write, up to 32 levels. A
//! statement names the table itself, a synonym for it ("Synonyms (Database
//! Engine)") or a view a modification goes through to it ("Modify Data
//! Through a View"). "EXECUTE AS Clause": the context a module switches to
//! stays in force in what it runs, so the write is checked against that
//! principal where the chain from the module's owner breaks (on the object
//! named, and on the table beyond it when that has another owner), and a
//! trigger that runs as its caller makes its own statements with the same
//! rights. [`super::call_walk`] follows these as it follows calls.

use super::super::catalog::{Object, ObjectKind};
use super::super::rules::Context;
use super::broken_chains::chains;
use super::lent_names::Statements;
use super::lent_write::{Lender, how_held, lent};
use super::right::Right;
use super::synonym_routes::securable;
use super::synonyms::synonyms_for;
use super::trigger_header::{DATA, header};
use super::updatable::writes_through;

/// An enabled DML trigger outside the shipped code, with what fires it.
pub(super) struct Trigger<'a> {
    events: Vec<&'static str>,
    /// What a statement may name to write `on`: itself, the synonyms for
    /// it, the views written through to it.
    ways: Vec<&'a Object>,
}

/// The triggers a write in some code may fire.
pub(super) fn triggers<'a>(ctx: &Context<'a>, units: &[&'a Object]) -> Vec<(usize, Trigger<'a>)> {
    let views: Vec<&Object> = ctx
        .catalog
        .objects
        .iter()
        .filter(|o| o.kind == ObjectKind::View)
        .collect();
    units
        .iter()
        .enumerate()
        .filter(|(_, t)| t.kind == ObjectKind::Trigger)
        .filter_map(|(i, t)| {
            let on = ctx.catalog.object(t.parent.as_deref()?)?;
            let events: Vec<&'static str> = header(t.definition.as_deref()?)
                .1
                .into_iter()
                .filter(|e| DATA.contains(e))
                .collect();
            let name = on.qualified_name();
            let mut ways = vec![on];
            ways.extend(synonyms_for(ctx, &name));
            if on.kind == ObjectKind::Table {
                ways.extend(
                    views
                        .iter()
                        .filter(|v| v.definition.as_deref().is_some_and(|d| writes_through(d, &name)))
                        .copied(),
                );
            }
            Some((i, Trigger { events, ways }))
        })
        .collect()
}

impl<'a> Trigger<'a> {
    /// The first object of its ways `text` writes with one of `verbs` the
    /// trigger is for, with that verb.
    pub(super) fn fired_by(
        &self,
        ctx: &Context,
        text: &Statements,
        verbs: &[&'static str],
    ) -> Option<(&'a Object, &'static str)> {
        let verb = verbs.iter().copied().find(|v| self.events.contains(v))?;
        self.ways
            .iter()
            .find(|w| text.writes_to(ctx, &w.schema, &w.name))
            .map(|w| (*w, verb))
    }
}

/// Why the write `verb` to `named` (`on` itself, or a synonym or view for
/// it) passes from code owned by `owner` run with `lender`: the chain from
/// `owner` skips each check, or the lender may make the write where it is
/// checked. The step's text (`makes INSERT on ops.OS, ...`), evidence and
/// cut.
pub(super) fn write_passes(
    ctx: &Context,
    rights: &[Right],
    owner: Option<&str>,
    (named, on): (&Object, &Object),
    verb: &str,
    lender: &Lender,
) -> Option<(String, String, String)> {
    let (mut step, mut evidence, mut cut) = check(ctx, rights, owner, named, verb, lender)?;
    if std::ptr::eq(named, on) {
        return Some((step, evidence, cut));
    }
    let base = on.qualified_name();
    let stands = if named.kind == ObjectKind::Synonym {
        format!("a synonym for {base}")
    } else {
        format!("a view a modification goes through to {base}")
    };
    let (then, e, c) = check(ctx, rights, ctx.catalog.owner_of(named), on, verb, lender)?;
    step = format!("{step} ({stands}); then {then}");
    evidence = format!("{evidence}; {} stands for {base}; {e}", named.qualified_name());
    cut = format!("{cut} (or {c})");
    Some((step, evidence, cut))
}

fn check(
    ctx: &Context,
    rights: &[Right],
    owner: Option<&str>,
    o: &Object,
    verb: &str,
    lender: &Lender,
) -> Option<(String, String, String)> {
    let name = o.qualified_name();
    if let Some(owner) = chains(ctx, owner, o) {
        return Some((
            format!("makes {verb} on {name}, owned by {owner} as the caller is: ownership chaining skips the check"),
            format!("{name} is owned by {owner}"),
            format!("(move {name} to another owner)"),
        ));
    }
    let right = lent(ctx, rights, &lender.principal, &securable(o), verb)?;
    Some((
        format!(
            "makes {verb} on {name}, which {} may make{}",
            lender.principal,
            how_held(ctx, right, &lender.principal, verb, &name)
        ),
        right.evidence.clone(),
        right.cut.clone(),
    ))
}
