//! FP022: code that reaches the fence without naming it. A DDL trigger
//! (database or server) whose own text is harmless may call a procedure
//! that runs SQL built at run time, and it runs that SQL with the rights of
//! whoever ran the DDL, the deployer included. A numbered procedure
//! (`Acquire;2`) shares Acquire's grants and chain; a case variant
//! (`fence_api.ACQUIRE`) in a case-sensitive database looks shipped to every
//! name comparison that ignores case. A default schema that someone else
//! controls decides what a service's unqualified names run.

use std::collections::BTreeSet;

use super::super::catalog::{Object, ObjectKind};
use super::super::module_text::{dynamic_constructs, referenced_tables};
use super::modules::fence_references;
use super::{CannotVerify, Context, Finding, Report, Rule};
use crate::tsql::{code_only, quote_name, quote_qualified};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    ddl_trigger_callees(ctx, report);
    server_triggers(ctx, report);
    numbered(ctx, report);
    case_variants(ctx, report);
    default_schemas(ctx, report);
}

/// The modules `text` calls, and those they call, by name or recorded
/// dependency, that build SQL at run time: `(module, construct)`.
pub(super) fn dynamic_callees<'c>(ctx: &Context<'c>, caller: &str, text: &str) -> Vec<(&'c Object, &'static str)> {
    let mut seen = BTreeSet::new();
    let mut queue = vec![(caller.to_string(), text.to_string())];
    let mut found = Vec::new();
    while let Some((name, text)) = queue.pop() {
        for o in ctx
            .catalog
            .objects
            .iter()
            .filter(|o| matches!(o.kind, ObjectKind::Procedure | ObjectKind::Function))
        {
            if seen.contains(&o.qualified_name().to_lowercase()) {
                continue;
            }
            let named = !referenced_tables(&text, &o.schema, [&o.name]).is_empty()
                || ctx.catalog.dependencies.iter().flatten().any(|d| {
                    d.referencing.eq_ignore_ascii_case(&name) && d.referenced.eq_ignore_ascii_case(&o.qualified_name())
                });
            if !named {
                continue;
            }
            seen.insert(o.qualified_name().to_lowercase());
            if let Some(def) = &o.definition {
                if let Some(construct) = dynamic_constructs(def).into_iter().next() {
                    found.push((o, construct));
                }
                queue.push((o.qualified_name(), def.clone()));
            }
        }
    }
    found
}

/// How T-SQL that runs outside the procedures (a job step, an activation
/// procedure) reaches the fence: SQL built at run time, a fence table or a
/// shipped procedure it names, a module it calls that names either, or one
/// that builds SQL. Empty when it provably reaches none of them.
pub(super) fn text_reach(ctx: &Context, caller: &str, text: &str, shipped_too: bool) -> Vec<String> {
    let fence = &ctx.policy.fence_schema;
    let mut how: Vec<String> = dynamic_constructs(text).into_iter().map(String::from).collect();
    // A string names an object only where dynamic SQL may run it.
    let code = if how.is_empty() {
        code_only(text)
    } else {
        text.to_string()
    };
    how.extend(
        referenced_tables(&code, fence, ctx.fence_tables())
            .into_iter()
            .map(|t| format!("{fence}.{t}")),
    );
    for o in ctx.catalog.objects.iter().filter(|o| o.kind.is_module()) {
        if referenced_tables(&code, &o.schema, [&o.name]).is_empty() {
            continue;
        }
        if ctx.is_shipped(o) {
            if shipped_too {
                how.push(format!("calls {}", o.qualified_name()));
            }
            continue;
        }
        let reached: Vec<String> = fence_references(ctx, o)
            .into_iter()
            .filter(|r| shipped_too || ctx.policy.procedure(r).is_none())
            .collect();
        if !reached.is_empty() {
            how.push(format!(
                "calls {}, which reaches {}",
                o.qualified_name(),
                reached.join(", ")
            ));
        }
    }
    for (callee, construct) in dynamic_callees(ctx, caller, &code) {
        how.push(format!("calls {} ({construct})", callee.qualified_name()));
    }
    how.dedup();
    how
}

fn ddl_trigger_callees(ctx: &Context, report: &mut Report) {
    for t in ctx
        .catalog
        .objects
        .iter()
        .filter(|o| o.kind == ObjectKind::DatabaseTrigger)
    {
        let Some(def) = &t.definition else { continue };
        for (callee, construct) in dynamic_callees(ctx, &t.qualified_name(), def) {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::IndirectCode,
                principal: ctx.catalog.owner_of(callee).map(str::to_string),
                object: t.qualified_name(),
                permission: Some(format!("calls {} ({construct})", callee.qualified_name())),
                why: format!(
                    "the DDL trigger {} fires on DDL by anyone, the deployer running fencepost migrate included, \
                     and calls {}, which runs SQL built at run time with that session's rights: whoever decides \
                     that SQL (a table it reads, a parameter) reaches the fence",
                    t.name,
                    callee.qualified_name()
                ),
                fix: format!("DROP TRIGGER {} ON DATABASE;", quote_name(&t.name)),
            });
        }
    }
}

/// Server triggers fire for every login, sysadmin deployers included.
fn server_triggers(ctx: &Context, report: &mut Report) {
    let triggers = match ctx.catalog.server.as_ref().map(|s| s.triggers.as_ref()) {
        Some(Some(triggers)) => triggers,
        _ => {
            report.cannot_verify.push(CannotVerify {
                rule: Rule::IndirectCode,
                reason: format!(
                    "server DDL and logon triggers (sys.server_triggers) could not be read on {}, and they fire \
                     for every login, the deployer's included",
                    ctx.catalog.engine.product
                ),
            });
            return;
        }
    };
    let fence = &ctx.policy.fence_schema;
    let mut hidden = Vec::new();
    for t in triggers {
        let Some(def) = &t.definition else {
            hidden.push(t.name.clone());
            continue;
        };
        let mut how: Vec<String> = dynamic_constructs(def).into_iter().map(String::from).collect();
        how.extend(
            referenced_tables(def, fence, ctx.fence_tables())
                .into_iter()
                .map(|t| format!("{fence}.{t}")),
        );
        if how.is_empty() {
            continue;
        }
        report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::IndirectCode,
            principal: None,
            object: format!("SERVER TRIGGER::{}", t.name),
            permission: Some(how.join(", ")),
            why: format!(
                "the server trigger {} fires for every login, sysadmin deployers included, and names the fence or \
                 runs SQL built at run time ({}), with the rights of whoever fired it",
                t.name,
                how.join(", ")
            ),
            fix: format!("DROP TRIGGER {} ON ALL SERVER;", quote_name(&t.name)),
        });
    }
    if !hidden.is_empty() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::IndirectCode,
            reason: format!(
                "the text of server trigger{} {} is hidden (encrypted, CLR, or no VIEW ANY DEFINITION), and it \
                 fires for every login",
                if hidden.len() == 1 { "" } else { "s" },
                hidden.join(", ")
            ),
        });
    }
}

/// `Acquire;2` runs with Acquire's grants and ownership chain, whatever it says.
fn numbered(ctx: &Context, report: &mut Report) {
    for o in ctx.catalog.objects.iter().filter(|o| o.kind == ObjectKind::Procedure) {
        let Some((base, number)) = o.name.split_once(';') else {
            continue;
        };
        let base_name = format!("{}.{base}", o.schema);
        let Some(shipped) = ctx.policy.procedure(&base_name) else {
            continue;
        };
        let (schema, name) = shipped.name.split_once('.').unwrap_or((&o.schema, base));
        report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::IndirectCode,
            principal: ctx.catalog.owner_of(o).map(str::to_string),
            object: o.qualified_name(),
            permission: Some(format!("numbered procedure {number} of {}", shipped.name)),
            why: format!(
                "{} is numbered procedure {number} of the shipped {}: every grant on {} covers it and it chains to \
                 the fence tables as {} does, with a body no deploy shipped",
                o.qualified_name(),
                shipped.name,
                shipped.name,
                shipped.name
            ),
            fix: format!(
                "DROP PROCEDURE {} (drops every number of it), then fencepost migrate (recreates it and its grants)",
                quote_qualified(schema, name)
            ),
        });
    }
}

/// A procedure in a code schema whose name differs from a shipped one only
/// in case is not the shipped one, but every name comparison that ignores
/// case (the grants' check, the drift check) takes it for it.
fn case_variants(ctx: &Context, report: &mut Report) {
    for o in ctx.catalog.objects.iter().filter(|o| o.kind.is_module()) {
        let Some(shipped) = ctx.policy.procedure(&o.qualified_name()) else {
            continue;
        };
        if ctx.is_shipped(o) {
            continue;
        }
        report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::IndirectCode,
            principal: ctx.catalog.owner_of(o).map(str::to_string),
            object: o.qualified_name(),
            permission: Some(format!("case variant of {}", shipped.name)),
            why: format!(
                "{} differs from the shipped {} only in case: in a case-sensitive database it is another object, \
                 reached by callers who spell the name so, with a body no deploy shipped",
                o.qualified_name(),
                shipped.name
            ),
            fix: format!(
                "DROP {} {};",
                if o.kind == ObjectKind::Procedure {
                    "PROCEDURE"
                } else {
                    "SYNONYM"
                },
                quote_qualified(&o.schema, &o.name)
            ),
        });
    }
}

/// Unqualified names resolve in the caller's default schema first.
fn default_schemas(ctx: &Context, report: &mut Report) {
    let tables_owner = ctx.tables_owner();
    for p in &ctx.catalog.principals {
        let Some(schema) = p.default_schema.as_deref() else {
            continue;
        };
        if !ctx.is_service(&p.name) {
            continue;
        }
        let Some(owner) = ctx.catalog.schema_owner(schema) else {
            continue;
        };
        if owner.eq_ignore_ascii_case(&p.name)
            || tables_owner.is_some_and(|t| t.eq_ignore_ascii_case(owner))
            || ctx.is_admin(owner)
        {
            continue;
        }
        report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::IndirectCode,
            principal: Some(p.name.clone()),
            object: format!("SCHEMA::{schema}"),
            permission: Some(format!("default schema, owned by {owner}")),
            why: format!(
                "{}'s default schema is {schema}, which {owner} owns: an unqualified name {} sends (EXEC Acquire) \
                 resolves there first, so {owner} decides what it runs",
                p.name, p.name
            ),
            fix: format!("ALTER USER {} WITH DEFAULT_SCHEMA = [dbo];", quote_name(&p.name)),
        });
    }
}
