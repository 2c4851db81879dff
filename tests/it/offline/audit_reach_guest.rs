//! The guest user, on layouts written from "GRANT Database Permissions" and
//! "Server-level roles": while guest holds CONNECT, every login without a
//! user of its own enters the database as guest, so what guest holds every
//! login holds, and the finding naming guest (FP014, FP003 or FP027, with
//! the path) stands for them all. A login with CONNECT ANY DATABASE enters
//! without a user too, and its server rights count there.

use crate::support;

use fencepost::audit::{Catalog, Rule, Securable};
use support::fixtures::*;

fn guest_connects(c: &mut Catalog) {
    c.permissions.push(grant("guest", "CONNECT", Securable::Database));
}

fn write_finding_steps(c: &Catalog, who: &str) -> Option<String> {
    check(c)
        .findings
        .into_iter()
        .find(|f| f.principal.as_deref() == Some(who) && f.path.iter().any(|s| s.step.contains("fence.Resource")))
        .map(|f| f.path.iter().map(|s| s.step.clone()).collect::<Vec<_>>().join(" | "))
}

#[test]
fn update_granted_to_guest_that_may_connect_names_guest_as_every_login() {
    let mut c = clean();
    guest_connects(&mut c);
    c.permissions
        .push(grant("guest", "UPDATE", object("fence", "Resource")));
    let steps = write_finding_steps(&c, "guest").expect("guest is named");
    assert!(steps.contains("UPDATE on fence.Resource"), "{steps}");
}

#[test]
fn execute_on_a_procedure_writing_the_fence_granted_to_guest_names_guest() {
    let mut c = clean();
    guest_connects(&mut c);
    c.objects.push(module(
        "dbo",
        "Reset",
        fencepost::audit::ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Reset AS UPDATE fence.Resource SET Generation = 0;",
    ));
    c.permissions.push(grant("guest", "EXECUTE", object("dbo", "Reset")));
    let steps = write_finding_steps(&c, "guest").expect("guest is named");
    assert!(steps.contains("EXECUTE on dbo.Reset"), "{steps}");
}

#[test]
fn a_login_with_connect_any_database_and_alter_any_database_is_named() {
    let mut c = clean();
    server_facts(&mut c)
        .permissions
        .push(server_grant("etl", "CONNECT ANY DATABASE"));
    server_facts(&mut c)
        .permissions
        .push(server_grant("etl", "ALTER ANY DATABASE"));
    assert!(!reaching(&c, "login etl").is_empty(), "{:#?}", check(&c));
}

#[test]
fn guest_with_connect_and_nothing_else_names_no_one_for_the_fence() {
    let mut c = clean();
    guest_connects(&mut c);
    let report = check(&c);
    assert!(report.findings_of(Rule::ReachesFence).next().is_none(), "{report:#?}");
}

#[test]
fn a_login_with_connect_any_database_and_guest_holding_nothing_is_not_named() {
    let mut c = clean();
    server_facts(&mut c)
        .permissions
        .push(server_grant("etl", "CONNECT ANY DATABASE"));
    let report = check(&c);
    assert!(report.findings.iter().all(|f| !f.why.contains("etl")), "{report:#?}");
}
