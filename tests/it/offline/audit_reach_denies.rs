//! Server-level DENYs cut the edges SQL Server's documentation says they cut
//! ("DENY Server Permissions", "DENY Server Principal Permissions"): the
//! denied permission and what it covers, for the principal denied and the
//! members of a denied role, never for sysadmin; a DENY on one login cuts
//! rights on that login only.

use crate::support;

use fencepost::audit::{Catalog, Finding, Rule, ServerFacts, ServerPermission};
use support::fixtures::*;

fn server(c: &mut Catalog) -> &mut ServerFacts {
    c.server.as_mut().unwrap()
}

fn deny(grantee: &str, permission: &str, on_login: Option<&str>) -> ServerPermission {
    ServerPermission {
        on_login: on_login.map(String::from),
        ..server_grant(grantee, permission)
    }
}

fn on_login(grantee: &str, permission: &str, login: &str) -> ServerPermission {
    ServerPermission {
        on_login: Some(login.into()),
        ..server_grant(grantee, permission)
    }
}

/// The FP027 findings naming `principal`.
fn named(c: &Catalog, principal: &str) -> Vec<Finding> {
    check(c)
        .findings
        .into_iter()
        .filter(|f| f.rule == Rule::ReachesFence && f.principal.as_deref() == Some(principal))
        .collect()
}

/// An ETL user in db_datawriter, behind a SQL login of its own.
fn etl(c: &mut Catalog) {
    c.principals.push(user("etl", Some("etl")));
    c.memberships.push(member("db_datawriter", "etl"));
}

#[test]
fn a_deny_of_the_granted_permission_cuts_its_edge() {
    let mut c = clean();
    server(&mut c)
        .permissions
        .push(server_grant("monitor", "IMPERSONATE ANY LOGIN"));
    assert!(!named(&c, "login monitor").is_empty(), "the grant alone reaches");
    server(&mut c)
        .denies
        .push(deny("monitor", "IMPERSONATE ANY LOGIN", None));
    let report = check(&c);
    assert!(named(&c, "login monitor").is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn a_deny_of_a_covering_permission_cuts_what_it_covers() {
    // DENY CONTROL SERVER denies every server permission it covers.
    let mut c = clean();
    etl(&mut c);
    server(&mut c)
        .permissions
        .push(server_grant("helpdesk", "ALTER ANY LOGIN"));
    assert!(!named(&c, "login helpdesk").is_empty());
    server(&mut c).denies.push(deny("helpdesk", "CONTROL SERVER", None));
    assert!(named(&c, "login helpdesk").is_empty(), "{:#?}", check(&c));
}

#[test]
fn a_deny_to_a_server_role_binds_its_members_grants() {
    let mut c = clean();
    server(&mut c)
        .permissions
        .push(server_grant("monitor", "IMPERSONATE ANY LOGIN"));
    server(&mut c).roles.push("monitoring".into());
    server(&mut c).role_members.push(member("monitoring", "monitor"));
    server(&mut c)
        .denies
        .push(deny("monitoring", "IMPERSONATE ANY LOGIN", None));
    assert!(named(&c, "login monitor").is_empty(), "{:#?}", check(&c));
    // DENY to public binds every login.
    let mut c = clean();
    server(&mut c)
        .permissions
        .push(server_grant("monitor", "IMPERSONATE ANY LOGIN"));
    server(&mut c)
        .denies
        .push(deny("public", "IMPERSONATE ANY LOGIN", None));
    assert!(named(&c, "login monitor").is_empty(), "{:#?}", check(&c));
}

#[test]
fn a_deny_on_one_login_cuts_impersonating_that_login_only() {
    let mut c = clean();
    etl(&mut c);
    server(&mut c).permissions.push(on_login("batch", "IMPERSONATE", "etl"));
    assert!(!named(&c, "login batch").is_empty());
    // A DENY on another login leaves it.
    server(&mut c)
        .denies
        .push(deny("batch", "IMPERSONATE", Some("reporting")));
    assert!(!named(&c, "login batch").is_empty());
    server(&mut c).denies.push(deny("batch", "IMPERSONATE", Some("etl")));
    assert!(named(&c, "login batch").is_empty(), "{:#?}", check(&c));
}

#[test]
fn a_deny_on_one_login_cuts_only_that_login_from_impersonate_any_login() {
    // DENY IMPERSONATE ON LOGIN::etl cuts the way through etl; IMPERSONATE
    // ANY LOGIN still reaches every other login, here the database owner's,
    // so monitor stays named for those.
    let mut c = clean();
    etl(&mut c);
    server(&mut c)
        .permissions
        .push(server_grant("monitor", "IMPERSONATE ANY LOGIN"));
    server(&mut c).denies.push(deny("monitor", "IMPERSONATE", Some("etl")));
    assert!(!named(&c, "login monitor").is_empty(), "{:#?}", check(&c));
}

#[test]
fn a_deny_on_a_server_role_cuts_the_alter_granted_on_it() {
    let mut c = clean();
    server(&mut c).roles.push("ops".into());
    server(&mut c).role_members.push(member("ops", "opsadmin"));
    server(&mut c)
        .permissions
        .push(server_grant("ops", "IMPERSONATE ANY LOGIN"));
    server(&mut c).permissions.push(on_login("junior", "ALTER", "ops"));
    assert!(!named(&c, "login junior").is_empty());
    server(&mut c).denies.push(deny("junior", "CONTROL", Some("ops")));
    assert!(named(&c, "login junior").is_empty(), "{:#?}", check(&c));
}

#[test]
fn a_deny_binds_no_securityadmin_member_which_may_revoke_it() {
    // securityadmin "can GRANT, DENY, and REVOKE server-level permissions":
    // a DENY in its way, on public or on the member itself, it revokes.
    // secadm's own ALTER ANY LOGIN stays a way of its own, beside the one
    // through securityadmin.
    let mut c = clean();
    etl(&mut c);
    server(&mut c).role_members.push(member("securityadmin", "secadm"));
    server(&mut c)
        .permissions
        .push(server_grant("secadm", "ALTER ANY LOGIN"));
    server(&mut c).denies.push(deny("public", "CONTROL SERVER", None));
    server(&mut c).denies.push(deny("secadm", "ALTER ANY LOGIN", None));
    let report = check(&c);
    let secadm = named(&c, "login secadm");
    assert!(
        secadm.iter().any(|f| f.path[0]
            .step
            .starts_with("ALTER ANY LOGIN: resets the password of etl")),
        "{report:#?}"
    );
    let role = named(&c, "server role securityadmin");
    assert!(!role.is_empty(), "{report:#?}");
    assert!(role[0].why.contains("login secadm"), "{:#?}", role[0]);
}
