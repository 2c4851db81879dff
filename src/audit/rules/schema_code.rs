//! FP020: control of a schema that holds code or tables owned by the fence
//! tables' owner. Owning a schema, or ALTER or CONTROL on it, is ALTER on
//! every object in it, also on objects whose owner was set to someone else;
//! altering a module keeps its owner, and a trigger added to a table runs as
//! the table's owner. So a procedure owned by dbo in a schema a service owns
//! is a procedure the service may rewrite, and it chains to the fence.
//! TAKE OWNERSHIP of the schema comes to the same: the new owner keeps the
//! objects' own owners.

use super::super::catalog::{Object, ObjectKind, PermissionState, Securable};
use super::{Context, Finding, Report, Rule};
use crate::tsql::quote_qualified;

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let Some(tables_owner) = ctx.tables_owner() else {
        return;
    };
    for schema in &ctx.catalog.schemas {
        let schema_owner = schema.owner.as_str();
        // Objects in this schema that run or fire as the fence tables'
        // owner although the schema is someone else's; fence tables are
        // FP003's.
        let chained: Vec<&Object> = ctx
            .catalog
            .objects
            .iter()
            .filter(|o| o.schema.eq_ignore_ascii_case(&schema.name) && o.kind != ObjectKind::Synonym)
            .filter(|o| !ctx.is_fence_table(&o.schema, &o.name))
            .filter(|o| o.owner.as_deref().is_some_and(|x| x.eq_ignore_ascii_case(tables_owner)))
            .collect();
        if chained.is_empty() || schema_owner.eq_ignore_ascii_case(tables_owner) {
            // A schema the fence tables' owner owns is FP005's for grants.
            if !chained.is_empty() {
                take_ownership(ctx, report, &schema.name, &chained);
            }
            continue;
        }
        let names = names(&chained);
        if !ctx.is_admin(schema_owner) {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::SchemaCode,
                principal: Some(schema_owner.to_string()),
                object: format!("SCHEMA::{}", schema.name),
                permission: Some("owner".into()),
                why: format!(
                    "{schema_owner} owns {} and so may alter {names}, which {tables_owner} owns: the altered code \
                     keeps that owner and chains to the fence tables{}",
                    schema.name,
                    ctx.reach_note(schema_owner)
                ),
                fix: reown(&chained),
            });
        }
        // ALTER, CONTROL or TAKE OWNERSHIP of the schema, held on it or
        // implied from the database (ALTER ANY SCHEMA, ALTER).
        let target = Securable::Schema {
            schema: schema.name.clone(),
        };
        for p in ctx.grants().filter(|p| {
            ["ALTER", "TAKE OWNERSHIP"].iter().any(|w| ctx.reaches(p, &target, w))
                && matches!(&p.on, Securable::Schema { .. } | Securable::Database)
                && !ctx.is_admin(&p.grantee)
        }) {
            let on = match &p.on {
                Securable::Database => format!("the database, which is ALTER on {}", schema.name),
                _ => schema.name.clone(),
            };
            let why = format!(
                "{} on {on} lets {} alter {names}, which {tables_owner} owns: the altered code keeps that owner and \
                 chains to the fence tables",
                p.permission.to_uppercase(),
                p.grantee
            );
            report.findings.push(ctx.grant_finding(Rule::SchemaCode, p, &why));
        }
    }
}

/// TAKE OWNERSHIP of a schema the fence tables' owner owns: its objects
/// without an owner of their own pass to the taker (the chain breaks), but
/// those owned by the fence tables' owner stay so and become the taker's to
/// alter.
fn take_ownership(ctx: &Context, report: &mut Report, schema: &str, chained: &[&Object]) {
    // ALTER or CONTROL of such a schema is FP005's.
    for p in ctx.grants().filter(|p| {
        ctx.implies(p, "SCHEMA", "TAKE OWNERSHIP")
            && !ctx.implies(p, "SCHEMA", "ALTER")
            && matches!(&p.on, Securable::Schema { schema: s } if s.eq_ignore_ascii_case(schema))
            && !ctx.is_admin(&p.grantee)
            && p.state != PermissionState::Deny
    }) {
        let why = format!(
            "TAKE OWNERSHIP on {schema} lets {} own it and then alter {}, whose own owner stays the fence tables' \
             owner: the altered code chains to the fence tables",
            p.grantee,
            names(chained)
        );
        report.findings.push(ctx.grant_finding(Rule::SchemaCode, p, &why));
    }
}

fn names(objects: &[&Object]) -> String {
    objects
        .iter()
        .map(|o| o.qualified_name())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Handing the objects to their schema's owner breaks the chain.
fn reown(objects: &[&Object]) -> String {
    objects
        .iter()
        .map(|o| {
            format!(
                "ALTER AUTHORIZATION ON OBJECT::{} TO SCHEMA OWNER;",
                quote_qualified(&o.schema, &o.name)
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}
