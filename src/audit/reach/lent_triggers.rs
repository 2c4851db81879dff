//! Triggers a lent write fires. "CREATE TRIGGER": a DML trigger fires for
//! each statement that modifies what it is on, runs as its caller unless it
//! is created WITH EXECUTE AS, and "Create Nested Triggers": a trigger's
//! own writes fire the triggers on what they write, up to 32 levels. A
//! statement names the table itself, a synonym for it ("Synonyms (Database
//! Engine)") or a view a modification goes through to it, itself perhaps
//! over another view ("Modify Data Through a View", "CREATE VIEW"). An
//! INSTEAD OF trigger on the object written, or on a view on the way,
//! replaces the statement: the table beyond is written only when that
//! trigger writes it again, and an INSTEAD OF trigger never fires itself.
//! "EXECUTE AS Clause": the context a module switches to stays in force in
//! what it runs, so the write is checked against that principal where the
//! chain from the module's owner breaks (on the object named, and on the
//! table beyond it when that has another owner), and a trigger that runs
//! as its caller makes its own statements with the same rights.
//! [`super::call_walk`] follows these as it follows calls.

use std::collections::HashMap;
use std::rc::Rc;

use super::super::catalog::{Object, ObjectKind};
use super::super::module_text::{normalized, words};
use super::super::rules::Context;
use super::broken_chains::chains;
use super::lent_names::Statements;
use super::lent_write::{Lender, how_held, lent};
use super::right::Right;
use super::synonym_routes::securable;
use super::trigger_header::{DATA, header};
use super::updatable::writes_through;
use crate::tsql::code_only;

/// An enabled DML trigger outside the shipped code, with what fires it.
pub(super) struct Trigger<'a> {
    trigger: &'a Object,
    instead: bool,
    events: Vec<&'static str>,
    ways: Rc<Vec<Way<'a>>>,
}

/// An object a statement may write to reach a trigger's table or view:
/// itself, a synonym or a view, with the objects from it to that table.
struct Way<'a> {
    object: &'a Object,
    chain: Vec<&'a Object>,
}

/// The triggers a write in some code may fire, and the INSTEAD OF
/// triggers that replace writes.
pub(super) struct Triggers<'a> {
    pub(super) list: Vec<(usize, Trigger<'a>)>,
    /// INSTEAD OF triggers: the object each is on, the trigger, its events.
    instead: Vec<(&'a Object, &'a Object, Vec<&'static str>)>,
}

/// The triggers among `units`.
pub(super) fn triggers<'a>(ctx: &Context<'a>, units: &[&'a Object]) -> Triggers<'a> {
    let here = format!("{}.", normalized(&ctx.catalog.database));
    let synonyms: Vec<(&'a Object, String)> = ctx
        .catalog
        .objects
        .iter()
        .filter(|s| s.kind == ObjectKind::Synonym)
        .filter_map(|s| {
            let base = normalized(&code_only(s.definition.as_deref()?));
            Some((s, base.strip_prefix(&here).unwrap_or(&base).to_string()))
        })
        .collect();
    let views: Vec<&'a Object> = ctx
        .catalog
        .objects
        .iter()
        .filter(|o| o.definition.is_some() && (o.kind == ObjectKind::View || inline_function(o)))
        .collect();
    let mut ways: HashMap<*const Object, Rc<Vec<Way<'a>>>> = HashMap::new();
    let mut list = Vec::new();
    let mut instead = Vec::new();
    for (i, t) in units.iter().enumerate().filter(|(_, t)| t.kind == ObjectKind::Trigger) {
        let (Some(on), Some(definition)) = (
            t.parent.as_deref().and_then(|p| ctx.catalog.object(p)),
            t.definition.as_deref(),
        ) else {
            continue;
        };
        let (is_instead, events) = header(definition);
        let events: Vec<&'static str> = events.into_iter().filter(|e| DATA.contains(e)).collect();
        if is_instead {
            instead.push((on, *t, events.clone()));
        }
        let ways = ways
            .entry(on as *const Object)
            .or_insert_with(|| Rc::new(ways_to(on, &synonyms, &views)))
            .clone();
        list.push((
            i,
            Trigger {
                trigger: t,
                instead: is_instead,
                events,
                ways,
            },
        ));
    }
    Triggers { list, instead }
}

/// Whether `o` is an inline table-valued function (`RETURNS TABLE ... AS
/// RETURN`), which an UPDATE, INSERT or DELETE may target as it targets a
/// view, the change going to the base table ("UPDATE": "the UPDATE clause
/// must target a table, a view, or an inline function").
fn inline_function(o: &Object) -> bool {
    o.kind == ObjectKind::Function
        && o.definition.as_deref().is_some_and(|d| {
            let words = words(&code_only(d));
            words.windows(2).any(|w| w[0] == "returns" && w[1] == "table")
        })
}

/// `on` and what stands for it: synonyms for it, views and inline functions
/// written through to it or to a synonym for it, and so on, each once.
fn ways_to<'a>(on: &'a Object, synonyms: &[(&'a Object, String)], views: &[&'a Object]) -> Vec<Way<'a>> {
    let mut out = vec![Way {
        object: on,
        chain: vec![on],
    }];
    let mut next = 0;
    while let Some(way) = out.get(next) {
        next += 1;
        let (o, chain) = (way.object, way.chain.clone());
        let name = o.qualified_name();
        let base = normalized(&name);
        // "A synonym cannot be the base object for another synonym", but a
        // view may select from one.
        let stands_for = synonyms
            .iter()
            .filter(|(_, b)| o.kind != ObjectKind::Synonym && *b == base)
            .map(|(s, _)| *s)
            .chain(
                views
                    .iter()
                    .filter(|v| v.definition.as_deref().is_some_and(|d| writes_through(d, &name)))
                    .copied(),
            )
            .filter(|s| !out.iter().any(|w| std::ptr::eq(w.object, *s)))
            .collect::<Vec<_>>();
        for s in stands_for {
            let mut chain = chain.clone();
            chain.insert(0, s);
            out.push(Way { object: s, chain });
        }
    }
    out
}

impl<'a> Triggers<'a> {
    /// The first object `text` (the statements of `writer`) writes with one
    /// of `verbs` that fires `t`, with that verb: a way to its table that
    /// no other INSTEAD OF trigger replaces.
    pub(super) fn fired_by(
        &self,
        ctx: &Context,
        t: &Trigger<'a>,
        (writer, text): (&Object, &Statements),
        verbs: &[&'static str],
    ) -> Option<(&'a Object, &'static str)> {
        if t.instead && std::ptr::eq(writer, t.trigger) {
            return None;
        }
        let replaced = |o: &Object, verb: &str| {
            self.instead.iter().any(|(on, by, events)| {
                std::ptr::eq(*on, o)
                    && events.contains(&verb)
                    && !std::ptr::eq(*by, t.trigger)
                    && !std::ptr::eq(*by, writer)
            })
        };
        for verb in verbs.iter().copied().filter(|v| t.events.contains(v)) {
            for way in t.ways.iter() {
                if text.writes_to(ctx, verb, &way.object.schema, &way.object.name)
                    && !way.chain.iter().any(|o| replaced(o, verb))
                {
                    return Some((way.object, verb));
                }
            }
        }
        None
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
        format!("which stands for {base}")
    } else if named.kind == ObjectKind::Function {
        format!("an inline function a modification goes through to {base}")
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
