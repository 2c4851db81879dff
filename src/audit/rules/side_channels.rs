//! FP023: copies and side channels of the fence rows. Each row holds its
//! holder's owner id, and owner plus generation is what a publish presents:
//! a copy outside the fence tables' grants (a backup, a history or change
//! table, a subscriber) hands them out, and a predicate bound to the tables
//! sees every row and can hide or refuse the procedures' reads and writes.

use super::super::catalog::{Securable, TableFeature};
use super::{CannotVerify, Context, Finding, Report, Rule};
use crate::tsql::{quote_name, quote_qualified};

/// Database permissions that copy or observe the fence rows when a service
/// holds them.
const SERVICE_RIGHTS: [(&str, &str); 5] = [
    (
        "BACKUP DATABASE",
        "BACKUP DATABASE copies every fence row, owner ids included, to a file outside the database's grants",
    ),
    (
        "BACKUP LOG",
        "BACKUP LOG copies every change to the fence rows, owner ids included, to a file outside the database's \
         grants",
    ),
    (
        "ALTER ANY SECURITY POLICY",
        "ALTER ANY SECURITY POLICY lets its holder bind a predicate function to a fence table (with REFERENCES \
         on it) or change a bound one: the predicate sees every row and can hide or refuse the procedures' writes",
    ),
    (
        "VIEW DATABASE STATE",
        "VIEW DATABASE STATE shows the Query Store's plans, whose compiled parameter values include the @Owner \
         and @Generation of fence calls",
    ),
    (
        "VIEW DATABASE PERFORMANCE STATE",
        "VIEW DATABASE PERFORMANCE STATE shows the Query Store's plans, whose compiled parameter values include \
         the @Owner and @Generation of fence calls",
    ),
];

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let fence = &ctx.policy.fence_schema;
    for p in ctx.grants() {
        // REFERENCES on a table, held or implied; CONTROL and what covers
        // it are write rights, FP003's.
        let references = ctx.implies(p, "OBJECT", "REFERENCES") && !ctx.implies(p, "OBJECT", "CONTROL");
        let why = match &p.on {
            Securable::Object { schema, name, .. } if references && ctx.is_fence_table(schema, name) => {
                references_why(&p.grantee, "a fence table")
            }
            Securable::Schema { schema } if references && schema.eq_ignore_ascii_case(fence) => {
                references_why(&p.grantee, "the fence schema")
            }
            Securable::Database if references && !ctx.services_reached_by(&p.grantee).is_empty() => {
                references_why(&p.grantee, "the whole database")
            }
            Securable::Database if !ctx.is_database_control(p) && !ctx.services_reached_by(&p.grantee).is_empty() => {
                match SERVICE_RIGHTS.iter().find(|(name, _)| ctx.implies(p, "DATABASE", name)) {
                    Some((name, why)) => format!("{why}{}", ctx.implied(p, name, "the database")),
                    None => continue,
                }
            }
            _ => continue,
        };
        report.findings.push(ctx.grant_finding(Rule::SideChannel, p, &why));
    }
    for m in ctx
        .catalog
        .memberships
        .iter()
        .filter(|m| m.role.eq_ignore_ascii_case("db_backupoperator"))
    {
        if ctx.services_reached_by(&m.member).is_empty() {
            continue;
        }
        report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::SideChannel,
            principal: Some(m.member.clone()),
            object: "ROLE::db_backupoperator".into(),
            permission: Some("member of db_backupoperator".into()),
            why: format!(
                "db_backupoperator may back up the database: the backup holds every fence row, owner ids \
                 included, outside the database's grants{}",
                ctx.reach_note(&m.member)
            ),
            fix: format!("ALTER ROLE [db_backupoperator] DROP MEMBER {};", quote_name(&m.member)),
        });
    }
    features(ctx, report);
}

fn references_why(grantee: &str, scope: &str) -> String {
    format!(
        "REFERENCES on {scope} lets {grantee} bind a foreign key or a security predicate to the fence rows: a \
         foreign key can block the procedures' deletes (PruneTenure), a predicate sees every owner id"
    )
}

fn features(ctx: &Context, report: &mut Report) {
    let Some(features) = &ctx.catalog.fence_table_features else {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::SideChannel,
            reason: if ctx.catalog.engine.chains_ownership {
                "history tables, change data capture, replication and security policies on the fence tables \
                 (sys.tables, sys.security_predicates) could not be read"
                    .into()
            } else {
                format!(
                    "{} has no security policy catalog (sys.security_predicates), and keeps row-level security, \
                     triggers and publications on the fence tables in PostgreSQL's catalog, which this check \
                     does not read",
                    ctx.catalog.engine.product
                )
            },
        });
        return;
    };
    let fence = &ctx.policy.fence_schema;
    for f in features {
        let target = f
            .table
            .split_once('.')
            .map_or(f.table.clone(), |(s, t)| quote_qualified(s, t));
        let (permission, why, fix) = match &f.feature {
            TableFeature::SystemVersioned { history } => {
                if history.split_once('.').is_some_and(|(s, t)| ctx.is_fence_table(s, t)) {
                    // A history table in the fence schema is one more fence table.
                    continue;
                }
                (
                    format!("system-versioned into {history}"),
                    format!(
                        "every old version of {}'s rows, owner ids included, is kept in {history}, outside the \
                         fence schema and its grants",
                        f.table
                    ),
                    format!(
                        "ALTER TABLE {target} SET (SYSTEM_VERSIONING = OFF); DROP TABLE {};",
                        history
                            .split_once('.')
                            .map_or(history.clone(), |(s, t)| quote_qualified(s, t))
                    ),
                )
            }
            TableFeature::ChangeDataCapture => (
                "change data capture".into(),
                format!(
                    "change data capture copies every change to {}, owner ids included, into a cdc change table \
                     outside the {fence} schema",
                    f.table
                ),
                format!(
                    "EXEC sys.sp_cdc_disable_table @source_schema = N'{}', @source_name = N'{}', @capture_instance = \
                     N'all';",
                    f.table.split_once('.').map_or("", |(s, _)| s),
                    f.table.split_once('.').map_or(f.table.as_str(), |(_, t)| t)
                ),
            ),
            TableFeature::Replicated => (
                "published for replication".into(),
                format!(
                    "{} is published: its rows, owner ids included, are copied to subscribers outside this \
                     database's grants",
                    f.table
                ),
                format!("drop {} from its publications (sp_droparticle)", f.table),
            ),
            TableFeature::SecurityPolicy { policy } => (
                format!("security policy {policy}"),
                format!(
                    "the security policy {policy} binds a predicate to {}: the predicate function sees every row and \
                     can hide or refuse the procedures' reads and writes",
                    f.table
                ),
                format!(
                    "DROP SECURITY POLICY {};",
                    policy
                        .split_once('.')
                        .map_or(policy.clone(), |(s, t)| quote_qualified(s, t))
                ),
            ),
        };
        report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::SideChannel,
            principal: None,
            object: f.table.clone(),
            permission: Some(permission),
            why,
            fix,
        });
    }
}
