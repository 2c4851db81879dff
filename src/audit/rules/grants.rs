//! FP003 and FP004: permissions on the fence tables themselves, on their
//! schema, or on the whole database, and owning them.

use super::super::catalog::{ObjectKind, Securable};
use super::super::reach::grant_survives;
use super::{Context, Finding, Report, Rule};
use crate::tsql::{quote_name, quote_qualified};

/// Permissions on a table that let a principal change the fence rows or the
/// table. A grant counts when it implies one of them on a fence table (the
/// permission hierarchy): CONTROL does, and so do ALTER ANY SCHEMA or ALTER
/// on the database, which are ALTER on every table.
const WRITE: [&str; 5] = ["UPDATE", "INSERT", "DELETE", "ALTER", "TAKE OWNERSHIP"];

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let fence = &ctx.policy.fence_schema;
    for p in ctx.grants() {
        // What the grant gives on some fence table past the DENYs: a grant
        // every DENY removes (DENY CONTROL on the schema, DENY UPDATE on
        // the database, a DENY to public) gives nothing.
        let survives = |wanted: &str| {
            ctx.fence_tables()
                .iter()
                .any(|t| grant_survives(ctx, p, &fence_table(fence, t), wanted))
        };
        let write = WRITE.into_iter().find(|w| ctx.implies(p, "OBJECT", w) && survives(w));
        let read = ctx.implies(p, "OBJECT", "SELECT") && survives("SELECT");
        if write.is_none() && !read {
            continue;
        }
        // The fence schema is granted to nobody, so any grant on it is a
        // finding; a database-wide grant matters when a service holds it.
        let scope = match &p.on {
            Securable::Object { schema, name, .. } if ctx.is_fence_table(schema, name) => "on a fence table",
            Securable::Schema { schema } if schema.eq_ignore_ascii_case(fence) => "on the fence schema",
            Securable::Database if !ctx.services_reached_by(&p.grantee).is_empty() => "on the whole database",
            _ => continue,
        };
        let perm = p.permission.to_uppercase();
        // CONTROL names itself: it is every right on the fence tables.
        let implied = |wanted: &str| {
            if perm == "CONTROL" {
                String::new()
            } else {
                ctx.implied(p, wanted, "every fence table")
            }
        };
        let why = if let Some(wanted) = write {
            format!(
                "{perm} {scope}{} lets {} change the fence rows without the procedures' checks of owner, \
                 generation and expiry",
                implied(wanted),
                p.grantee
            )
        } else {
            format!(
                "{perm} {scope}{} lets {} read each holder's owner id, and owner plus generation is what a \
                 publish presents",
                implied("SELECT"),
                p.grantee
            )
        };
        let rule = if write.is_some() {
            Rule::WriteAccess
        } else {
            Rule::ReadAccess
        };
        report.findings.push(ctx.grant_finding(rule, p, &why));
    }
    owners(ctx, report);
}

fn fence_table(fence: &str, table: &str) -> Securable {
    Securable::Object {
        schema: fence.into(),
        name: table.into(),
        column: None,
    }
}

/// An owner needs no grant: owning the fence schema or a fence table is
/// CONTROL over it.
fn owners(ctx: &Context, report: &mut Report) {
    let fence = &ctx.policy.fence_schema;
    if let Some(owner) = ctx.catalog.schema_owner(fence)
        && ctx.owner_is_service(owner)
    {
        report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::WriteAccess,
            principal: Some(owner.to_string()),
            object: format!("SCHEMA::{fence}"),
            permission: Some("owner".into()),
            why: format!(
                "{owner} owns the fence schema and so controls every fence table{}",
                ctx.reach_note(owner)
            ),
            fix: format!("ALTER AUTHORIZATION ON SCHEMA::{} TO [dbo];", quote_name(fence)),
        });
    }
    for table in ctx.catalog.objects.iter().filter(|o| o.kind == ObjectKind::Table) {
        let Some(owner) = table.owner.as_deref() else {
            continue;
        };
        if ctx.is_fence_table(&table.schema, &table.name) && ctx.owner_is_service(owner) {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::WriteAccess,
                principal: Some(owner.to_string()),
                object: table.qualified_name(),
                permission: Some("owner".into()),
                why: format!(
                    "{owner} owns a fence table and so may change it at will{}",
                    ctx.reach_note(owner)
                ),
                fix: format!(
                    "ALTER AUTHORIZATION ON OBJECT::{} TO SCHEMA OWNER;",
                    quote_qualified(&table.schema, &table.name)
                ),
            });
        }
    }
}
