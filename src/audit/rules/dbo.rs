//! FP015: a service that enters the database as `dbo`. The database owner's
//! login, every sysadmin, and on Azure SQL Database the server admin and the
//! Microsoft Entra admin are all `dbo` here, and `dbo` passes every
//! permission check: the fence means nothing to it.

use super::{CannotVerify, Context, Finding, Report, Rule};
use crate::tsql::quote_name;

pub(super) fn check(ctx: &Context, report: &mut Report) {
    if ctx.catalog.engine.azure_database {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::ServiceIsDbo,
            reason: format!(
                "on {} the server admin and the Microsoft Entra admin enter every database as dbo, and a \
                 database's catalog does not name them, so a service using one of them cannot be ruled out \
                 (fencepost::Client refuses to start as dbo unless told to)",
                ctx.catalog.engine.product
            ),
        });
    }
    if !ctx.service_principals().any(|s| s.eq_ignore_ascii_case("dbo")) {
        return;
    }
    let owner = ctx.catalog.owner_login();
    // The name the service was given as, when it was a login: the one to fix.
    let named = ctx
        .policy
        .principals
        .iter()
        .find(|n| !n.eq_ignore_ascii_case("dbo") && owner.is_some_and(|o| o.eq_ignore_ascii_case(n)));
    let db = quote_name(&ctx.catalog.database);
    let role = quote_name(ctx.policy.service_roles.first().map_or("fence_service", String::as_str));
    let (permission, fix) = match named {
        Some(login) if !login.eq_ignore_ascii_case("sa") => (
            format!("login {login} owns the database"),
            format!(
                "ALTER AUTHORIZATION ON DATABASE::{db} TO [sa]; CREATE USER {l} FOR LOGIN {l}; ALTER ROLE \
                 {role} ADD MEMBER {l};",
                l = quote_name(login)
            ),
        ),
        _ => (
            match owner {
                Some(login) => format!("enters as dbo (the database owner is login {login})"),
                None => "enters as dbo".to_string(),
            },
            format!(
                "connect the service with a login of its own and a user in {role}: CREATE USER [service] FOR \
                 LOGIN [service]; ALTER ROLE {role} ADD MEMBER [service];"
            ),
        ),
    };
    report.findings.push(Finding {
        path: Vec::new(),
        rule: Rule::ServiceIsDbo,
        principal: Some(named.cloned().unwrap_or_else(|| "dbo".into())),
        object: "USER::dbo".into(),
        permission: Some(permission),
        why: "dbo passes every permission check in the database, so a service that enters as dbo can update the \
              fence tables directly, outside the procedures' checks of owner, generation and expiry"
            .into(),
        fix,
    });
}
