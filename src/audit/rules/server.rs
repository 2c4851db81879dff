//! FP002 and FP016: server roles and server permissions of the logins behind
//! service principals. A login's server rights reach into every database,
//! whatever the database's own catalog says about its user.

use super::membership::group_blindness;
use super::server_rights::privileges;
use super::{CannotVerify, Context, Finding, Report, Rule};

pub(super) fn check(ctx: &Context, report: &mut Report) {
    if ctx.catalog.engine.azure_database {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::ServerControl,
            reason: format!(
                "{} has no sysadmin and no CONTROL SERVER to look at: the logins with server-wide rights there \
                 are its admins, who enter as dbo (FP015), and the members of master's dbmanager and \
                 loginmanager and of the ##MS_DatabaseManager## and ##MS_LoginManager## server roles, which \
                 live in master and which no query in this database can read (a login manager resets a \
                 login's password and acts as it)",
                ctx.catalog.engine.product
            ),
        });
    }
    let Some(server) = &ctx.catalog.server else {
        for rule in [Rule::ServerControl, Rule::ServerPrivilege] {
            report.cannot_verify.push(CannotVerify {
                rule,
                reason: "the server's role memberships and permissions are not visible to this login (it needs \
                         VIEW ANY DEFINITION, or to be sysadmin), so a service login's server rights cannot be \
                         ruled out"
                    .into(),
            });
        }
        return;
    };
    let mut unchecked = Vec::new();
    let mut unknown = Vec::new();
    for p in &ctx.catalog.principals {
        let Some(login) = p.login.as_deref() else { continue };
        let service = ctx.is_service(&p.name);
        if !service {
            // Without the permission catalog, any user may be a service;
            // dbo is not one unless named (FP015).
            if ctx.permissions_hidden.is_some() && !p.name.eq_ignore_ascii_case("dbo") {
                let rights = privileges(server, login);
                if !rights.is_empty() {
                    unknown.push(format!("{} (login {login}: {})", p.name, rights[0].path));
                }
            }
            continue;
        }
        if server.permissions_unreadable.is_some() {
            unchecked.push(login.to_string());
        }
        for right in privileges(server, login) {
            report.findings.push(Finding {
                path: Vec::new(),
                rule: right.rule,
                principal: Some(p.name.clone()),
                object: format!("LOGIN::{login}"),
                permission: Some(right.path),
                why: right.why,
                fix: right.fix,
            });
        }
        report
            .findings
            .extend(super::server_reach::findings(ctx, server, &p.name, login));
    }
    unchecked.sort();
    // Only service logins need the grants: with none, there is nothing to rule out.
    if let (Some(why), false) = (&server.permissions_unreadable, unchecked.is_empty()) {
        for (rule, what) in [
            (Rule::ServerControl, "CONTROL SERVER"),
            (Rule::ServerPrivilege, "server permissions"),
        ] {
            report.cannot_verify.push(CannotVerify {
                rule,
                reason: format!(
                    "{why}, so {what} held by service login{} {} cannot be ruled out",
                    if unchecked.len() == 1 { "" } else { "s" },
                    unchecked.join(", ")
                ),
            });
        }
    }
    if !unknown.is_empty() {
        for rule in [Rule::ServerControl, Rule::ServerPrivilege] {
            report.cannot_verify.push(CannotVerify {
                rule,
                reason: format!(
                    "whoever may execute a fence procedure is a service, and without the permission catalog that \
                     cannot be told of {}",
                    unknown.join(", ")
                ),
            });
        }
    }
    for reason in group_blindness(ctx)
        .into_iter()
        .chain(super::groups::server_groups(ctx, server))
    {
        for rule in [Rule::ServerControl, Rule::ServerPrivilege] {
            report.cannot_verify.push(CannotVerify {
                rule,
                reason: reason.clone(),
            });
        }
    }
}
