//! FP005 and FP006: rights that do not touch the fence tables but let a
//! principal write code that does, or become someone who can.

use super::super::catalog::Securable;
use super::{Context, Finding, Report, Rule};
use crate::tsql::{quote_name, quote_qualified};

/// Database permissions that add code: modules, and code that runs on every
/// DDL statement (a DDL trigger fires as the deployer during `fencepost
/// migrate`) or outside T-SQL (assemblies).
const CREATE_CODE: [&str; 4] = [
    "ALTER ANY SCHEMA",
    "ALTER ANY DATABASE DDL TRIGGER",
    "ALTER ANY ASSEMBLY",
    "CREATE ASSEMBLY",
];
/// Rights to create modules, which land in a schema the creator may alter
/// and are owned by that schema's owner: they chain to the fence only from a
/// schema the fence tables' owner owns.
const CREATE_MODULE: [&str; 3] = ["CREATE PROCEDURE", "CREATE VIEW", "CREATE FUNCTION"];
/// Changing a schema or an object is ALTER on it, held or implied (CONTROL,
/// ALTER ANY SCHEMA). TAKE OWNERSHIP is not: taking an object breaks its
/// chain to the fence tables (a schema's objects owned by the fence tables'
/// owner are FP020's).
const CHANGE: &str = "ALTER";
const MANAGE_PRINCIPALS: [&str; 3] = ["ALTER ANY USER", "ALTER ANY ROLE", "ALTER ANY APPLICATION ROLE"];
/// Rights on a principal, by class: acting as it, or reshaping it.
const ON_PRINCIPAL: [&str; 4] = ["IMPERSONATE", "ALTER", "CONTROL", "TAKE OWNERSHIP"];

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let tables_owner = ctx.tables_owner();
    for p in ctx.grants() {
        // CONTROL of the database is every right in it: FP003 names it.
        if ctx.is_database_control(p) {
            continue;
        }
        let serves = !ctx.services_reached_by(&p.grantee).is_empty();
        let perm = p.permission.to_uppercase();
        // ALTER on what the fence tables' owner owns is a path to the fence
        // for anyone, as UPDATE on the fence is; administrators hold it by design.
        let outsider = serves || !ctx.is_admin(&p.grantee);
        let changes = |class: &str| ctx.implies(p, class, CHANGE);
        // Managing principals comes with ALTER on the database besides the
        // code it adds: a grant may be both.
        if let (Securable::Database, true, Some(wanted)) =
            (&p.on, serves, ctx.implies_any(p, "DATABASE", &MANAGE_PRINCIPALS))
        {
            let why = format!(
                "{perm}{} lets {} create or change principals and memberships, and so hand out rights on the fence",
                ctx.implied(p, wanted, "the database"),
                p.grantee
            );
            report.findings.push(ctx.grant_finding(Rule::PrincipalControl, p, &why));
        }
        let (rule, why) = match &p.on {
            Securable::Database if serves && ctx.implies_any(p, "DATABASE", &CREATE_MODULE).is_some() => {
                let Some(schemas) = creatable_chained_schemas(ctx, &p.grantee) else {
                    continue;
                };
                (
                    Rule::CodeChange,
                    format!(
                        "{perm} lets {} add code to {schemas}, which the fence tables' owner owns: that code \
                         reaches the fence tables through ownership chaining",
                        p.grantee
                    ),
                )
            }
            Securable::Database if serves && ctx.implies_any(p, "DATABASE", &CREATE_CODE).is_some() => {
                let wanted = ctx.implies_any(p, "DATABASE", &CREATE_CODE).unwrap_or_default();
                (
                    Rule::CodeChange,
                    format!(
                        "{perm}{} lets {} add code; code owned by the tables' owner reaches the fence tables through ownership chaining",
                        ctx.implied(p, wanted, "the database"),
                        p.grantee
                    ),
                )
            }
            // ALTER on every schema (ALTER ANY SCHEMA, ALTER on the database)
            // is ALTER on the shipped procedures' schemas.
            Securable::Database if outsider && changes("SCHEMA") && !ctx.policy.code_schemas.is_empty() => (
                Rule::CodeChange,
                format!(
                    "{perm} on the database is ALTER on every schema, {} included: it lets {} alter or add \
                     procedures there that run with the tables' owner's rights",
                    ctx.policy.code_schemas.join(" and "),
                    p.grantee
                ),
            ),
            Securable::Schema { schema }
                if changes("SCHEMA") && ctx.policy.code_schemas.iter().any(|s| s.eq_ignore_ascii_case(schema)) =>
            {
                (
                    Rule::CodeChange,
                    format!(
                        "{perm} on {schema} lets {} alter or add procedures that run with the tables' owner's rights",
                        p.grantee
                    ),
                )
            }
            // Any schema owned by the fence tables' owner: a procedure created
            // there chains ownership straight to the fence tables.
            Securable::Schema { schema }
                if outsider
                    && changes("SCHEMA")
                    && !schema.eq_ignore_ascii_case(&ctx.policy.fence_schema)
                    && tables_owner.is_some_and(|o| {
                        ctx.catalog
                            .schema_owner(schema)
                            .is_some_and(|s| s.eq_ignore_ascii_case(o))
                    }) =>
            {
                (
                    Rule::CodeChange,
                    format!(
                        "{perm} on {schema}, which the fence tables' owner owns, lets {} create procedures there that chain ownership to the fence tables",
                        p.grantee
                    ),
                )
            }
            Securable::Object { schema, name, .. }
                if changes("OBJECT") && ctx.policy.procedure(&format!("{schema}.{name}")).is_some() =>
            {
                (
                    Rule::CodeChange,
                    format!(
                        "{perm} on a shipped procedure lets {} rewrite it to update the fence tables unconditionally",
                        p.grantee
                    ),
                )
            }
            // Any object the fence tables' owner owns: ALTER on a table lets
            // its holder add a trigger (the TRUNCATE idiom grants it), ALTER
            // on a module lets it rewrite it, and either runs as that owner,
            // chaining to the fence tables.
            Securable::Object { schema, name, .. }
                if outsider
                    && changes("OBJECT")
                    && !ctx.is_fence_table(schema, name)
                    && tables_owner
                        .is_some_and(|o| owner_of(ctx, schema, name).is_some_and(|x| x.eq_ignore_ascii_case(o))) =>
            {
                (
                    Rule::CodeChange,
                    format!(
                        "{perm} on {schema}.{name}, which the fence tables' owner owns, lets {} add a trigger to \
                         it or rewrite it, and that code runs as the owner and chains to the fence tables",
                        p.grantee
                    ),
                )
            }
            Securable::Principal { name }
                if serves && ctx.implies_any(p, &ctx.class_of(&p.on), &ON_PRINCIPAL).is_some() =>
            {
                (
                    Rule::PrincipalControl,
                    format!(
                        "{perm} on {name} lets {} act as or reshape {name}, and so use every right {name} has",
                        p.grantee
                    ),
                )
            }
            _ => continue,
        };
        report.findings.push(ctx.grant_finding(rule, p, &why));
    }
    code_owners(ctx, report);
}

/// The schemas owned by the fence tables' owner that `principal` may create
/// objects in (ALTER or CONTROL on them, itself or through a role), or
/// `None`: then what it creates belongs to another owner and breaks the chain.
fn creatable_chained_schemas(ctx: &Context, principal: &str) -> Option<String> {
    let owner = ctx.tables_owner()?;
    let holders = ctx.holders(principal);
    let any_schema = ctx.grants().any(|p| {
        p.on == Securable::Database && ctx.implies(p, "SCHEMA", CHANGE) && holders.contains(&p.grantee.to_lowercase())
    });
    let schemas: Vec<&str> = ctx
        .catalog
        .schemas
        .iter()
        .filter(|s| s.owner.eq_ignore_ascii_case(owner))
        .filter(|s| {
            any_schema
                || ctx.grants().any(|p| {
                    ctx.implies(p, "SCHEMA", CHANGE)
                        && holders.contains(&p.grantee.to_lowercase())
                        && matches!(&p.on, Securable::Schema { schema } if schema.eq_ignore_ascii_case(&s.name))
                })
        })
        .map(|s| s.name.as_str())
        .collect();
    (!schemas.is_empty()).then(|| schemas.join(", "))
}

/// The owner of `schema.name`: the object's own, else its schema's (also for
/// objects the snapshot does not list, such as sequences or queues).
fn owner_of<'a>(ctx: &Context<'a>, schema: &str, name: &str) -> Option<&'a str> {
    match ctx.catalog.object(&format!("{schema}.{name}")) {
        Some(o) => ctx.catalog.owner_of(o),
        None => ctx.catalog.schema_owner(schema),
    }
}

/// Owning a code schema or a shipped procedure is ALTER on it.
fn code_owners(ctx: &Context, report: &mut Report) {
    for schema in &ctx.policy.code_schemas {
        let Some(owner) = ctx.catalog.schema_owner(schema) else {
            continue;
        };
        if ctx.owner_is_service(owner) {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::CodeChange,
                principal: Some(owner.to_string()),
                object: format!("SCHEMA::{schema}"),
                permission: Some("owner".into()),
                why: format!(
                    "{owner} owns {schema} and so may alter the shipped procedures in it{}",
                    ctx.reach_note(owner)
                ),
                fix: format!("ALTER AUTHORIZATION ON SCHEMA::{} TO [dbo];", quote_name(schema)),
            });
        }
    }
    for proc in ctx.catalog.objects.iter().filter(|o| ctx.is_shipped(o)) {
        let Some(owner) = proc.owner.as_deref() else {
            continue;
        };
        if ctx.owner_is_service(owner) {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::CodeChange,
                principal: Some(owner.to_string()),
                object: proc.qualified_name(),
                permission: Some("owner".into()),
                why: format!(
                    "{owner} owns a shipped procedure and so may rewrite it{}",
                    ctx.reach_note(owner)
                ),
                fix: format!(
                    "ALTER AUTHORIZATION ON OBJECT::{} TO SCHEMA OWNER;",
                    quote_qualified(&proc.schema, &proc.name)
                ),
            });
        }
    }
}
