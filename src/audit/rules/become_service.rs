//! FP021: a principal outside the services that can make itself one. A
//! user in `db_datareader` already reads every holder's owner id; if it may
//! also act as a service, join a fence role or reshape one, it can publish as
//! any holder. Administrators (`dbo`, `db_owner`, CONTROL on the database)
//! can do anything by design and are not named; services doing it are
//! FP006's. ALTER ANY USER cannot change a user's login (that needs CONTROL
//! on the database) but can change a service's default schema: it is a way
//! in when its holder may also put code in some schema.

use super::super::catalog::{Permission, PrincipalKind, Securable};
use super::{Context, Finding, Report, Rule};
use crate::tsql::quote_name;

/// Rights on a principal that let the holder act as it or change it, held
/// or implied (CONTROL on it).
const ON_PRINCIPAL: [&str; 4] = ["IMPERSONATE", "ALTER", "CONTROL", "TAKE OWNERSHIP"];

/// Fixed roles whose members may add members to user-defined roles.
const ROLE_MANAGERS: [&str; 1] = ["db_securityadmin"];

pub(super) fn check(ctx: &Context, report: &mut Report) {
    let outsider = |name: &str| !ctx.is_service(name) && !ctx.is_admin(name) && !ctx.is_everyones(name);
    for p in ctx.grants().filter(|p| outsider(&p.grantee)) {
        let perm = p.permission.to_uppercase();
        let database = |wanted: &str| p.on == Securable::Database && ctx.implies(p, "DATABASE", wanted);
        // `ALTER ANY ROLE`, or `ALTER (it implies ALTER ANY ROLE on the database)`.
        let named = |wanted: &str| format!("{perm}{}", ctx.implied(p, wanted, "the database"));
        let why = match &p.on {
            Securable::Principal { name }
                if ctx.implies_any(p, &ctx.class_of(&p.on), &ON_PRINCIPAL).is_some() && ctx.is_service(name) =>
            {
                format!(
                    "{perm} on {name} lets {} act as or reshape {name}, a service principal, and so run the fence \
                     procedures as it",
                    p.grantee
                )
            }
            Securable::Database if database("ALTER ANY ROLE") => format!(
                "{} lets {} add itself to {}, and so become a service",
                named("ALTER ANY ROLE"),
                p.grantee,
                ctx.policy.service_roles.join(", ")
            ),
            // ALTER ANY USER is ALTER on every user: a service's default
            // schema is the holder's to set (its login, CONTROL on the
            // database). Pointed at a schema the holder puts code in, the
            // service's unqualified names run that code as the service.
            Securable::Database if database("ALTER ANY USER") => {
                let Some(service) = ctx.service_principals().next() else {
                    continue;
                };
                let Some(schema) = code_schema_of(ctx, &p.grantee) else {
                    continue;
                };
                format!(
                    "{} lets {} set a service's default schema (ALTER USER {} WITH DEFAULT_SCHEMA = \
                     {}) to {schema}, where it may put code: the service's unqualified names (EXEC Acquire) then \
                     resolve there and run that code as the service",
                    named("ALTER ANY USER"),
                    p.grantee,
                    quote_name(service),
                    quote_name(&schema)
                )
            }
            Securable::Database if database("ALTER ANY APPLICATION ROLE") && service_app_role(ctx) => {
                format!(
                    "{} lets {} set the password of an application role that is a service, and so enter it",
                    named("ALTER ANY APPLICATION ROLE"),
                    p.grantee
                )
            }
            _ => continue,
        };
        report.findings.push(ctx.grant_finding(Rule::BecomeService, p, &why));
    }
    for m in &ctx.catalog.memberships {
        if ROLE_MANAGERS.iter().any(|r| r.eq_ignore_ascii_case(&m.role)) && outsider(&m.member) {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: Rule::BecomeService,
                principal: Some(m.member.clone()),
                object: format!("ROLE::{}", m.role),
                permission: Some(format!("member of {}", m.role)),
                why: format!(
                    "{} may add members to every user-defined role, the fence roles included, and so make {} a \
                     service",
                    m.role, m.member
                ),
                fix: format!(
                    "ALTER ROLE {} DROP MEMBER {};",
                    quote_name(&m.role),
                    quote_name(&m.member)
                ),
            });
        }
    }
    // A role's owner may add and drop its members.
    for role in ctx.catalog.principals.iter().filter(|p| p.kind == PrincipalKind::Role) {
        let Some(owner) = role.owner.as_deref() else { continue };
        if !ctx.is_service(&role.name) || ctx.is_admin(owner) {
            continue;
        }
        report.findings.push(Finding {
            path: Vec::new(),
            rule: Rule::BecomeService,
            principal: Some(owner.to_string()),
            object: format!("ROLE::{}", role.name),
            permission: Some("owner".into()),
            why: format!(
                "{owner} owns {}, a role of service principals, and so may add itself or anyone to it",
                role.name
            ),
            fix: format!("ALTER AUTHORIZATION ON ROLE::{} TO [dbo];", quote_name(&role.name)),
        });
    }
}

/// A schema, outside the shipped ones, where `principal` may put code a
/// service's unqualified name would run: one it (or a role it is in) owns or
/// holds ALTER or CONTROL on, or any with ALTER ANY SCHEMA, when it may also
/// create modules there (CREATE PROCEDURE, FUNCTION, VIEW or SYNONYM) or the
/// schema already holds modules, which ALTER on the schema lets it rewrite.
fn code_schema_of(ctx: &Context, principal: &str) -> Option<String> {
    let holders = ctx.holders(principal);
    let shipped = |s: &str| {
        s.eq_ignore_ascii_case(&ctx.policy.fence_schema)
            || ctx.policy.code_schemas.iter().any(|c| c.eq_ignore_ascii_case(s))
    };
    let held = |g: &&Permission| holders.contains(&g.grantee.to_lowercase());
    let creates = ctx.grants().filter(held).any(|g| {
        g.on == Securable::Database
            && ctx
                .implies_any(
                    g,
                    "DATABASE",
                    &["CREATE PROCEDURE", "CREATE FUNCTION", "CREATE VIEW", "CREATE SYNONYM"],
                )
                .is_some()
    });
    let usable = |schema: &str| {
        !shipped(schema)
            && (creates
                || ctx
                    .catalog
                    .objects
                    .iter()
                    .any(|o| o.kind.is_module() && o.schema.eq_ignore_ascii_case(schema)))
    };
    let any_schema = ctx
        .grants()
        .filter(held)
        .any(|g| g.on == Securable::Database && ctx.implies(g, "SCHEMA", "ALTER"));
    ctx.catalog
        .schemas
        .iter()
        .filter(|s| usable(&s.name))
        .find(|s| {
            any_schema
                || holders.contains(&s.owner.to_lowercase())
                || ctx.grants().filter(held).any(|g| {
                    matches!(&g.on, Securable::Schema { schema } if schema.eq_ignore_ascii_case(&s.name))
                        && ctx.implies(g, "SCHEMA", "ALTER")
                })
        })
        .map(|s| s.name.clone())
}

fn service_app_role(ctx: &Context) -> bool {
    ctx.catalog
        .principals
        .iter()
        .any(|p| p.kind == PrincipalKind::ApplicationRole && ctx.is_service(&p.name))
}
