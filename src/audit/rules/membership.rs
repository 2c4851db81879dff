//! FP001 and the role half of FP004: memberships that hand a service
//! principal rights no grant on the fence shows.

use super::super::catalog::{Membership, PrincipalKind};
use super::{CannotVerify, Context, Finding, Report, Rule};
use crate::tsql::quote_name;

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
    let mut unknown = Vec::new();
    for m in &ctx.catalog.memberships {
        // dbo is always in db_owner and cannot leave it (error 15405); a
        // service that enters as dbo is FP015's.
        if m.member.eq_ignore_ascii_case("dbo") {
            continue;
        }
        let privileged = PRIVILEGED.iter().find(|(r, _)| r.eq_ignore_ascii_case(&m.role));
        let reader = m.role.eq_ignore_ascii_case("db_datareader");
        if ctx.services_reached_by(&m.member).is_empty() {
            if privileged.is_some() && ctx.permissions_hidden.is_some() {
                unknown.push(format!("{} (in {})", m.member, m.role));
            }
            continue;
        }
        if let Some((role, why)) = privileged {
            report.findings.push(finding(ctx, Rule::PrivilegedRole, m, role, why));
        } else if reader {
            let why = "db_datareader may SELECT every table: the fence tables show each holder's owner id, and \
                       owner plus generation is what a publish presents";
            report
                .findings
                .push(finding(ctx, Rule::ReadAccess, m, "db_datareader", why));
        }
    }
    if !unknown.is_empty() {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::PrivilegedRole,
            reason: format!(
                "whoever may execute a fence procedure is a service, and without the permission catalog that \
                 cannot be told of {}",
                unknown.join(", ")
            ),
        });
    }
    for reason in group_blindness(ctx)
        .into_iter()
        .chain(super::groups::database_groups(ctx))
    {
        report.cannot_verify.push(CannotVerify {
            rule: Rule::PrivilegedRole,
            reason,
        });
    }
}

/// Why a service's own privileges cannot all be seen, if so: a Windows or
/// Entra group's members may hold db_owner or sysadmin through other groups,
/// and no catalog view links a member to its groups.
pub(super) fn group_blindness(ctx: &Context) -> Option<String> {
    let groups: Vec<&str> = ctx
        .service_principals()
        .filter_map(|s| ctx.principal(s))
        .filter(|p| p.kind == PrincipalKind::Group)
        .map(|p| p.name.as_str())
        .collect();
    (!groups.is_empty()).then(|| {
        format!(
            "service principal{} {} {} a Windows or Microsoft Entra group: its members may hold privileged \
             roles through other groups, which the catalog does not link to them; grant the fence roles to the \
             services' own logins instead",
            if groups.len() == 1 { "" } else { "s" },
            groups.join(", "),
            if groups.len() == 1 { "is" } else { "are" }
        )
    })
}

fn finding(ctx: &Context, rule: Rule, m: &Membership, role: &str, why: &str) -> Finding {
    Finding {
        path: Vec::new(),
        rule,
        principal: Some(m.member.clone()),
        object: format!("ROLE::{role}"),
        permission: Some(format!("member of {role}")),
        why: format!("{why}{}", ctx.reach_note(&m.member)),
        fix: format!("ALTER ROLE {} DROP MEMBER {};", quote_name(role), quote_name(&m.member)),
    }
}
