//! Who can reach the goals themselves, and code that reaches them: a right
//! on a fence table, a fence_admin procedure or the shipped code, by the
//! permission hierarchy; ALTER on code or tables the fence tables' owner
//! owns (a trigger or a rewrite runs as that owner, and ownership chaining
//! skips the check on the fence tables); EXECUTE on a module that calls a
//! fence_admin procedure or writes a fence table as their owner. Writes
//! through views, triggers and chains of objects are [`super::writers`]'.

use std::collections::BTreeSet;

use super::super::catalog::{Object, ObjectKind, PermissionState, PrincipalKind, Securable};
use super::super::rules::{Context, Naming, module_text_naming, wrapper_granted_contained};
use super::denies;
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::{Goal, Node};
use super::principals::hierarchy_note;
use super::right::Right;
use super::synonym_routes::{right_step, securable, ways_to};
use super::synonyms::synonyms_for;
use crate::audit::module_text::may_write;
use crate::tsql::{quote_name, quote_qualified};

/// What a right must imply on a fence table to write it: the rows, or the
/// table (ALTER: TRUNCATE, triggers; TAKE OWNERSHIP: then anything).
const WRITE: [&str; 5] = ["UPDATE", "INSERT", "DELETE", "ALTER", "TAKE OWNERSHIP"];

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    let fence = ctx.policy.fence_schema.clone();
    let tables: Vec<String> = ordered_tables(ctx);
    let admin = admin_procedures(ctx);
    let chained = chained_objects(ctx);
    let modules = reaching_modules(ctx);
    for right in rights {
        let from = right.node();
        let p = &right.permission;
        let add = |graph: &mut Graph, edge: Edge| graph.add(from.clone(), &right.holder, edge);
        // Write a fence table.
        // A way some DENY refuses to some contexts is kept, and the next
        // tried, until one no DENY refuses.
        'tables: for t in &tables {
            let target = object(&fence, t);
            for w in WRITE {
                if let Some(unless) = denies::reaches(ctx, right, &target, w) {
                    let name = format!("{fence}.{t}");
                    let open = unless.is_empty();
                    add(
                        graph,
                        Edge::new(
                            Node::Goal(Goal::WriteFence),
                            Kind::Acts,
                            format!(
                                "{w} on {name}{}{}{}",
                                hierarchy_note(ctx, right, w, &name),
                                denies::column_override_note(ctx, right, &target, w),
                                right.grant_option()
                            ),
                            right.evidence.clone(),
                            right.cut.clone(),
                        )
                        .on(name)
                        .unless(unless),
                    );
                    if open {
                        break 'tables;
                    }
                }
            }
        }
        // Run a fence_admin procedure.
        for proc in &admin {
            let (s, n) = proc.split_once('.').unwrap_or(("", proc));
            let target = object(s, n);
            let Some(unless) = denies::reaches(ctx, right, &target, "EXECUTE") else {
                continue;
            };
            let open = unless.is_empty();
            let designed = right.plain_grant
                && ctx.contains(&target, &p.on)
                && p.permission.eq_ignore_ascii_case("EXECUTE")
                && ctx
                    .policy
                    .expected_grants()
                    .any(|(r, q)| r.eq_ignore_ascii_case(&right.holder) && q.eq_ignore_ascii_case(proc));
            add(
                graph,
                Edge::new(
                    Node::Goal(Goal::RunAdmin),
                    if designed { Kind::Designed } else { Kind::Acts },
                    format!(
                        "EXECUTE on {proc}{}{}",
                        hierarchy_note(ctx, right, "EXECUTE", proc),
                        right.grant_option()
                    ),
                    right.evidence.clone(),
                    right.cut.clone(),
                )
                .on(proc.clone())
                .unless(unless),
            );
            if !designed && open {
                break;
            }
        }
        // Change the shipped code: ALTER on a code schema or a shipped
        // procedure, or taking either.
        let code_targets = ctx
            .policy
            .code_schemas
            .iter()
            .map(|s| (Securable::Schema { schema: s.clone() }, format!("SCHEMA::{s}")))
            .chain(ctx.policy.procedures.iter().map(|proc| {
                let (s, n) = proc.name.split_once('.').unwrap_or(("", &proc.name));
                (object(s, n), proc.name.clone())
            }));
        'code: for (target, name) in code_targets {
            for w in ["ALTER", "TAKE OWNERSHIP"] {
                if let Some(unless) = denies::reaches(ctx, right, &target, w) {
                    let open = unless.is_empty();
                    add(
                        graph,
                        Edge::new(
                            Node::Goal(Goal::AlterCode),
                            Kind::Acts,
                            format!("{w} on {name}{}", hierarchy_note(ctx, right, w, &name)),
                            right.evidence.clone(),
                            right.cut.clone(),
                        )
                        .on(name.clone())
                        .unless(unless),
                    );
                    if open {
                        break 'code;
                    }
                }
            }
        }
        // ALTER on what the fence tables' owner owns: code there runs as it.
        for o in &chained {
            if right.taken && o.owner.is_none() {
                continue;
            }
            let name = o.qualified_name();
            let target = object(&o.schema, &o.name);
            if let Some(unless) = denies::reaches(ctx, right, &target, "ALTER") {
                let open = unless.is_empty();
                let owner = ctx.tables_owner().unwrap_or("dbo");
                let what = if o.kind == ObjectKind::Table {
                    "a trigger it adds there"
                } else {
                    "its rewrite"
                };
                add(
                    graph,
                    Edge::new(
                        Node::Goal(Goal::WriteFence),
                        Kind::Acts,
                        format!(
                            "ALTER on {name}{}, which {owner} owns as it owns the fence tables: {what} runs as {owner}, \
                             and ownership chaining skips the permission check on the fence tables",
                            hierarchy_note(ctx, right, "ALTER", &name)
                        ),
                        right.evidence.clone(),
                        right.cut.clone(),
                    )
                    .on(name)
                    .unless(unless),
                );
                if open {
                    break;
                }
            }
        }
        // EXECUTE on a module that reaches a goal as its owner, or on a
        // synonym for it of the same owner.
        for (o, reaches, _) in modules.iter().filter(|(o, _, contained)| {
            !contained && o.kind != ObjectKind::Trigger && !(right.taken && o.owner.is_none())
        }) {
            let name = o.qualified_name();
            for by in ways_to(ctx, o) {
                if right.taken && by.owner.is_none() {
                    continue;
                }
                let Some(unless) = denies::reaches(ctx, right, &securable(by), "EXECUTE") else {
                    continue;
                };
                let (step, evidence) = right_step(ctx, right, "EXECUTE", by, o);
                add(
                    graph,
                    Edge::new(
                        Node::code(&name),
                        Kind::Acts,
                        format!("{step}{}", default_schema_step(ctx, &right.holder, reaches)),
                        format!("{}{evidence}", right.evidence),
                        right.cut.clone(),
                    )
                    .unless(unless),
                );
            }
        }
    }
    for (o, reaches, _) in modules {
        let name = o.qualified_name();
        graph.name_node(Node::code(&name), &name);
        let owner = chain_owner(ctx, o).unwrap_or("its owner").to_string();
        for Reach {
            goal, target, by, via, ..
        } in reaches
        {
            // A call of another module goes on to what that module reaches.
            let to = if via { Node::code(&target) } else { Node::Goal(goal) };
            graph.add(
                Node::code(&name),
                &name,
                Edge::new(
                    to,
                    Kind::Acts,
                    format!(
                        "{name} {} {target}{by} and is owned by {owner}, as {target} is: ownership chaining skips the \
                         permission check",
                        if goal == Goal::RunAdmin { "calls" } else { "writes" }
                    ),
                    format!("sys.sql_modules: {name} names {target}; its owner is {owner}"),
                    format!("DROP {} {};", drop_kind(o.kind), quote_qualified(&o.schema, &o.name)),
                )
                .on(target),
            );
        }
    }
}

/// `; then ALTER USER [u] WITH DEFAULT_SCHEMA = [s];` when the module's
/// call resolves to its target only from the caller's default schema and
/// the holder, a user, has another one: users can change their own
/// ("ALTER USER").
fn default_schema_step(ctx: &Context, holder: &str, reaches: &[Reach]) -> String {
    if reaches.iter().any(|r| r.callers_schema.is_none()) {
        return String::new();
    }
    let Some(schema) = reaches.iter().find_map(|r| r.callers_schema.as_deref()) else {
        return String::new();
    };
    match ctx.principal(holder) {
        Some(p) if p.kind == PrincipalKind::User => {
            if p.default_schema
                .as_deref()
                .is_some_and(|d| d.eq_ignore_ascii_case(schema))
            {
                format!(" ({holder}'s default schema is {schema})")
            } else {
                format!(
                    "; then ALTER USER {} WITH DEFAULT_SCHEMA = {}; (users can change their own default schema)",
                    quote_name(holder),
                    quote_name(schema)
                )
            }
        }
        _ => String::new(),
    }
}

fn object(schema: &str, name: &str) -> Securable {
    Securable::Object {
        schema: schema.into(),
        name: name.into(),
        column: None,
    }
}

/// The fence tables, the policy's order first (Resource leads).
pub(super) fn ordered_tables(ctx: &Context) -> Vec<String> {
    let mut tables: Vec<String> = ctx
        .policy
        .fence_tables
        .iter()
        .filter(|t| ctx.fence_tables().contains(*t))
        .cloned()
        .collect();
    for t in ctx.fence_tables() {
        if !tables.iter().any(|x| x.eq_ignore_ascii_case(t)) {
            tables.push(t.clone());
        }
    }
    tables
}

/// The shipped procedures in the fence_admin schema, and any other
/// procedure the catalog lists there.
pub(super) fn admin_procedures(ctx: &Context) -> Vec<String> {
    let Some(admin) = ctx
        .policy
        .code_schemas
        .iter()
        .find(|s| s.eq_ignore_ascii_case("fence_admin"))
    else {
        return Vec::new();
    };
    let mut procs: Vec<String> = ctx
        .policy
        .procedures
        .iter()
        .filter(|p| {
            p.name
                .split_once('.')
                .is_some_and(|(s, _)| s.eq_ignore_ascii_case(admin))
        })
        .map(|p| p.name.clone())
        .collect();
    for o in &ctx.catalog.objects {
        if o.kind == ObjectKind::Procedure && o.schema.eq_ignore_ascii_case(admin) && !procs.iter().any(|p| o.is(p)) {
            procs.push(o.qualified_name());
        }
    }
    procs
}

/// Tables and modules outside the fence and code schemas that the fence
/// tables' owner owns, when the engine chains ownership: ALTER on one is a
/// way to run code as that owner.
fn chained_objects<'a>(ctx: &Context<'a>) -> Vec<&'a Object> {
    let Some(owner) = ctx.tables_owner() else {
        return Vec::new();
    };
    if !ctx.catalog.engine.chains_ownership {
        return Vec::new();
    }
    let mut objects: Vec<&Object> = ctx
        .catalog
        .objects
        .iter()
        .filter(|o| !o.schema.is_empty() && !ctx.policy.is_fence_scoped_schema(&o.schema))
        .filter(|o| !matches!(o.kind, ObjectKind::Synonym | ObjectKind::DatabaseTrigger))
        .filter(|o| ctx.catalog.owner_of(o).is_some_and(|x| x.eq_ignore_ascii_case(owner)))
        .collect();
    objects.sort_by_key(|o| (o.kind != ObjectKind::Table, o.qualified_name().to_lowercase()));
    objects
}

/// What a module reaches: the goal, its target, and how the text names it.
pub(super) struct Reach {
    goal: Goal,
    target: String,
    /// ` (by the synonym s)`, or the one-part EXECUTE's resolution, or empty.
    by: String,
    /// The schema a caller sets as its default (ALTER USER ... WITH
    /// DEFAULT_SCHEMA) for a one-part EXECUTE to resolve to the target.
    callers_schema: Option<String>,
    /// Whether the target is another module that reaches the goal.
    via: bool,
}

/// How `o`'s text or recorded dependencies name `target`, itself or by a
/// synonym for it.
fn naming(ctx: &Context, o: &Object, target: &str) -> Option<(String, Option<String>)> {
    let depends =
        |t: &str| {
            ctx.catalog.dependencies.iter().flatten().any(|d| {
                d.referencing.eq_ignore_ascii_case(&o.qualified_name()) && d.referenced.eq_ignore_ascii_case(t)
            })
        };
    let how = |t: &str| {
        let (s, n) = t.split_once('.').unwrap_or(("", t));
        if depends(t) {
            return Some(Naming::AsItIs);
        }
        module_text_naming(ctx.catalog, o, s, n)
    };
    let (by, naming) = match how(target) {
        Some(n) => (String::new(), n),
        None => synonyms_for(ctx, target).find_map(|syn| {
            how(&syn.qualified_name()).map(|n| (format!(" (by the synonym {})", syn.qualified_name()), n))
        })?,
    };
    match naming {
        Naming::AsItIs => Some((by, None)),
        Naming::CallersSchema => {
            let (schema, _) = target.split_once('.').unwrap_or(("dbo", target));
            Some((
                format!(
                    "{by} by a one-part EXECUTE, which SQL Server resolves in the default schema of whoever runs it \
                     before dbo, a schema every user may set for itself (ALTER USER ... WITH DEFAULT_SCHEMA = {})",
                    quote_name(schema)
                ),
                Some(schema.to_string()),
            ))
        }
    }
}

/// The owner code runs its chain as: a trigger's is the owner of what it
/// is on.
pub(super) fn chain_owner<'a>(ctx: &Context<'a>, o: &'a Object) -> Option<&'a str> {
    if o.kind == ObjectKind::Trigger {
        return o
            .parent
            .as_deref()
            .and_then(|p| ctx.catalog.object(p))
            .and_then(|p| ctx.catalog.owner_of(p));
    }
    ctx.catalog.owner_of(o)
}

/// Enabled triggers that call a fence_admin procedure owned as what they
/// are on, with that owner: a write that fires one runs the procedure
/// unchecked, which [`super::writers`] follows from the write.
pub(super) fn admin_calling_triggers<'a>(ctx: &Context<'a>) -> Vec<(&'a Object, String)> {
    reaching_modules(ctx)
        .into_iter()
        .filter(|(o, _, _)| o.kind == ObjectKind::Trigger)
        .filter_map(|(o, _, _)| chain_owner(ctx, o).map(|owner| (o, owner.to_string())))
        .collect()
}

/// Modules other than the shipped procedures that call a fence_admin
/// procedure, or a module that reaches one, or write a fence table and are
/// owned by its owner, so that ownership chaining lets whoever may run them
/// do so too. A wrapper that hands no one more than their fence role has is
/// kept, marked contained: no right leads to it, but a module that calls it
/// passes the call on ("Ownership Chains"). Triggers are here for the
/// fence_admin procedures they reach ([`super::writers`] follows those that
/// write a fence table).
fn reaching_modules<'a>(ctx: &Context<'a>) -> Vec<(&'a Object, Vec<Reach>, bool)> {
    if !ctx.catalog.engine.chains_ownership {
        return Vec::new();
    }
    let fence = &ctx.policy.fence_schema;
    let admin = admin_procedures(ctx);
    let mut out = Vec::new();
    for o in &ctx.catalog.objects {
        let trigger = o.kind == ObjectKind::Trigger;
        if !(matches!(o.kind, ObjectKind::Procedure | ObjectKind::Function) || trigger && !o.disabled)
            || ctx.is_shipped(o)
        {
            continue;
        }
        let Some(owner) = chain_owner(ctx, o) else { continue };
        let same_owner = |target: &str| same_owner(ctx, owner, target);
        let mut reaches = Vec::new();
        // A function cannot change the database's state ("CREATE
        // FUNCTION"), and a procedure whose text changes no data and runs
        // no other module only reads what it names.
        let writes = o.kind == ObjectKind::Procedure && o.definition.as_deref().is_none_or(may_write);
        if writes
            && let Some((t, (by, callers_schema))) = ctx
                .fence_tables()
                .iter()
                .map(|t| format!("{fence}.{t}"))
                .filter(|t| same_owner(t))
                .find_map(|t| naming(ctx, o, &t).map(|n| (t, n)))
        {
            reaches.push(Reach {
                goal: Goal::WriteFence,
                target: t,
                by,
                callers_schema,
                via: false,
            });
        }
        let called: Vec<(String, (String, Option<String>))> = admin
            .iter()
            .filter_map(|p| naming(ctx, o, p).map(|n| (p.clone(), n)))
            .collect();
        let names: BTreeSet<String> = called.iter().map(|(p, _)| p.clone()).collect();
        // A wrapper its grantees may hand on (WITH GRANT OPTION) reaches
        // whoever they choose, whatever their own roles hold.
        let target = object(&o.schema, &o.name);
        let handed_on = ctx
            .grants()
            .any(|g| g.state == PermissionState::GrantWithGrantOption && ctx.reaches(g, &target, "EXECUTE"));
        // A name the text gives as it is comes before one the caller's
        // default schema must resolve.
        let mut candidates: Vec<&(String, (String, Option<String>))> =
            called.iter().filter(|(p, _)| same_owner(p)).collect();
        candidates.sort_by_key(|(_, (_, callers))| callers.is_some());
        let mut contained = false;
        if let Some((p, (by, callers_schema))) = candidates.first() {
            contained = !trigger && !handed_on && wrapper_granted_contained(ctx, o, &names);
            // One that writes a fence table too is reached for that, and
            // its contained call is left out as before.
            if !contained || reaches.is_empty() {
                reaches.push(Reach {
                    goal: Goal::RunAdmin,
                    target: p.clone(),
                    by: by.clone(),
                    callers_schema: callers_schema.clone(),
                    via: false,
                });
            }
            contained &= reaches.iter().all(|r| r.goal == Goal::RunAdmin);
        }
        if !reaches.is_empty() {
            out.push((o, reaches, contained));
        }
    }
    follow_calls(ctx, &mut out);
    out.sort_by_key(|(o, _, _)| o.qualified_name().to_lowercase());
    out
}

/// Whether `target` (or, when the catalog lists no such object, its
/// schema) is owned by `owner`.
fn same_owner(ctx: &Context, owner: &str, target: &str) -> bool {
    ctx.catalog
        .object(target)
        .and_then(|t| ctx.catalog.owner_of(t))
        .or_else(|| target.split_once('.').and_then(|(s, _)| ctx.catalog.schema_owner(s)))
        .is_some_and(|t| t.eq_ignore_ascii_case(owner))
}

/// Adds, until none is left, each procedure or enabled trigger that calls
/// (itself or by a synonym) a module found to run a fence_admin procedure,
/// owned as it is: the chain passes the call on unchecked, however many
/// modules it goes through.
fn follow_calls<'a>(ctx: &Context<'a>, out: &mut Vec<(&'a Object, Vec<Reach>, bool)>) {
    loop {
        let admins: Vec<String> = out
            .iter()
            .filter(|(_, reaches, _)| reaches.iter().any(|r| r.goal == Goal::RunAdmin))
            .map(|(o, _, _)| o.qualified_name())
            .collect();
        let mut added = false;
        for o in &ctx.catalog.objects {
            let trigger = o.kind == ObjectKind::Trigger;
            if !(o.kind == ObjectKind::Procedure || trigger && !o.disabled) || ctx.is_shipped(o) {
                continue;
            }
            let at = out.iter().position(|(x, _, _)| std::ptr::eq(*x, o));
            if at.is_some_and(|i| out[i].1.iter().any(|r| r.goal == Goal::RunAdmin)) {
                continue;
            }
            let Some(owner) = chain_owner(ctx, o) else { continue };
            let Some((callee, (by, callers_schema))) = admins
                .iter()
                .filter(|m| !o.is(m) && same_owner(ctx, owner, m))
                .find_map(|m| naming(ctx, o, m).map(|n| (m.clone(), n)))
            else {
                continue;
            };
            let reach = Reach {
                goal: Goal::RunAdmin,
                target: callee,
                by,
                callers_schema,
                via: true,
            };
            match at {
                Some(i) => {
                    out[i].1.push(reach);
                    out[i].2 = false;
                }
                None => out.push((o, vec![reach], false)),
            }
            added = true;
        }
        if !added {
            break;
        }
    }
}

fn drop_kind(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::View => "VIEW",
        ObjectKind::Function => "FUNCTION",
        ObjectKind::Trigger => "TRIGGER",
        _ => "PROCEDURE",
    }
}
