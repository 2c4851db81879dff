//! DENYs made to a role its member may leave, on layouts written from
//! "ALTER ROLE" (adding or dropping members needs ALTER on the role, ALTER
//! ANY ROLE, db_securityadmin, or owning the role or being in the role that
//! owns it) and "DENY Object Permissions" (a DENY binds the principals of
//! the session's security context). A member that may run `ALTER ROLE r DROP
//! MEMBER itself` leaves the DENY behind and keeps what it holds elsewhere;
//! FP003 and FP027 judge such a DENY the same way. A DENY to `public`, to the
//! user itself, or through a fixed role (whose members only db_owner's
//! members change) stays a cut.

use crate::support;

use super::audit_reach_column_denies::rules_naming;
use fencepost::audit::{Catalog, Permission, PermissionState, Rule, Securable};
use support::fixtures::*;

pub(super) fn deny(grantee: &str, permission: &str, on: Securable) -> Permission {
    Permission {
        state: PermissionState::Deny,
        ..grant(grantee, permission, on)
    }
}

pub(super) fn on_role(name: &str) -> Securable {
    Securable::Principal { name: name.into() }
}

/// `etl`, a user of its own login, in `etl_role`, which is denied UPDATE on
/// the fence schema, granted UPDATE on fence.Resource itself.
fn denied_through_a_role() -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    c.principals.push(role("etl_role"));
    c.memberships.push(member("etl_role", "etl"));
    c.permissions.push(deny("etl_role", "UPDATE", schema("fence")));
    c.permissions.push(grant("etl", "UPDATE", object("fence", "Resource")));
    c
}

/// `etl` may act as `bob` (IMPERSONATE), who holds UPDATE on
/// fence.Resource through `writers` and is in `etl_role`, which is denied
/// it; `bob` may leave `etl_role` when `may_leave`.
fn etl_acting_as_bob(may_leave: bool) -> Catalog {
    let mut c = denied_through_a_role();
    c.permissions
        .retain(|p| !(p.grantee == "etl" && p.permission == "UPDATE"));
    c.memberships.retain(|m| m.member != "etl");
    c.principals.push(user("bob", None));
    c.principals.push(role("writers"));
    c.memberships.push(member("etl_role", "bob"));
    c.memberships.push(member("writers", "bob"));
    c.permissions
        .push(grant("writers", "UPDATE", object("fence", "Resource")));
    c.permissions.push(grant("etl", "IMPERSONATE", on_role("bob")));
    if may_leave {
        c.permissions.push(grant("bob", "ALTER", on_role("etl_role")));
    }
    c
}

/// `etl` is named by FP003 for its grant and by FP027 with a path that
/// says it leaves `etl_role` first.
fn assert_named_leaving(c: &Catalog) {
    let report = check(c);
    let rules = rules_naming(&report, "etl");
    assert!(rules.contains(&Rule::WriteAccess.id()), "{report:#?}");
    let f = report
        .findings
        .iter()
        .find(|f| f.principal.as_deref() == Some("etl") && !f.path.is_empty())
        .unwrap_or_else(|| panic!("no path for etl: {report:#?}"));
    let steps = step_texts(f).join(" | ");
    assert!(steps.contains("UPDATE on fence.Resource"), "{steps}");
    assert!(steps.contains("DROP MEMBER [etl]"), "{steps}");
}

fn assert_clean_of_etl(c: &Catalog) {
    let report = check(c);
    assert!(rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

#[test]
fn a_deny_to_a_role_its_member_may_alter_is_no_cut() {
    let mut c = denied_through_a_role();
    c.permissions.push(grant("etl", "ALTER", on_role("etl_role")));
    assert_named_leaving(&c);
}

#[test]
fn a_deny_to_a_role_its_member_owns_is_no_cut() {
    let mut c = denied_through_a_role();
    c.principals.iter_mut().find(|p| p.name == "etl_role").unwrap().owner = Some("etl".into());
    assert_named_leaving(&c);
}

#[test]
fn a_deny_to_a_role_is_no_cut_for_a_holder_of_alter_any_role() {
    let mut c = denied_through_a_role();
    c.permissions.push(grant("etl", "ALTER ANY ROLE", Securable::Database));
    assert_named_leaving(&c);
}

#[test]
fn a_deny_to_a_role_is_no_cut_for_a_holder_of_control_on_it() {
    let mut c = denied_through_a_role();
    c.permissions.push(grant("etl", "CONTROL", on_role("etl_role")));
    assert_named_leaving(&c);
}

#[test]
fn a_deny_to_a_role_is_no_cut_for_a_member_of_db_securityadmin() {
    let mut c = denied_through_a_role();
    c.principals.push(role("db_securityadmin"));
    c.memberships.push(member("db_securityadmin", "etl"));
    assert_named_leaving(&c);
}

#[test]
fn a_deny_to_a_role_is_no_cut_for_a_member_of_the_role_that_owns_it() {
    let mut c = denied_through_a_role();
    c.principals.push(role("etl_admins"));
    c.memberships.push(member("etl_admins", "etl"));
    c.principals.iter_mut().find(|p| p.name == "etl_role").unwrap().owner = Some("etl_admins".into());
    assert_named_leaving(&c);
}

/// The DENY is made to a role `etl` is in through `etl_role`, which it may
/// take itself out of.
#[test]
fn a_deny_to_an_outer_role_is_no_cut_when_an_inner_link_may_be_dropped() {
    let mut c = denied_through_a_role();
    c.permissions.retain(|p| p.grantee != "etl_role");
    c.principals.push(role("outer_role"));
    c.memberships.push(member("outer_role", "etl_role"));
    c.permissions.push(deny("outer_role", "UPDATE", schema("fence")));
    c.permissions.push(grant("etl", "ALTER", on_role("etl_role")));
    let report = check(&c);
    assert!(!rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

/// `etl` acts as `bob` (IMPERSONATE), who holds the right through
/// `writers` and is denied it through `etl_role`, which `bob` may leave
/// while staying in `writers`.
#[test]
fn a_deny_to_one_role_is_no_cut_for_a_session_holding_the_right_through_another() {
    let report = check(&etl_acting_as_bob(true));
    let f = report
        .findings
        .iter()
        .find(|f| f.principal.as_deref() == Some("etl") && !f.path.is_empty())
        .unwrap_or_else(|| panic!("no path for etl: {report:#?}"));
    let steps = step_texts(f).join(" | ");
    assert!(steps.contains("IMPERSONATE on USER::bob"), "{steps}");
    assert!(steps.contains("UPDATE on fence.Resource"), "{steps}");
}

/// Same, but `bob` may not leave `etl_role`: `etl` is not named.
#[test]
fn a_deny_stays_a_cut_for_a_session_that_may_not_leave_the_role() {
    let report = check(&etl_acting_as_bob(false));
    assert!(
        !report.findings.iter().any(
            |f| f.principal.as_deref() == Some("etl") && step_texts(f).iter().any(|s| s.contains("fence.Resource"))
        ),
        "{report:#?}"
    );
}

/// Leaving `etl_role` would also leave `writers`, which is in it and holds
/// the right: the DENY stays a cut.
#[test]
fn a_deny_stays_a_cut_when_leaving_the_role_drops_the_right_too() {
    let mut c = denied_through_a_role();
    c.permissions
        .retain(|p| !(p.grantee == "etl" && p.permission == "UPDATE"));
    c.principals.push(role("writers"));
    c.memberships.push(member("writers", "etl_role"));
    c.permissions
        .push(grant("writers", "UPDATE", object("fence", "Resource")));
    c.permissions.push(grant("etl", "ALTER", on_role("etl_role")));
    let report = check(&c);
    let reached: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.rule == Rule::ReachesFence && f.permission.as_deref() == Some("write the fence tables"))
        .filter(|f| {
            f.principal
                .as_deref()
                .is_some_and(|p| p.contains("etl") || p.contains("writers"))
        })
        .collect();
    assert!(reached.is_empty(), "{reached:#?}");
}

#[test]
fn a_deny_to_a_role_its_member_may_not_alter_stays_a_cut() {
    assert_clean_of_etl(&denied_through_a_role());
}

#[test]
fn a_deny_to_public_stays_a_cut_whatever_the_member_may_alter() {
    let mut c = denied_through_a_role();
    c.permissions.retain(|p| p.grantee != "etl_role");
    c.permissions.push(deny("public", "UPDATE", schema("fence")));
    c.permissions.push(grant("etl", "ALTER", on_role("etl_role")));
    assert_clean_of_etl(&c);
}

#[test]
fn a_deny_to_the_user_itself_stays_a_cut_whatever_it_may_alter() {
    let mut c = denied_through_a_role();
    c.permissions.push(deny("etl", "UPDATE", schema("fence")));
    c.permissions.push(grant("etl", "ALTER", on_role("etl_role")));
    assert_clean_of_etl(&c);
}

/// db_denydatawriter's members are changed by db_owner's members only,
/// whatever a holder of ALTER on the role it is in may do.
#[test]
fn a_deny_through_a_fixed_role_stays_a_cut() {
    let mut c = denied_through_a_role();
    c.permissions.retain(|p| p.grantee != "etl_role");
    c.memberships.push(member("db_denydatawriter", "etl"));
    c.permissions.push(grant("etl", "ALTER", on_role("db_denydatawriter")));
    assert_clean_of_etl(&c);
}

/// DENY ALTER on the role to the member keeps it in: the DENY on the fence
/// stays a cut.
#[test]
fn a_deny_stays_a_cut_when_altering_the_role_is_denied_too() {
    let mut c = denied_through_a_role();
    c.permissions.push(grant("etl", "ALTER", on_role("etl_role")));
    c.permissions.push(deny("etl", "ALTER", on_role("etl_role")));
    assert_clean_of_etl(&c);
}
