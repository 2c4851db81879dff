//! Detours through an impersonated user and back. "EXECUTE AS" changes the
//! session's context to the impersonated user, and "REVERT" returns it to
//! the caller's; what the session did as the impersonated user (an ALTER
//! ROLE ... DROP MEMBER included) stays done. So a caller held back by a
//! DENY that a user it may impersonate can lift acts as that user, lifts
//! it, reverts, and writes as itself.
//!
//! Each layout has a control of the same shape that stays clean.

use crate::support;

use super::audit_reach_acting_leaves::{add_user, write_path};
use super::audit_reach_column_denies::rules_naming;
use super::audit_reach_leaving_roles::{deny, on_role};
use fencepost::audit::{Catalog, Securable};
use support::fixtures::*;

/// `u` is in `r_grant`, which holds UPDATE on fence.Resource and is itself
/// in `r_deny`, which is denied UPDATE on the fence schema; `u` may alter
/// no role. `u` may act as `v` (IMPERSONATE); `v` holds ALTER on `r_deny`
/// when `v_alters`, and nothing else.
fn denied_caller_impersonates_a_role_admin(v_alters: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    c.principals.push(user("v", None));
    c.principals.push(role("r_grant"));
    c.principals.push(role("r_deny"));
    c.permissions
        .push(grant("r_grant", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("r_deny", "UPDATE", schema("fence")));
    c.memberships.push(member("r_deny", "r_grant"));
    c.memberships.push(member("r_grant", "u"));
    c.permissions.push(grant("u", "IMPERSONATE", on_role("v")));
    if v_alters {
        c.permissions.push(grant("v", "ALTER", on_role("r_deny")));
    }
    c
}

#[test]
fn a_caller_acts_as_a_user_that_lifts_its_deny_and_reverts_to_write() {
    let c = denied_caller_impersonates_a_role_admin(true);
    let report = check(&c);
    let steps = write_path(&report, "u").unwrap_or_else(|| panic!("u does not reach the fence: {report:#?}"));
    for s in [
        "IMPERSONATE on USER::v",
        "ALTER ROLE [r_deny] DROP MEMBER [r_grant]",
        "acting as v",
        "REVERT",
        "UPDATE on fence.Resource",
    ] {
        assert!(steps.contains(s), "{s:?} missing from {steps}");
    }
    // `v` holds no write of its own, and lifting the DENY gives it none.
    assert!(write_path(&report, "v").is_none(), "{report:#?}");
}

#[test]
fn a_caller_whose_impersonated_user_may_not_lift_the_deny_stays_refused() {
    let c = denied_caller_impersonates_a_role_admin(false);
    let report = check(&c);
    assert!(rules_naming(&report, "u").is_empty(), "{report:#?}");
    assert!(rules_naming(&report, "v").is_empty(), "{report:#?}");
}

/// The user that may lift the DENY is two impersonations away: `u` acts
/// as `a`, `a` as `b`, and `b` holds ALTER on `r_deny` when `b_alters`.
/// `REVERT` twice returns to `u`.
fn denied_caller_impersonates_through_a_chain(b_alters: bool) -> Catalog {
    let mut c = denied_caller_impersonates_a_role_admin(false);
    c.permissions
        .retain(|p| p.grantee != "u" || p.permission != "IMPERSONATE");
    for name in ["a", "b"] {
        c.principals.push(user(name, None));
    }
    c.permissions.push(grant("u", "IMPERSONATE", on_role("a")));
    c.permissions.push(grant("a", "IMPERSONATE", on_role("b")));
    if b_alters {
        c.permissions.push(grant("b", "ALTER", on_role("r_deny")));
    }
    c
}

#[test]
fn a_caller_reverts_through_a_chain_of_impersonations_to_write() {
    let c = denied_caller_impersonates_through_a_chain(true);
    let report = check(&c);
    let steps = write_path(&report, "u").unwrap_or_else(|| panic!("u does not reach the fence: {report:#?}"));
    for s in [
        "IMPERSONATE on USER::a",
        "IMPERSONATE on USER::b",
        "ALTER ROLE [r_deny] DROP MEMBER [r_grant]",
        "REVERT; REVERT",
    ] {
        assert!(steps.contains(s), "{s:?} missing from {steps}");
    }
}

#[test]
fn a_chain_of_impersonations_where_no_one_may_lift_the_deny_stays_refused() {
    let c = denied_caller_impersonates_through_a_chain(false);
    let report = check(&c);
    for who in ["u", "a", "b"] {
        assert!(rules_naming(&report, who).is_empty(), "{who}: {report:#?}");
    }
}

/// The DENY is made to `u` itself: no membership carries it, so no one's
/// ALTER ROLE lifts it, and the detour gains nothing.
#[test]
fn a_deny_made_to_the_caller_itself_is_not_lifted_by_a_detour() {
    let mut c = denied_caller_impersonates_a_role_admin(true);
    c.permissions.push(deny("u", "UPDATE", schema("fence")));
    let report = check(&c);
    assert!(write_path(&report, "u").is_none(), "{report:#?}");
}

/// "EXECUTE AS (Transact-SQL)": IMPERSONATE granted to a role is held by
/// its members' sessions, which may then EXECUTE AS USER that user. `u`
/// holds IMPERSONATE on `v` only through `imp`, a role it is in.
fn denied_caller_impersonates_through_a_role(v_alters: bool) -> Catalog {
    let mut c = denied_caller_impersonates_a_role_admin(v_alters);
    c.permissions
        .retain(|p| p.grantee != "u" || p.permission != "IMPERSONATE");
    c.principals.push(role("imp"));
    c.memberships.push(member("imp", "u"));
    c.permissions.push(grant("imp", "IMPERSONATE", on_role("v")));
    c
}

#[test]
fn a_caller_impersonates_through_its_role_lifts_its_deny_and_reverts_to_write() {
    let c = denied_caller_impersonates_through_a_role(true);
    let report = check(&c);
    let steps = write_path(&report, "u").unwrap_or_else(|| panic!("u does not reach the fence: {report:#?}"));
    for s in [
        "as a member of imp: IMPERSONATE on USER::v",
        "ALTER ROLE [r_deny] DROP MEMBER [r_grant]",
        "REVERT",
        "UPDATE on fence.Resource",
    ] {
        assert!(steps.contains(s), "{s:?} missing from {steps}");
    }
}

#[test]
fn a_caller_impersonating_through_its_role_a_user_that_may_not_lift_the_deny_stays_refused() {
    let c = denied_caller_impersonates_through_a_role(false);
    let report = check(&c);
    assert!(rules_naming(&report, "u").is_empty(), "{report:#?}");
}

/// "DENY Database Principal Permissions": a DENY of IMPERSONATE on `v`
/// made to `u` refuses the EXECUTE AS its role's grant allows, so there is
/// no detour.
#[test]
fn a_deny_of_the_impersonation_blocks_the_detour_through_a_role() {
    let mut c = denied_caller_impersonates_through_a_role(true);
    c.permissions.push(deny("u", "IMPERSONATE", on_role("v")));
    let report = check(&c);
    assert!(write_path(&report, "u").is_none(), "{report:#?}");
}

/// "EXECUTE AS (Transact-SQL)" / "REVERT (Transact-SQL)": EXECUTE AS LOGIN
/// switches the session to that login, whose user here runs the ALTER
/// ROLE; REVERT comes back. `u`'s login holds IMPERSONATE on the login
/// `lv`, whose user `v` may alter `r_deny` when `v_alters`.
fn denied_caller_impersonates_a_login(v_alters: bool) -> Catalog {
    let mut c = denied_caller_impersonates_a_role_admin(v_alters);
    c.permissions
        .retain(|p| p.grantee != "u" || p.permission != "IMPERSONATE");
    c.principals.retain(|p| p.name != "v");
    c.principals.push(user("v", Some("lv")));
    c.permissions.push(grant("v", "CONNECT", Securable::Database));
    server_facts(&mut c)
        .permissions
        .push(on_login("u", "IMPERSONATE", "lv"));
    c
}

#[test]
fn a_caller_acts_as_a_login_whose_user_lifts_its_deny_and_reverts_to_write() {
    let c = denied_caller_impersonates_a_login(true);
    let report = check(&c);
    let steps = write_path(&report, "u").unwrap_or_else(|| panic!("u does not reach the fence: {report:#?}"));
    for s in [
        "as login u: IMPERSONATE on LOGIN::lv",
        "acting as v",
        "ALTER ROLE [r_deny] DROP MEMBER [r_grant]",
        "REVERT",
        "UPDATE on fence.Resource",
    ] {
        assert!(steps.contains(s), "{s:?} missing from {steps}");
    }
}

#[test]
fn a_caller_acting_as_a_login_whose_user_may_not_lift_the_deny_stays_refused() {
    let c = denied_caller_impersonates_a_login(false);
    let report = check(&c);
    assert!(write_path(&report, "u").is_none(), "{report:#?}");
}

/// "DENY Server Principal Permissions": DENY IMPERSONATE ON LOGIN::lv to
/// `u` refuses the EXECUTE AS LOGIN.
#[test]
fn a_server_deny_of_the_login_impersonation_blocks_the_detour() {
    let mut c = denied_caller_impersonates_a_login(true);
    server_facts(&mut c).denies.push(on_login("u", "IMPERSONATE", "lv"));
    let report = check(&c);
    assert!(write_path(&report, "u").is_none(), "{report:#?}");
}
