//! The rules as one pure function from a catalog snapshot and a policy to a
//! report. Each file holds the rules about one kind of path to the fence.

mod agent_jobs;
mod become_service;
mod context;
mod database;
mod dbo;
mod escalation;
mod execute;
mod grant_option;
mod grants;
mod groups;
mod identity;
mod indirect_code;
mod keys;
mod linked_servers;
mod membership;
mod modules;
mod outside;
mod queue_activation;
mod reach;
mod rightless;
mod runs_as;
mod schema_code;
mod server;
mod server_reach;
mod server_rights;
mod shipped;
mod side_channels;
mod trustworthy;
mod visibility;
mod wrappers;

pub(crate) use context::Context;
pub(crate) use server_rights::{holders as server_holders, is_server_role};
pub(crate) use wrappers::granted_contained as wrapper_granted_contained;

use super::catalog::Catalog;
use super::{CannotVerify, Finding, Policy, Report, Rule};

/// Applies every live rule to `catalog`. Pure: the same snapshot always gives
/// the same report, so each rule is tested with fixture catalogs.
pub fn evaluate(catalog: &Catalog, policy: &Policy) -> Report {
    let mut ctx = Context::new(catalog, policy);
    ctx.permissions_hidden = visibility::permissions_hidden(&ctx);
    let mut report = Report {
        target: catalog.database.clone(),
        rules_checked: Rule::LIVE.to_vec(),
        ..Report::default()
    };
    membership::check(&ctx, &mut report);
    server::check(&ctx, &mut report);
    grants::check(&ctx, &mut report);
    escalation::check(&ctx, &mut report);
    execute::check(&ctx, &mut report);
    modules::check(&ctx, &mut report);
    shipped::check(&ctx, &mut report);
    runs_as::check(&ctx, &mut report);
    database::check(&ctx, &mut report);
    dbo::check(&ctx, &mut report);
    trustworthy::check(&ctx, &mut report);
    identity::check(&ctx, &mut report);
    schema_code::check(&ctx, &mut report);
    become_service::check(&ctx, &mut report);
    indirect_code::check(&ctx, &mut report);
    side_channels::check(&ctx, &mut report);
    grant_option::check(&ctx, &mut report);
    keys::check(&ctx, &mut report);
    agent_jobs::check(&ctx, &mut report);
    linked_servers::check(&ctx, &mut report);
    queue_activation::check(&ctx, &mut report);
    outside::check(&ctx, &mut report);
    // Last: it adds its paths to the findings above that name the same
    // principal.
    reach::check(&ctx, &mut report);
    if let Some(reason) = &ctx.permissions_hidden {
        for rule in PERMISSION_RULES {
            report.cannot_verify.push(CannotVerify {
                rule,
                reason: reason.clone(),
            });
        }
    }
    // A partial view leaves every rule unproven, whatever it did find.
    for reason in visibility::blind(&ctx) {
        for rule in Rule::LIVE {
            report.cannot_verify.push(CannotVerify {
                rule,
                reason: reason.clone(),
            });
        }
    }
    report.normalize()
}

/// The rules that read `sys.database_permissions`.
const PERMISSION_RULES: [Rule; 10] = [
    Rule::WriteAccess,
    Rule::ReadAccess,
    Rule::CodeChange,
    Rule::PrincipalControl,
    Rule::ExecuteBeyondRole,
    Rule::GuestConnect,
    Rule::SchemaCode,
    Rule::BecomeService,
    Rule::SideChannel,
    Rule::ReachesFence,
];

/// Whether `module`'s text names `schema.name`.
pub(crate) fn module_text_names(catalog: &Catalog, module: &super::catalog::Object, schema: &str, name: &str) -> bool {
    module_text_naming(catalog, module, schema, name).is_some()
}

/// How a module's text names an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Naming {
    /// By two or three parts, or by one part where SQL Server resolves it in
    /// the module's own schema or, when that schema has no object of the
    /// name, in dbo.
    AsItIs,
    /// By a one-part EXECUTE, which resolves in the caller's default schema
    /// first ("Qualifying Names Inside Stored Procedures"), a schema every
    /// user may set for itself ("ALTER USER"): so in any schema.
    CallersSchema,
}

/// How `module`'s text names `schema.name`, if it does.
pub(crate) fn module_text_naming(
    catalog: &Catalog,
    module: &super::catalog::Object,
    schema: &str,
    name: &str,
) -> Option<Naming> {
    use super::module_text::{ddl_unqualified, executed_unqualified, names_unqualified, referenced_tables, same_name};
    let d = module.definition.as_deref()?;
    let one_part_here = module.schema.eq_ignore_ascii_case(schema)
        || schema.eq_ignore_ascii_case("dbo") && catalog.object(&format!("{}.{name}", module.schema)).is_none();
    let ddl_here = || {
        ddl_schema(catalog, module).is_some_and(|s| {
            s.eq_ignore_ascii_case(schema)
                || schema.eq_ignore_ascii_case("dbo") && catalog.object(&format!("{s}.{name}")).is_none()
        }) && ddl_unqualified(d, &catalog.database).iter().any(|t| same_name(t, name))
    };
    if !referenced_tables(d, schema, [&name.to_string()]).is_empty()
        || one_part_here && names_unqualified(d, name)
        || ddl_here()
    {
        Some(Naming::AsItIs)
    } else if executed_unqualified(d).iter().any(|e| same_name(e, name)) {
        Some(Naming::CallersSchema)
    } else {
        None
    }
}

/// The schema a DDL statement's one-part name in `module` resolves in
/// first: the default schema of the user it runs as (`WITH EXECUTE AS`),
/// dbo when that user has none. `None` for a module that runs as its
/// caller: DDL is checked against the caller's own rights there (ownership
/// chaining covers no DDL), so it lends no one anything.
fn ddl_schema(catalog: &Catalog, module: &super::catalog::Object) -> Option<String> {
    let user = match module.runs_as()? {
        super::catalog::ExecuteAs::Owner => catalog.owner_of(module).unwrap_or("dbo"),
        super::catalog::ExecuteAs::Principal(p) => p,
    };
    let schema = catalog.principal(user).and_then(|p| p.default_schema.clone());
    Some(schema.unwrap_or_else(|| "dbo".into()))
}

/// Compares catalog permission names, which are upper case on SQL Server.
pub(crate) fn is_one_of(permission: &str, names: &[&str]) -> bool {
    names.iter().any(|n| n.eq_ignore_ascii_case(permission))
}
