//! Windows and Microsoft Entra groups the other way round: a service that
//! signs in with its own Windows (or Entra) login carries the rights of every
//! group that login is in, and no catalog view lists a login's groups
//! (`sys.login_token` shows them for the checking login only). So when a
//! group holds a privileged role or right, whether a service is in it cannot
//! be told: FP001 and FP002/FP016 cannot verify, naming both.

use super::super::catalog::{PrincipalKind, ServerFacts};
use super::server_rights::{is_privileged, privileges};
use super::{Context, is_one_of};

/// Database roles whose members reach the fence or its rows.
const REACHING_ROLES: [&str; 7] = [
    "db_owner",
    "db_datawriter",
    "db_datareader",
    "db_ddladmin",
    "db_securityadmin",
    "db_accessadmin",
    "db_backupoperator",
];

/// The service principals that sign in with a Windows or Entra login of
/// their own, as `name (login)`.
fn group_carrying_services(ctx: &Context) -> Vec<String> {
    ctx.service_principals()
        .filter_map(|s| ctx.principal(s))
        .filter(|p| p.login_kind.is_some_and(|k| k.carries_groups()))
        .map(|p| format!("{} (login {})", p.name, p.login.as_deref().unwrap_or("?")))
        .collect()
}

pub(super) fn database_groups(ctx: &Context) -> Option<String> {
    let services = group_carrying_services(ctx);
    if services.is_empty() {
        return None;
    }
    let groups: Vec<String> = ctx
        .catalog
        .principals
        .iter()
        .filter(|p| p.kind == PrincipalKind::Group && !ctx.is_service(&p.name))
        .filter_map(|g| {
            let roles = ctx.roles_of(&g.name);
            let role = REACHING_ROLES.iter().find(|r| roles.contains(**r));
            let grant = ctx.grants().find(|p| {
                p.grantee.eq_ignore_ascii_case(&g.name) && !is_one_of(&p.permission, &["CONNECT", "SHOWPLAN"])
            });
            match (role, grant) {
                (Some(r), _) => Some(format!("{} (in {r})", g.name)),
                (None, Some(p)) => Some(format!("{} ({} on {})", g.name, p.permission, ctx.describe(&p.on))),
                _ => None,
            }
        })
        .collect();
    (!groups.is_empty()).then(|| {
        format!(
            "service principal{} {} sign{} in with a Windows or Microsoft Entra login, which carries the rights of \
             every group it is in, and the group user{} {} hold{} privileged rights here: no catalog view says \
             whether the service is a member (ask the domain: xp_logininfo N'<group>', 'members')",
            plural(services.len()),
            services.join(", "),
            if services.len() == 1 { "s" } else { "" },
            plural(groups.len()),
            groups.join(", "),
            if groups.len() == 1 { "s" } else { "" },
        )
    })
}

pub(super) fn server_groups(ctx: &Context, server: &ServerFacts) -> Option<String> {
    let services = group_carrying_services(ctx);
    if services.is_empty() {
        return None;
    }
    let groups: Vec<String> = server
        .group_logins
        .iter()
        .filter_map(|g| {
            if is_privileged(server, g) {
                Some(format!("{g} (sysadmin or as good as)"))
            } else {
                privileges(server, g).first().map(|p| format!("{g} ({})", p.path))
            }
        })
        .collect();
    (!groups.is_empty()).then(|| {
        format!(
            "service login{} {} {} Windows or Microsoft Entra login{} carrying the rights of every group {} in, \
             and the group login{} {} hold{} server rights that reach the fence: no catalog view says whether the \
             service is a member (ask the domain: xp_logininfo N'<group>', 'members')",
            plural(services.len()),
            services.join(", "),
            if services.len() == 1 { "is a" } else { "are" },
            plural(services.len()),
            if services.len() == 1 { "it is" } else { "they are" },
            plural(groups.len()),
            groups.join(", "),
            if groups.len() == 1 { "s" } else { "" },
        )
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
