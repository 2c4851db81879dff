//! Writes that reach a fence table through a chain of objects ("Ownership
//! Chains": while each object on the way has the owner of the next, only
//! the first is checked). A view or inline table-valued function selects
//! from a fence table or another such object; a procedure or function
//! writes one; a trigger writes one, and a write to the table or view it is
//! on fires it; a synonym stands for its base object. Each is a node whose
//! edge names the next object, so the closure follows chains of any length,
//! and whoever holds the right that starts one (a data right on a view or a
//! triggered object, EXECUTE on a module) is named with the route.

use super::super::catalog::{Object, ObjectKind};
use super::super::rules::{Context, module_text_names};
use super::denies;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::mentions::Mentions;
use super::node::{Goal, Node};
use super::right::Right;
use super::synonym_routes::{right_step, securable, ways_to};
use super::synonyms::synonyms_for;
use super::trigger_header::{DATA, header, trigger_body};
use super::updatable::writes_through;
use super::written_through::Through;
use crate::audit::module_text::may_write;
use crate::tsql::quote_qualified;

/// What a write through an object goes to next.
#[derive(Clone)]
struct Link<'a> {
    object: &'a Object,
    /// `schema.name` of a fence table (the goal) or of the next object.
    next: String,
    goal: bool,
    /// The rights on `object` that start the write.
    starts: Vec<&'static str>,
    /// The synonym it names `next` by, if any.
    synonym: Option<String>,
    /// Whether `next` is a trigger on `object` that `starts` fire: a right
    /// to them leads to that trigger, not to every trigger on the object.
    fires: bool,
    step: String,
    evidence: String,
}

/// Adds the edges, and gives the objects a data right on which starts a
/// write to the fence, for the writes modules lend ([`super::lending`]).
pub(super) fn edges<'a>(ctx: &Context<'a>, rights: &[Right], graph: &mut Graph) -> Vec<Through<'a>> {
    let links = links(ctx);
    let through = links
        .iter()
        .filter(|l| l.starts.iter().all(|s| DATA.contains(s)) && !l.starts.is_empty())
        .map(|l| {
            let (to, then, evidence) = if l.fires {
                (Node::code(&l.next), format!("; {}", l.step), l.evidence.clone())
            } else {
                (Node::code(&l.object.qualified_name()), String::new(), String::new())
            };
            Through {
                object: l.object,
                ways: ways_to(ctx, l.object),
                starts: l.starts.clone(),
                to,
                then,
                evidence,
                table: None,
                signed_trigger: l.fires
                    && ctx
                        .catalog
                        .object(&l.next)
                        .is_some_and(|t| t.kind == ObjectKind::Trigger && !t.signed_by.is_empty()),
            }
        })
        .collect();
    for right in rights {
        let from = right.node();
        for link in links.iter().filter(|l| !l.starts.is_empty()) {
            if right.taken && link.object.owner.is_none() {
                continue;
            }
            let name = link.object.qualified_name();
            // The object itself, or a synonym for it of the same owner.
            for by in ways_to(ctx, link.object) {
                if right.taken && by.owner.is_none() {
                    continue;
                }
                let target = securable(by);
                let Some((w, unless)) = link
                    .starts
                    .iter()
                    .find_map(|w| denies::reaches(ctx, right, &target, w).map(|u| (*w, u)))
                else {
                    continue;
                };
                let (step, through) = right_step(ctx, right, w, by, link.object);
                let evidence = format!("{}{through}", right.evidence);
                // A right that fires one trigger leads to it alone.
                let (to, step, evidence) = if link.fires {
                    (
                        Node::code(&link.next),
                        format!("{step}; {}", link.step),
                        format!("{evidence}; {}", link.evidence),
                    )
                } else {
                    (Node::code(&name), step, evidence)
                };
                graph.add(
                    from.clone(),
                    &right.holder,
                    Edge::new(to, Kind::Acts, step, evidence, right.cut.clone()).unless(unless),
                );
            }
        }
    }
    for link in links {
        let name = link.object.qualified_name();
        graph.name_node(Node::code(&name), &name);
        let to = if link.goal {
            Node::Goal(Goal::WriteFence)
        } else {
            Node::code(&link.next)
        };
        let cut = match link.object.kind {
            ObjectKind::Table => format!("(drop the trigger it fires, or the grants on {name})"),
            kind => format!(
                "DROP {} {};",
                drop_kind(kind),
                quote_qualified(&link.object.schema, &link.object.name)
            ),
        };
        let mut edge = Edge::new(to, Kind::Acts, link.step, link.evidence, cut);
        if link.goal {
            edge = edge.on(link.next);
        }
        graph.add(Node::code(&name), &name, edge);
    }
    through
}

/// Every link, found until no object adds one: each object writes through
/// the first target it reaches.
fn links<'a>(ctx: &Context<'a>) -> Vec<Link<'a>> {
    let chains = ctx.catalog.engine.chains_ownership;
    let fence = &ctx.policy.fence_schema;
    let Some(fence_owner) = ctx.tables_owner() else {
        return Vec::new();
    };
    // Targets: `schema.name` (lower-cased) with the owner a chain to it
    // needs, and whether it is a fence table.
    let mut targets: Vec<(String, String, bool)> = ctx
        .fence_tables()
        .iter()
        .map(|t| (format!("{fence}.{t}"), fence_owner.to_string(), true))
        .collect();
    // A trigger that calls a fence_admin procedure is reached by the writes
    // that fire it ([`super::code`] follows the call).
    targets.extend(
        super::code::admin_calling_triggers(ctx)
            .into_iter()
            .map(|(t, owner)| (t.qualified_name(), owner, false)),
    );
    // A trigger that runs as someone else lends a write to whoever fires
    // it ([`super::lending`] follows the write).
    targets.extend(
        super::lending::triggers(ctx)
            .into_iter()
            .map(|(t, owner)| (t.qualified_name(), owner, false)),
    );
    // A table whose DELETE or UPDATE cascades to a fence table is written
    // through as one is ([`super::cascades`] follows the key).
    targets.extend(
        super::cascades::parents(ctx)
            .into_iter()
            .map(|(t, owner)| (t, owner, false)),
    );
    let mentions = Mentions::new(ctx.catalog);
    let mut texts: Vec<Text> = ctx.catalog.objects.iter().map(|_| Text::default()).collect();
    let mut out: Vec<Link> = Vec::new();
    loop {
        let mut added = false;
        for (o, text) in ctx.catalog.objects.iter().zip(&mut texts) {
            if ctx.is_shipped(o)
                || o.schema.is_empty()
                || ctx.fence_tables().iter().any(|t| o.is(&format!("{fence}.{t}")))
            {
                continue;
            }
            let new: Vec<Link> = links_of(ctx, o, &targets, chains, (text, &mentions))
                .into_iter()
                .filter(|l| !out.iter().any(|k| std::ptr::eq(k.object, o) && k.next == l.next))
                .collect();
            if new.is_empty() {
                continue;
            }
            if !targets.iter().any(|(t, _, _)| o.is(t)) {
                let owner = owner(ctx, o).unwrap_or_default().to_string();
                targets.push((o.qualified_name(), owner, false));
            }
            out.extend(new);
            added = true;
        }
        if !added {
            break;
        }
    }
    // A view or inline function straight over a fence table is FP027's
    // oldest case: it keeps its place; procedures and functions that write
    // a fence table themselves are [`super::code`]'s.
    out.retain(|l| {
        !(l.goal && l.synonym.is_none() && (l.object.kind == ObjectKind::Procedure || is_module(ctx, l.object)))
    });
    out.sort_by_key(|l| (l.object.qualified_name().to_lowercase(), l.next.to_lowercase()));
    out
}

/// How far an object's own text was matched against the targets: the
/// first target it reaches stays the first as targets are added after it,
/// so each is tried once rather than once a round, and a long chain is
/// found in time near-linear in the targets each object names.
#[derive(Default)]
struct Text<'a> {
    /// How many targets were tried.
    tried: usize,
    /// The link to the first target reached, once there is one.
    found: Option<Link<'a>>,
}

/// A procedure, or a function that is not inline: [`super::code`] follows
/// those that write a fence table themselves.
fn is_module(ctx: &Context, o: &Object) -> bool {
    o.kind == ObjectKind::Function && !inline(ctx, o)
}

fn inline(ctx: &Context, o: &Object) -> bool {
    o.kind == ObjectKind::Function
        && ctx.catalog.engine.chains_ownership
        && o.definition.as_deref().is_none_or(returns_table)
}

/// The owner an object's statements run their chain as: a trigger's is the
/// owner of what it is on.
fn owner<'a>(ctx: &Context<'a>, o: &'a Object) -> Option<&'a str> {
    if o.kind == ObjectKind::Trigger
        && let Some(parent) = o.parent.as_deref().and_then(|p| ctx.catalog.object(p))
    {
        return ctx.catalog.owner_of(parent);
    }
    ctx.catalog.owner_of(o)
}

/// The links `o` makes: one through each trigger on it that is a target
/// already, and one to the first of `targets` its own text reaches, if any.
fn links_of<'a>(
    ctx: &Context<'a>,
    o: &'a Object,
    targets: &[(String, String, bool)],
    chains: bool,
    (text, mentions): (&mut Text<'a>, &Mentions),
) -> Vec<Link<'a>> {
    let Some(own) = owner(ctx, o) else {
        return Vec::new();
    };
    let name = o.qualified_name();
    let view = o.kind == ObjectKind::View || inline(ctx, o);
    let module = matches!(o.kind, ObjectKind::Procedure | ObjectKind::Function) && !view;
    if !(view || module && chains || o.kind == ObjectKind::Trigger && chains || o.kind == ObjectKind::Table && chains) {
        return Vec::new();
    }
    let mut out = Vec::new();
    if matches!(o.kind, ObjectKind::Table | ObjectKind::View) && chains {
        // A write to it fires each trigger on it for its events, and every
        // one that writes on is a link.
        for (trigger, events) in triggers_on(ctx, o, targets) {
            out.push(Link {
                object: o,
                next: trigger.qualified_name(),
                goal: false,
                starts: events,
                synonym: None,
                fires: true,
                step: format!(
                    "a write to {name} fires its trigger {}, which runs in the chain of {name}'s owner {own}",
                    trigger.qualified_name()
                ),
                evidence: format!("sys.triggers: {} is on {name}", trigger.qualified_name()),
            });
        }
    }
    if o.kind != ObjectKind::Table && text.found.is_none() {
        text.found = text_link(ctx, o, &targets[text.tried..], own, (view, mentions));
        text.tried = targets.len();
    }
    if o.kind != ObjectKind::Table
        && let Some(mut link) = text.found.clone()
    {
        if view
            && !link.goal
            && let Some(table) = ctx.catalog.object(&link.next).filter(|t| t.kind == ObjectKind::Table)
        {
            // A write through the view is that statement on its base table:
            // it fires the table's triggers for that event alone, so a right
            // on the view leads to those triggers, and only chains through
            // the view itself go on to the table as a whole.
            out.extend(base_triggers(ctx, o, table, &link, targets));
            link.starts.clear();
        }
        out.push(link);
    }
    out
}

/// The links a write through view `o` to its base `table` makes to each
/// trigger on the table that is a target already, for the events both let
/// through.
fn base_triggers<'a>(
    ctx: &Context<'a>,
    o: &'a Object,
    table: &Object,
    through: &Link,
    targets: &[(String, String, bool)],
) -> Vec<Link<'a>> {
    let (name, base) = (o.qualified_name(), table.qualified_name());
    triggers_on(ctx, table, targets)
        .into_iter()
        .filter_map(|(trigger, events)| {
            let starts: Vec<&'static str> = through.starts.iter().copied().filter(|e| events.contains(e)).collect();
            (!starts.is_empty()).then(|| Link {
                object: o,
                next: trigger.qualified_name(),
                goal: false,
                step: format!(
                    "{}; {} through {name} is that statement on {base}, which fires its trigger {} (for {} only)",
                    through.step,
                    starts.join(" or "),
                    trigger.qualified_name(),
                    events.join(", ")
                ),
                starts,
                synonym: None,
                fires: true,
                evidence: format!(
                    "{}; sys.triggers: {} is on {base}",
                    through.evidence,
                    trigger.qualified_name()
                ),
            })
        })
        .collect()
}

/// The link `o`'s own text makes to the first of `targets` it reaches: a
/// view selecting from it (for the events no INSTEAD OF trigger takes in
/// its place), a module or trigger writing it.
fn text_link<'a>(
    ctx: &Context<'a>,
    o: &'a Object,
    targets: &[(String, String, bool)],
    own: &str,
    (view, mentions): (bool, &Mentions),
) -> Option<Link<'a>> {
    let name = o.qualified_name();
    // A function cannot change the database's state ("CREATE FUNCTION").
    if !view && o.kind == ObjectKind::Function {
        return None;
    }
    // A procedure or trigger whose text changes no data and runs no other
    // module only reads what it names: no write of its starts there, nor
    // fires a trigger. One whose text is hidden may.
    if !view && let Some(text) = o.definition.as_deref() {
        let own_text = if o.kind == ObjectKind::Trigger {
            trigger_body(text)
        } else {
            text
        };
        if !may_write(own_text) {
            return None;
        }
    }
    // Every target it names is tried, not the first: a view that names one
    // fence table only in a filter may still write another it selects from.
    let ((t, _, goal), synonym) = targets
        .iter()
        .filter_map(|target| names(ctx, o, &target.0, mentions).map(|s| (target, s)))
        .find(|((t, target_owner, _), _)| {
            target_owner.eq_ignore_ascii_case(own)
                && !(o.kind == ObjectKind::View
                    && o.definition
                        .as_deref()
                        .is_some_and(|text| !writes_through_any(ctx, text, t)))
        })?;
    let by = synonym
        .as_deref()
        .map(|s| format!(" (by the synonym {s})"))
        .unwrap_or_default();
    let (starts, what) = if view {
        let replaced = instead_of_events(ctx, o, mentions);
        let starts: Vec<&'static str> = DATA.into_iter().filter(|e| !replaced.contains(e)).collect();
        if starts.is_empty() {
            return None;
        }
        (
            starts,
            format!(
                "{name} selects from {t}{by} and is owned by {own}, as {t} is: an INSERT, UPDATE or DELETE through it \
                 writes {t}, and ownership chaining skips the permission check there"
            ),
        )
    } else if o.kind == ObjectKind::Trigger {
        (
            Vec::new(),
            format!("{name} writes {t}{by}, owned by {own} as {t} is: ownership chaining skips the permission check"),
        )
    } else {
        (
            vec!["EXECUTE"],
            format!(
                "{name} writes {t}{by} and is owned by {own}, as {t} is: ownership chaining skips the permission check"
            ),
        )
    };
    Some(Link {
        object: o,
        next: t.clone(),
        goal: *goal,
        starts,
        step: what,
        synonym,
        fires: false,
        evidence: format!("sys.sql_modules: {name} names {t}; its owner is {own}"),
    })
}

/// Whether a modification through the view text may change `t`, or a
/// synonym for it that the text names.
fn writes_through_any(ctx: &Context, text: &str, t: &str) -> bool {
    writes_through(text, t) || synonyms_for(ctx, t).any(|s| writes_through(text, &s.qualified_name()))
}

/// Whether `o` names `target`, in its text or its recorded dependencies:
/// `Some(None)` itself, `Some(Some(synonym))` by a synonym for it.
fn names(ctx: &Context, o: &Object, target: &str, mentions: &Mentions) -> Option<Option<String>> {
    // A trigger's header names what it is on: only its body writes.
    let body;
    let o = if o.kind == ObjectKind::Trigger
        && let Some(text) = o.definition.as_deref()
    {
        body = Object {
            definition: Some(trigger_body(text).to_string()),
            ..o.clone()
        };
        &body
    } else {
        o
    };
    let direct = |t: &str| {
        let (s, n) = t.split_once('.').unwrap_or(("", t));
        mentions.recorded(o, t) || mentions.may_name(o, t) && module_text_names(ctx.catalog, o, s, n)
    };
    if direct(target) {
        return Some(None);
    }
    synonyms_for(ctx, target)
        .find(|s| direct(&s.qualified_name()))
        .map(|s| Some(s.qualified_name()))
}

/// Each trigger on `o` that is a target already, with the data rights
/// whose statements fire it (all three when its text is hidden).
fn triggers_on<'a>(
    ctx: &Context<'a>,
    o: &Object,
    targets: &[(String, String, bool)],
) -> Vec<(&'a Object, Vec<&'static str>)> {
    ctx.catalog
        .objects
        .iter()
        .filter(|t| {
            // A disabled trigger fires for no one: whoever may enable it
            // holds ALTER on its table, which [`super::code`] follows.
            t.kind == ObjectKind::Trigger
                && !t.disabled
                && t.parent.as_deref().is_some_and(|p| o.is(p))
                && targets.iter().any(|(x, _, _)| t.is(x))
        })
        .map(|t| (t, t.definition.as_deref().map_or(DATA.to_vec(), |d| header(d).1)))
        .filter(|(_, events)| !events.is_empty())
        .collect()
}

/// The events INSTEAD OF triggers on `o` take in place of the statement:
/// a write through the view for those runs the trigger, never the view's
/// own update of its base table. A trigger whose text is hidden may take
/// any of them, but is then followed as a link of its own. One whose body
/// names its own view takes nothing away: "CREATE TRIGGER" says a statement
/// an INSTEAD OF trigger runs against its own view does not call it again
/// but "processes as if the table had no INSTEAD OF trigger", so it goes
/// through the view to its base table.
fn instead_of_events(ctx: &Context, o: &Object, mentions: &Mentions) -> Vec<&'static str> {
    let view = o.qualified_name();
    ctx.catalog
        .objects
        .iter()
        .filter(|t| t.kind == ObjectKind::Trigger && !t.disabled && t.parent.as_deref().is_some_and(|p| o.is(p)))
        .filter(|t| names(ctx, t, &view, mentions).is_none())
        .filter_map(|t| t.definition.as_deref().map(header))
        .filter(|(instead, _)| *instead)
        .flat_map(|(_, events)| events)
        .collect()
}

/// Whether a function's text returns a table by a single statement.
fn returns_table(definition: &str) -> bool {
    let code = crate::tsql::code_only(definition).to_uppercase();
    code.split_whitespace()
        .collect::<Vec<_>>()
        .windows(2)
        .any(|w| w == ["RETURNS", "TABLE"])
}

fn drop_kind(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::View => "VIEW",
        ObjectKind::Function => "FUNCTION",
        ObjectKind::Trigger => "TRIGGER",
        ObjectKind::Synonym => "SYNONYM",
        _ => "PROCEDURE",
    }
}
