//! Writes that reach a fence table through a chain of objects ("Ownership
//! Chains": while each object on the way has the owner of the next, only
//! the first is checked). A view or inline table-valued function selects
//! from a fence table or another such object; a procedure or function
//! writes one; a trigger writes one, and a write to the table or view it is
//! on fires it; a synonym stands for its base object. Each is a node whose
//! edge names the next object, so the closure follows chains of any length,
//! and whoever holds the right that starts one (a data right on a view or a
//! triggered object, EXECUTE on a module) is named with the route.

use super::super::catalog::{Object, ObjectKind, Securable};
use super::super::module_text::{contains_words, normalized};
use super::super::rules::{Context, module_text_names};
use super::denies;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::{Goal, Node};
use super::principals::hierarchy_note;
use super::right::Right;
use super::updatable::writes_through;
use crate::tsql::{code_only, quote_qualified};

/// What a write through an object goes to next.
struct Link<'a> {
    object: &'a Object,
    /// `schema.name` of a fence table (the goal) or of the next object.
    next: String,
    goal: bool,
    /// The rights on `object` that start the write.
    starts: Vec<&'static str>,
    /// The synonym it names `next` by, if any.
    synonym: Option<String>,
    step: String,
    evidence: String,
}

const DATA: [&str; 3] = ["UPDATE", "INSERT", "DELETE"];

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    let links = links(ctx);
    for right in rights {
        let from = right.node();
        for link in links.iter().filter(|l| !l.starts.is_empty()) {
            if right.taken && link.object.owner.is_none() {
                continue;
            }
            let name = link.object.qualified_name();
            let target = Securable::Object {
                schema: link.object.schema.clone(),
                name: link.object.name.clone(),
                column: None,
            };
            let Some((w, unless)) = link
                .starts
                .iter()
                .find_map(|w| denies::reaches(ctx, right, &target, w).map(|u| (*w, u)))
            else {
                continue;
            };
            graph.add(
                from.clone(),
                &right.holder,
                Edge::new(
                    Node::code(&name),
                    Kind::Acts,
                    format!(
                        "{w} on {name}{}{}",
                        hierarchy_note(ctx, right, w, &name),
                        right.grant_option()
                    ),
                    right.evidence.clone(),
                    right.cut.clone(),
                )
                .unless(unless),
            );
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
    let mut out: Vec<Link> = Vec::new();
    loop {
        let mut added = false;
        for o in &ctx.catalog.objects {
            if ctx.is_shipped(o)
                || o.schema.is_empty()
                || out.iter().any(|l| std::ptr::eq(l.object, o))
                || targets.iter().any(|(t, _, _)| o.is(t))
            {
                continue;
            }
            if let Some(link) = link(ctx, o, &targets, chains) {
                let owner = owner(ctx, o).unwrap_or_default().to_string();
                targets.push((o.qualified_name(), owner, false));
                out.push(link);
                added = true;
            }
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
    out.sort_by_key(|l| l.object.qualified_name().to_lowercase());
    out
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

/// The link `o` makes to the first of `targets` it reaches, if any.
fn link<'a>(ctx: &Context<'a>, o: &'a Object, targets: &[(String, String, bool)], chains: bool) -> Option<Link<'a>> {
    let own = owner(ctx, o)?;
    let name = o.qualified_name();
    let view = o.kind == ObjectKind::View || inline(ctx, o);
    let module = matches!(o.kind, ObjectKind::Procedure | ObjectKind::Function) && !view;
    if !(view || module && chains || o.kind == ObjectKind::Trigger && chains || o.kind == ObjectKind::Table && chains) {
        return None;
    }
    if o.kind == ObjectKind::Table || o.kind == ObjectKind::View && chains && has_trigger_link(ctx, o, targets) {
        // A write to it fires a trigger that writes on.
        let (trigger, events) = triggers_on(ctx, o, targets)?;
        return Some(Link {
            object: o,
            next: trigger.qualified_name(),
            goal: false,
            starts: events,
            synonym: None,
            step: format!(
                "a write to {name} fires its trigger {}, which runs in the chain of {name}'s owner {own}",
                trigger.qualified_name()
            ),
            evidence: format!("sys.triggers: {} is on {name}", trigger.qualified_name()),
        });
    }
    // Every target it names is tried, not the first: a view that names one
    // fence table only in a filter may still write another it selects from.
    let ((t, _, goal), synonym) = targets
        .iter()
        .filter_map(|target| names(ctx, o, &target.0).map(|s| (target, s)))
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
        (
            DATA.to_vec(),
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
fn names(ctx: &Context, o: &Object, target: &str) -> Option<Option<String>> {
    let direct = |t: &str| {
        let (s, n) = t.split_once('.').unwrap_or(("", t));
        module_text_names(o, s, n)
            || ctx.catalog.dependencies.iter().flatten().any(|d| {
                d.referencing.eq_ignore_ascii_case(&o.qualified_name()) && d.referenced.eq_ignore_ascii_case(t)
            })
    };
    if direct(target) {
        return Some(None);
    }
    synonyms_for(ctx, target)
        .find(|s| direct(&s.qualified_name()))
        .map(|s| Some(s.qualified_name()))
}

/// The synonyms whose base object is `target`.
fn synonyms_for<'a>(ctx: &Context<'a>, target: &str) -> impl Iterator<Item = &'a Object> {
    let target = normalized(target);
    ctx.catalog.objects.iter().filter(move |s| {
        s.kind == ObjectKind::Synonym
            && s.definition
                .as_deref()
                .is_some_and(|d| normalized(&code_only(d)) == target)
    })
}

fn has_trigger_link(ctx: &Context, o: &Object, targets: &[(String, String, bool)]) -> bool {
    triggers_on(ctx, o, targets).is_some()
}

/// The first trigger on `o` that is a target already, and the data rights
/// whose statements fire it (all three when its text is hidden).
fn triggers_on<'a>(
    ctx: &Context<'a>,
    o: &Object,
    targets: &[(String, String, bool)],
) -> Option<(&'a Object, Vec<&'static str>)> {
    let trigger = ctx.catalog.objects.iter().find(|t| {
        t.kind == ObjectKind::Trigger
            && t.parent.as_deref().is_some_and(|p| o.is(p))
            && targets.iter().any(|(x, _, _)| t.is(x))
    })?;
    let events = match trigger.definition.as_deref() {
        None => DATA.to_vec(),
        Some(text) => {
            let code = normalized(&code_only(text));
            let head = code.split(" as ").next().unwrap_or(&code).to_string();
            DATA.into_iter()
                .filter(|e| contains_words(&head, &e.to_lowercase()))
                .collect()
        }
    };
    (!events.is_empty()).then_some((trigger, events))
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
