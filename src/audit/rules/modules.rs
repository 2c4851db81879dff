//! FP008 to FP011: the code that can reach the fence tables. Only the shipped
//! procedures may, exactly as deployed, owned like the tables, without
//! dynamic SQL or `EXECUTE AS`.

use std::collections::BTreeSet;

use super::super::catalog::{Object, ObjectKind};
use super::super::definition_hash::same_definition;
use super::super::sqltext::{dynamic_constructs, quote2, referenced_tables};
use super::{CannotVerify, Context, Finding, Report, Rule};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    foreign_modules(ctx, report);
    ownership(ctx, report);
    dynamic_sql(ctx, report);
    drift(ctx, report);
}

fn shipped_present<'c>(ctx: &'c Context) -> impl Iterator<Item = &'c Object> {
    ctx.catalog.objects.iter().filter(|o| ctx.is_shipped(o))
}

/// The `schema.name` of the fence tables `o` names, by dependency, text, or
/// (for a trigger) the table it fires on.
fn fence_references(ctx: &Context, o: &Object) -> BTreeSet<String> {
    let fence = &ctx.policy.fence_schema;
    let name = o.qualified_name();
    let mut refs = BTreeSet::new();
    for d in ctx.catalog.dependencies.iter().flatten() {
        if d.referencing.eq_ignore_ascii_case(&name)
            && let Some((s, t)) = d.referenced.split_once('.')
            && ctx.is_fence_table(s, t)
        {
            refs.insert(format!("{fence}.{t}"));
        }
    }
    if let Some(def) = &o.definition {
        for t in referenced_tables(def, fence, ctx.fence_tables()) {
            refs.insert(format!("{fence}.{t}"));
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
        if refs.is_empty() {
            if o.definition.is_none() {
                hidden.push(o.qualified_name());
            }
            continue;
        }
        let (kind, how) = match o.kind {
            ObjectKind::Procedure => ("PROCEDURE", "whoever may execute it reaches"),
            ObjectKind::Function => ("FUNCTION", "whoever may call it reaches"),
            ObjectKind::View => ("VIEW", "whoever may select from it reaches"),
            ObjectKind::Trigger => ("TRIGGER", "it runs on every change to"),
            ObjectKind::Synonym => ("SYNONYM", "code written against it reaches"),
            ObjectKind::Table => continue,
        };
        let tables: Vec<String> = refs.into_iter().collect();
        report.findings.push(Finding {
            rule: Rule::ForeignModule,
            principal: ctx.catalog.owner_of(o).map(str::to_string),
            object: o.qualified_name(),
            permission: Some(kind.to_lowercase()),
            why: format!(
                "{} is not a shipped procedure but names {}: {how} the fence rows with its owner's rights, \
                 outside the procedures' checks of owner, generation and expiry",
                o.qualified_name(),
                tables.join(", ")
            ),
            fix: format!("DROP {kind} {};", quote2(&o.schema, &o.name)),
        });
    }
    if !hidden.is_empty() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::ForeignModule,
            reason: format!(
                "the catalog hides the definition of {} (encrypted, or the login lacks VIEW DEFINITION) and \
                 records no reference to a fence table for it: {}",
                plural(hidden.len(), "module"),
                hidden.join(", ")
            ),
        });
    }
}

fn ownership(ctx: &Context, report: &mut Report) {
    if !ctx.catalog.engine.chains_ownership {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::OwnershipChain,
            reason: format!(
                "{} does not chain ownership, so a shared owner of procedures and tables does not mean here \
                 what the fence relies on",
                ctx.catalog.engine.product
            ),
        });
        return;
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
                report.findings.push(Finding {
                    rule: Rule::OwnershipChain,
                    principal: Some(proc_owner.to_string()),
                    object: proc.qualified_name(),
                    permission: Some(format!("owner {proc_owner}, {table} owned by {table_owner}")),
                    why: format!(
                        "the ownership chain from {} to {table} is broken, so callers need rights on {table} \
                         themselves: exactly the grant the fence exists to avoid",
                        proc.qualified_name()
                    ),
                    fix: format!(
                        "ALTER AUTHORIZATION ON OBJECT::{} TO SCHEMA OWNER;",
                        quote2(&proc.schema, &proc.name)
                    ),
                });
            }
        }
    }
}

/// The shipped file is named as the policy spells the procedure, which need
/// not be how the catalog does (Babelfish lists names lower-cased).
fn redeploy(ctx: &Context, proc: &Object) -> String {
    let qualified = proc.qualified_name();
    let shipped = ctx
        .policy
        .procedure(&qualified)
        .map_or(qualified.as_str(), |p| p.name.as_str());
    let (schema, name) = shipped.split_once('.').unwrap_or((&proc.schema, &proc.name));
    format!(
        "fencepost migrate (it restores drifted procedures), or ALTER PROCEDURE {} with the shipped text of \
         procedures/{shipped}.sql",
        quote2(schema, name)
    )
}

fn dynamic_sql(ctx: &Context, report: &mut Report) {
    let mut hidden = Vec::new();
    for proc in shipped_present(ctx) {
        let Some(def) = &proc.definition else {
            hidden.push(proc.qualified_name());
            continue;
        };
        let mut found: Vec<String> = dynamic_constructs(def).into_iter().map(String::from).collect();
        if let Some(who) = &proc.execute_as
            && !found.iter().any(|f| f == "EXECUTE AS")
        {
            found.push(format!("EXECUTE AS {who}"));
        }
        if !found.is_empty() {
            report.findings.push(Finding {
                rule: Rule::DynamicSql,
                principal: ctx.catalog.owner_of(proc).map(str::to_string),
                object: proc.qualified_name(),
                permission: Some(found.join(", ")),
                why: "dynamic SQL is checked against the caller's own rights and runs text no review saw, and \
                      EXECUTE AS changes whose rights the body runs with: either way the catalog no longer \
                      shows who can write the fence"
                    .into(),
                fix: redeploy(ctx, proc),
            });
        }
    }
    if !hidden.is_empty() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::DynamicSql,
            reason: format!("the catalog hides the definition of {}", hidden.join(", ")),
        });
    }
}

fn drift(ctx: &Context, report: &mut Report) {
    let journal = ctx.catalog.deployed.as_ref();
    if journal.is_none() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::Drift,
            reason: format!(
                "the database has no deploy journal ({}.DeployedProcedure), so there is no deployed \
                 definition to compare with",
                ctx.policy.fence_schema
            ),
        });
    }
    let mut unknown = Vec::new();
    for shipped in &ctx.policy.procedures {
        let Some(proc) = ctx
            .catalog
            .object(&shipped.name)
            .filter(|o| o.kind == ObjectKind::Procedure)
        else {
            let (schema, name) = shipped.name.split_once('.').unwrap_or(("", &shipped.name));
            report.findings.push(Finding {
                rule: Rule::Drift,
                principal: None,
                object: shipped.name.clone(),
                permission: Some("missing".into()),
                why: "a shipped procedure is missing, so services get errors instead of fenced outcomes".into(),
                fix: format!("fencepost migrate (recreates {})", quote2(schema, name)),
            });
            continue;
        };
        let Some(journal) = journal else { continue };
        let recorded = journal
            .iter()
            .find(|d| d.name.eq_ignore_ascii_case(&shipped.name))
            .and_then(|d| d.definition_hash.as_deref());
        match (recorded, proc.definition_hash.as_deref()) {
            (Some(recorded), Some(current)) if !same_definition(recorded, current) => {
                report.findings.push(Finding {
                    rule: Rule::Drift,
                    principal: ctx.catalog.owner_of(proc).map(str::to_string),
                    object: proc.qualified_name(),
                    permission: Some("definition changed since deploy".into()),
                    why: "the procedure on the server is not the one deployed: it was altered by hand, and \
                          what it does to the fence rows is no longer what shipped"
                        .into(),
                    fix: redeploy(ctx, proc),
                });
            }
            (Some(_), Some(_)) => {}
            (None, _) => unknown.push(format!("{} (no hash recorded by the deploy)", proc.qualified_name())),
            (_, None) => unknown.push(format!("{} (no current definition hash)", proc.qualified_name())),
        }
    }
    if !unknown.is_empty() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::Drift,
            reason: format!("cannot compare {}", unknown.join(", ")),
        });
    }
}

pub(crate) fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
