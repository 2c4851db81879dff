//! FP008 and FP009: the code that can reach the fence. Only the shipped
//! procedures may, owned like the tables they chain to.

use std::collections::BTreeSet;

use super::super::catalog::{Object, ObjectKind};
use super::super::module_text::{dynamic_constructs, referenced_tables};
use super::{CannotVerify, Context, Finding, Report, Rule};
use crate::tsql::{code_only, quote_name, quote_qualified};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    foreign_modules(ctx, report);
    ownership(ctx, report);
}

pub(super) fn shipped_present<'c>(ctx: &'c Context) -> impl Iterator<Item = &'c Object> {
    ctx.catalog.objects.iter().filter(|o| ctx.is_shipped(o))
}

/// The `schema.name` of the fence tables and shipped procedures `o` names, by
/// dependency, text, or (for a trigger) the table it fires on. Calling a
/// shipped procedure is reaching the fence too: a wrapper over
/// `fence_admin.ForceRelease` granted to a service hands it the operators'
/// right.
pub(super) fn fence_references(ctx: &Context, o: &Object) -> BTreeSet<String> {
    let fence = &ctx.policy.fence_schema;
    let name = o.qualified_name();
    let mut refs = BTreeSet::new();
    for d in ctx.catalog.dependencies.iter().flatten() {
        if d.referencing.eq_ignore_ascii_case(&name)
            && let Some((s, t)) = d.referenced.split_once('.')
        {
            if ctx.is_fence_table(s, t) {
                refs.insert(format!("{fence}.{t}"));
            } else if let Some(p) = ctx.policy.procedure(&d.referenced) {
                refs.insert(p.name.clone());
            }
        }
    }
    if let Some(def) = &o.definition {
        // A string names an object only where dynamic SQL may run it: a
        // THROW message that names fence.Resource reaches nothing.
        let code = if dynamic_constructs(def).is_empty() {
            code_only(def)
        } else {
            def.clone()
        };
        let def = &code;
        for t in referenced_tables(def, fence, ctx.fence_tables()) {
            refs.insert(format!("{fence}.{t}"));
        }
        for schema in &ctx.policy.code_schemas {
            let names: Vec<String> = ctx
                .policy
                .procedures
                .iter()
                .filter_map(|p| p.name.split_once('.'))
                .filter(|(s, _)| s.eq_ignore_ascii_case(schema))
                .map(|(_, n)| n.to_string())
                .collect();
            for n in referenced_tables(def, schema, &names) {
                refs.insert(format!("{schema}.{n}"));
            }
        }
    }
    if let Some((s, t)) = o.parent.as_deref().and_then(|p| p.split_once('.'))
        && ctx.is_fence_table(s, t)
    {
        refs.insert(format!("{fence}.{t}"));
    }
    refs
}

fn foreign_modules(ctx: &Context, report: &mut Report) {
    let mut hidden = Vec::new();
    for o in ctx
        .catalog
        .objects
        .iter()
        .filter(|o| o.kind.is_module() && !ctx.is_shipped(o))
    {
        let refs = fence_references(ctx, o);
        // A DDL trigger runs as whoever runs DDL, the deployer during
        // `fencepost migrate` included: SQL it builds at run time can reach
        // the fence with the deployer's rights, whatever names its text shows.
        let dynamic = match (&o.definition, o.kind) {
            (Some(def), ObjectKind::DatabaseTrigger) => dynamic_constructs(def),
            _ => Vec::new(),
        };
        if dynamic.is_empty() && super::wrappers::contained(ctx, o, &refs) {
            continue;
        }
        if refs.is_empty() && dynamic.is_empty() {
            if o.definition.is_none() {
                hidden.push(match &o.assembly {
                    Some(a) => format!("{} (CLR, assembly {a})", o.qualified_name()),
                    None => o.qualified_name(),
                });
            }
            continue;
        }
        let (kind, how) = match o.kind {
            ObjectKind::Procedure => ("PROCEDURE", "whoever may execute it reaches"),
            ObjectKind::Function => ("FUNCTION", "whoever may call it reaches"),
            ObjectKind::View => ("VIEW", "whoever may select from it reaches"),
            ObjectKind::Trigger => ("TRIGGER", "it runs on every change to"),
            ObjectKind::Synonym => ("SYNONYM", "code written against it reaches"),
            ObjectKind::DatabaseTrigger => (
                "TRIGGER",
                "it fires on DDL by anyone, the deployer running fencepost migrate included, and so reaches",
            ),
            ObjectKind::Table => continue,
        };
        let mut named: Vec<String> = refs.into_iter().collect();
        named.extend(dynamic.iter().map(|d| format!("SQL built at run time ({d})")));
        let fix = match o.kind {
            ObjectKind::DatabaseTrigger => format!("DROP TRIGGER {} ON DATABASE;", quote_name(&o.name)),
            _ => format!("DROP {kind} {};", quote_qualified(&o.schema, &o.name)),
        };
        report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::ForeignModule,
            principal: ctx.catalog.owner_of(o).map(str::to_string),
            object: o.qualified_name(),
            permission: Some(kind.to_lowercase()),
            why: format!(
                "{} is not a shipped procedure but names {}: {how} the fence with its owner's rights, outside \
                 the procedures' checks of owner, generation and expiry",
                o.qualified_name(),
                named.join(", ")
            ),
            fix,
        });
    }
    if !hidden.is_empty() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::ForeignModule,
            reason: format!(
                "the catalog does not show the code of {} (encrypted, compiled CLR, or the login lacks VIEW \
                 DEFINITION) and records no reference to the fence for it: {}",
                plural(hidden.len(), "module"),
                hidden.join(", ")
            ),
        });
    }
}

fn ownership(ctx: &Context, report: &mut Report) {
    if !ctx.catalog.engine.chains_ownership {
        // SECURITY DEFINER makes a procedure run as its owner, as a chain
        // would: then the owners below are what matters, as on SQL Server.
        let not_definer: Option<Vec<String>> = ctx.catalog.engine.security_definer.as_ref().map(|definer| {
            shipped_present(ctx)
                .map(Object::qualified_name)
                .filter(|name| !definer.contains(&name.to_lowercase()))
                .collect()
        });
        let script = "make the fence procedures run as that owner with `fencepost script --target \
                      babelfish-postgres` (run with psql after every migrate; `fencepost status` lists any that \
                      are not SECURITY DEFINER)";
        let reason = match not_definer {
            Some(missing) if missing.is_empty() => None,
            Some(missing) => Some(format!(
                "{} does not chain ownership, and {} not SECURITY DEFINER (a T-SQL ALTER PROCEDURE resets it): {script}",
                ctx.catalog.engine.product,
                missing.join(", ") + if missing.len() == 1 { " is" } else { " are" }
            )),
            None => Some(format!(
                "{} does not chain ownership, so a shared owner of procedures and tables does not mean here \
                 what the fence relies on; on Babelfish, {script}",
                ctx.catalog.engine.product
            )),
        };
        if let Some(reason) = reason {
            report.cannot_verify.push(CannotVerify {
                rule: Rule::OwnershipChain,
                reason,
            });
            return;
        }
    }
    let fence = &ctx.policy.fence_schema;
    for proc in shipped_present(ctx) {
        let Some(proc_owner) = ctx.catalog.owner_of(proc) else {
            continue;
        };
        let tables: Vec<String> = match &proc.definition {
            Some(_) => fence_references(ctx, proc).into_iter().collect(),
            None => ctx.fence_tables().iter().map(|t| format!("{fence}.{t}")).collect(),
        };
        for table in tables {
            let Some(t) = ctx.catalog.object(&table).filter(|t| t.kind == ObjectKind::Table) else {
                continue;
            };
            let Some(table_owner) = ctx.catalog.owner_of(t) else {
                continue;
            };
            if !table_owner.eq_ignore_ascii_case(proc_owner) {
                // Re-own whichever left its schema's owner; when neither
                // did, the schemas' owners differ.
                let fix = if t.owner.is_some() {
                    format!(
                        "ALTER AUTHORIZATION ON OBJECT::{} TO SCHEMA OWNER;",
                        quote_qualified(&t.schema, &t.name)
                    )
                } else if proc.owner.is_some() {
                    format!(
                        "ALTER AUTHORIZATION ON OBJECT::{} TO SCHEMA OWNER;",
                        quote_qualified(&proc.schema, &proc.name)
                    )
                } else {
                    format!(
                        "ALTER AUTHORIZATION ON SCHEMA::{} TO {};",
                        quote_name(&proc.schema),
                        quote_name(table_owner)
                    )
                };
                report.findings.push(Finding {
                    path: Vec::new(),
                    rule: Rule::OwnershipChain,
                    principal: Some(proc_owner.to_string()),
                    object: proc.qualified_name(),
                    permission: Some(format!("owner {proc_owner}, {table} owned by {table_owner}")),
                    why: format!(
                        "the ownership chain from {} to {table} is broken, so callers need rights on {table} \
                         themselves: exactly the grant the fence exists to avoid",
                        proc.qualified_name()
                    ),
                    fix,
                });
            }
        }
    }
}

pub(crate) fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
