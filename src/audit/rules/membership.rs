//! FP001, FP002 and the role half of FP004: memberships that hand a service
//! principal rights no grant on the fence shows.

use super::super::catalog::Membership;
use super::super::sqltext::quote;
use super::{Context, Finding, Report, Rule};
use crate::audit::CannotVerify;

/// Fixed database roles whose members can write any table or hand out the
/// right to.
const PRIVILEGED: [(&str, &str); 5] = [
    (
        "db_owner",
        "db_owner may do anything in the database, including UPDATE on the fence tables",
    ),
    (
        "db_datawriter",
        "db_datawriter may INSERT, UPDATE and DELETE every table, the fence tables included",
    ),
    (
        "db_ddladmin",
        "db_ddladmin may create or alter any module, so it can write code that updates the fence tables",
    ),
    (
        "db_securityadmin",
        "db_securityadmin may grant any permission, UPDATE on the fence tables included",
    ),
    (
        "db_accessadmin",
        "db_accessadmin may add users and logins to the database and so widen who reaches the fence",
    ),
];

pub(super) fn check(ctx: &Context, report: &mut Report) {
    for m in &ctx.catalog.memberships {
        let reached = ctx.services_reached_by(&m.member);
        if reached.is_empty() {
            continue;
        }
        if let Some((role, why)) = PRIVILEGED.iter().find(|(r, _)| r.eq_ignore_ascii_case(&m.role)) {
            report.findings.push(finding(ctx, Rule::PrivilegedRole, m, role, why));
        } else if m.role.eq_ignore_ascii_case("db_datareader") {
            let why = "db_datareader may SELECT every table: the fence tables show each holder's owner id, and \
                       owner plus generation is what a publish presents";
            report
                .findings
                .push(finding(ctx, Rule::ReadAccess, m, "db_datareader", why));
        }
    }
    server(ctx, report);
}

fn finding(ctx: &Context, rule: Rule, m: &Membership, role: &str, why: &str) -> Finding {
    Finding {
        rule,
        principal: Some(m.member.clone()),
        object: format!("ROLE::{role}"),
        permission: Some(format!("member of {role}")),
        why: format!("{why}{}", ctx.reach_note(&m.member)),
        fix: format!("ALTER ROLE {} DROP MEMBER {};", quote(role), quote(&m.member)),
    }
}

/// A login that is sysadmin or holds CONTROL SERVER is `dbo` in every
/// database, whatever the database's own catalog says about its user.
fn server(ctx: &Context, report: &mut Report) {
    let Some(server) = &ctx.catalog.server else {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::ServerControl,
            reason: "the server's role memberships and permissions are not visible to this login (it needs VIEW \
                     ANY DEFINITION or VIEW SERVER SECURITY STATE), so a service login in sysadmin cannot be \
                     ruled out"
                .into(),
        });
        return;
    };
    let mut unchecked = Vec::new();
    for service in ctx.service_principals() {
        let Some(login) = ctx.catalog.principal(service).and_then(|p| p.login.as_deref()) else {
            continue;
        };
        if server.permissions_unreadable.is_some() {
            unchecked.push(login.to_string());
        }
        // Server roles nest; every login is also in `public`.
        let mut holders = vec![login.to_string(), "public".to_string()];
        let mut i = 0;
        while i < holders.len() {
            let member = holders[i].clone();
            for m in server
                .role_members
                .iter()
                .filter(|m| m.member.eq_ignore_ascii_case(&member))
            {
                if !holders.iter().any(|h| h.eq_ignore_ascii_case(&m.role)) {
                    holders.push(m.role.clone());
                }
            }
            i += 1;
        }
        let via = |holder: &str| {
            if holder.eq_ignore_ascii_case(login) {
                String::new()
            } else {
                format!(" through {holder}")
            }
        };
        for holder in &holders {
            if holder.eq_ignore_ascii_case("sysadmin") {
                let direct = server
                    .role_members
                    .iter()
                    .find(|m| m.role.eq_ignore_ascii_case("sysadmin") && holders.contains(&m.member))
                    .map_or(login.to_string(), |m| m.member.clone());
                report.findings.push(Finding {
                    rule: Rule::ServerControl,
                    principal: Some(service.clone()),
                    object: format!("LOGIN::{login}"),
                    permission: Some(format!("member of sysadmin{}", via(&direct))),
                    why: "sysadmin is dbo in every database and skips every permission check, so it can update \
                          the fence tables directly"
                        .into(),
                    fix: format!("ALTER SERVER ROLE [sysadmin] DROP MEMBER {};", quote(&direct)),
                });
            }
        }
        for p in &server.permissions {
            if p.permission.eq_ignore_ascii_case("CONTROL SERVER")
                && holders.iter().any(|h| h.eq_ignore_ascii_case(&p.grantee))
            {
                report.findings.push(Finding {
                    rule: Rule::ServerControl,
                    principal: Some(service.clone()),
                    object: format!("LOGIN::{login}"),
                    permission: Some(format!("CONTROL SERVER{}", via(&p.grantee))),
                    why: "CONTROL SERVER passes every permission check in every database, so it can update the \
                          fence tables directly"
                        .into(),
                    fix: format!("REVOKE CONTROL SERVER FROM {};", quote(&p.grantee)),
                });
            }
        }
    }
    // Only service logins need the grants: with none, there is nothing to rule out.
    if let (Some(why), false) = (&server.permissions_unreadable, unchecked.is_empty()) {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::ServerControl,
            reason: format!(
                "{why}, so CONTROL SERVER held by service login{} {} cannot be ruled out",
                if unchecked.len() == 1 { "" } else { "s" },
                unchecked.join(", ")
            ),
        });
    }
}
