//! DENYs a session gets out from under by dropping memberships, judged for
//! the principal that acts rather than for the holder of the right. Written
//! from "ALTER ROLE" (dropping a member needs ALTER on the role, ALTER ANY
//! ROLE, db_securityadmin, or owning it, as its owner or a member of the
//! owning role), "DENY Object Permissions" (a DENY binds the principals of
//! the session's security context: the user, its roles, the roles those are
//! in, public) and "EXECUTE AS" (the context changes to the impersonated
//! user; what the caller did before, ALTER ROLE included, stays done).
//!
//! Each layout has a control of the same shape that stays clean.

use crate::support;

use super::audit_reach_column_denies::rules_naming;
use super::audit_reach_leaving_roles::{deny, on_role};
use fencepost::audit::{Catalog, Report, Securable};
use support::fixtures::*;

/// A user of its own login, with CONNECT.
pub(super) fn add_user(c: &mut Catalog, name: &str) {
    c.principals.push(user(name, Some(name)));
    c.permissions.push(grant(name, "CONNECT", Securable::Database));
}

/// The steps of `who`'s path to writing a fence table, if it has one: in
/// FP027's finding, or in the finding of the rule that names it first.
pub(super) fn write_path(report: &Report, who: &str) -> Option<String> {
    report
        .findings
        .iter()
        .filter(|f| f.principal.as_deref() == Some(who))
        .map(|f| step_texts(f).join(" | "))
        .find(|steps| steps.contains("on fence."))
}

fn assert_writes(c: &Catalog, who: &str, steps_contain: &[&str]) {
    let report = check(c);
    let steps = write_path(&report, who).unwrap_or_else(|| panic!("{who} does not reach the fence: {report:#?}"));
    for s in steps_contain {
        assert!(steps.contains(s), "{s:?} missing from {steps}");
    }
}

fn assert_does_not_write(c: &Catalog, who: &str) {
    let report = check(c);
    assert!(write_path(&report, who).is_none(), "{report:#?}");
}

/// `u` is in `r_grant`, which holds UPDATE on fence.Resource and is itself
/// a member of `r_deny`, which is denied UPDATE on the fence schema: every
/// session of `u` holds both, so the DENY wins as the roles stand.
fn grant_role_nested_in_denied_role() -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    c.principals.push(role("r_grant"));
    c.principals.push(role("r_deny"));
    c.permissions
        .push(grant("r_grant", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("r_deny", "UPDATE", schema("fence")));
    c.memberships.push(member("r_deny", "r_grant"));
    c.memberships.push(member("r_grant", "u"));
    c
}

#[test]
fn a_member_that_may_alter_the_denied_role_drops_the_granting_role_from_it() {
    let mut c = grant_role_nested_in_denied_role();
    c.permissions.push(grant("u", "ALTER", on_role("r_deny")));
    assert_writes(
        &c,
        "u",
        &[
            "member of r_grant",
            "UPDATE on fence.Resource",
            "ALTER ROLE [r_deny] DROP MEMBER [r_grant]",
        ],
    );
}

#[test]
fn a_member_that_owns_the_denied_role_drops_the_granting_role_from_it() {
    let mut c = grant_role_nested_in_denied_role();
    c.principals.iter_mut().find(|p| p.name == "r_deny").unwrap().owner = Some("u".into());
    assert_writes(&c, "u", &["DROP MEMBER [r_grant]"]);
}

#[test]
fn a_member_of_the_role_owning_the_denied_role_drops_the_granting_role_from_it() {
    let mut c = grant_role_nested_in_denied_role();
    c.principals.push(role("r_admins"));
    c.memberships.push(member("r_admins", "u"));
    c.principals.iter_mut().find(|p| p.name == "r_deny").unwrap().owner = Some("r_admins".into());
    assert_writes(&c, "u", &["DROP MEMBER [r_grant]"]);
}

/// The DENY comes through `r_mid`, between `r_grant` and `r_deny`: the
/// link `u` may drop is `r_grant` in `r_mid`.
#[test]
fn a_member_drops_a_link_higher_in_the_nesting() {
    let mut c = grant_role_nested_in_denied_role();
    c.memberships.retain(|m| m.role != "r_deny");
    c.principals.push(role("r_mid"));
    c.memberships.push(member("r_mid", "r_grant"));
    c.memberships.push(member("r_deny", "r_mid"));
    c.permissions.push(grant("u", "ALTER", on_role("r_mid")));
    assert_writes(&c, "u", &["ALTER ROLE [r_mid] DROP MEMBER [r_grant]"]);
}

/// Control: `u` may alter no role in the way.
#[test]
fn a_member_that_may_alter_neither_role_stays_refused() {
    let mut c = grant_role_nested_in_denied_role();
    c.principals.push(role("elsewhere"));
    c.permissions.push(grant("u", "ALTER", on_role("elsewhere")));
    let report = check(&c);
    assert!(rules_naming(&report, "u").is_empty(), "{report:#?}");
    assert!(rules_naming(&report, "r_grant").is_empty(), "{report:#?}");
}

/// `u` may add itself to `r_grant` (ALTER on it) and is in `r_deny`, which
/// it may leave: both in one path.
fn joins_the_grant_and_is_denied(may_leave: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    c.principals.push(role("r_grant"));
    c.principals.push(role("r_deny"));
    c.permissions
        .push(grant("r_grant", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("r_deny", "UPDATE", schema("fence")));
    c.memberships.push(member("r_deny", "u"));
    c.permissions.push(grant("u", "ALTER", on_role("r_grant")));
    if may_leave {
        c.permissions.push(grant("u", "ALTER", on_role("r_deny")));
    }
    c
}

#[test]
fn a_principal_joins_the_granting_role_and_leaves_the_denied_one() {
    assert_writes(
        &joins_the_grant_and_is_denied(true),
        "u",
        &["ALTER on ROLE::r_grant", "ALTER ROLE [r_deny] DROP MEMBER [u]"],
    );
}

#[test]
fn a_principal_that_joins_the_granting_role_but_cannot_leave_the_denied_one_stays_refused() {
    assert_does_not_write(&joins_the_grant_and_is_denied(false), "u");
}

/// `u` is in `r_grant`, which holds UPDATE on fence.Resource and is in
/// `r_d1` and `r_d2`, each denied it; `u` may alter all three roles, or
/// `r_grant` and `r_d1` only. Dropping every link it may drop would take
/// `u` out of `r_grant` too.
fn two_denied_roles(alter_both: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    for r in ["r_grant", "r_d1", "r_d2"] {
        c.principals.push(role(r));
    }
    c.memberships.push(member("r_grant", "u"));
    c.memberships.push(member("r_d1", "r_grant"));
    c.memberships.push(member("r_d2", "r_grant"));
    c.permissions
        .push(grant("r_grant", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("r_d1", "UPDATE", schema("fence")));
    c.permissions.push(deny("r_d2", "UPDATE", object("fence", "Resource")));
    c.permissions.push(grant("u", "ALTER", on_role("r_grant")));
    c.permissions.push(grant("u", "ALTER", on_role("r_d1")));
    if alter_both {
        c.permissions.push(grant("u", "ALTER", on_role("r_d2")));
    }
    c
}

#[test]
fn a_principal_drops_both_denied_roles_and_keeps_the_granting_one() {
    let c = two_denied_roles(true);
    assert_writes(
        &c,
        "u",
        &[
            "ALTER ROLE [r_d1] DROP MEMBER [r_grant];",
            "ALTER ROLE [r_d2] DROP MEMBER [r_grant];",
            "UPDATE on fence.Resource",
        ],
    );
    let steps = write_path(&check(&c), "u").unwrap();
    assert!(!steps.contains("ALTER ROLE [r_grant] DROP MEMBER"), "{steps}");
}

#[test]
fn a_principal_that_may_drop_only_one_of_two_denied_roles_stays_refused() {
    assert_does_not_write(&two_denied_roles(false), "u");
}

/// `u` is in `a` and `b`; `b` is denied UPDATE on the fence, and `a` is
/// denied ALTER on `b`; `u` holds ALTER on both and UPDATE on
/// fence.Resource. Leaving `a` lifts the DENY on altering `b`.
fn leaving_in_sequence(deny_to_user: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    for r in ["a", "b"] {
        c.principals.push(role(r));
        c.memberships.push(member(r, "u"));
        c.permissions.push(grant("u", "ALTER", on_role(r)));
    }
    c.permissions.push(grant("u", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("b", "UPDATE", schema("fence")));
    let denied = if deny_to_user { "u" } else { "a" };
    c.permissions.push(deny(denied, "ALTER", on_role("b")));
    c
}

#[test]
fn leaving_one_role_lifts_a_deny_of_altering_the_next() {
    assert_writes(
        &leaving_in_sequence(false),
        "u",
        &["ALTER ROLE [a] DROP MEMBER [u]; ALTER ROLE [b] DROP MEMBER [u];"],
    );
}

#[test]
fn a_deny_of_altering_the_role_made_to_the_user_itself_stays_a_cut() {
    assert_does_not_write(&leaving_in_sequence(true), "u");
}

/// `u` may act as `v` (IMPERSONATE); `v` holds UPDATE on fence.Resource and
/// is in `r_deny`, which is denied it; `v` may not leave `r_deny`, `u` may
/// alter it when `u_alters`.
fn impersonated_user_denied(u_alters: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    c.principals.push(user("v", None));
    c.principals.push(role("r_deny"));
    c.memberships.push(member("r_deny", "v"));
    c.permissions.push(grant("v", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("r_deny", "UPDATE", schema("fence")));
    c.permissions.push(grant("u", "IMPERSONATE", on_role("v")));
    if u_alters {
        c.permissions.push(grant("u", "ALTER", on_role("r_deny")));
    }
    c
}

#[test]
fn a_caller_drops_the_impersonated_user_from_its_denied_role_first() {
    let c = impersonated_user_denied(true);
    assert_writes(
        &c,
        "u",
        &[
            "IMPERSONATE on USER::v",
            "UPDATE on fence.Resource",
            "ALTER ROLE [r_deny] DROP MEMBER [v]",
        ],
    );
    // `v` itself may not leave.
    assert_does_not_write(&c, "v");
}

#[test]
fn a_caller_that_may_not_alter_the_impersonated_users_denied_role_stays_refused() {
    assert_does_not_write(&impersonated_user_denied(false), "u");
}

/// `etl` holds UPDATE on fence.Resource and is in `etl_role`, which is
/// denied it; `etl` is also in `alter_role`, which holds ALTER on
/// `etl_role`; DENY ALTER ON ROLE::etl_role TO etl when `denied`.
fn alter_held_through_another_role(denied: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "etl");
    c.principals.push(role("etl_role"));
    c.principals.push(role("alter_role"));
    c.memberships.push(member("etl_role", "etl"));
    c.memberships.push(member("alter_role", "etl"));
    c.permissions.push(grant("etl", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("etl_role", "UPDATE", schema("fence")));
    c.permissions.push(grant("alter_role", "ALTER", on_role("etl_role")));
    if denied {
        c.permissions.push(deny("etl", "ALTER", on_role("etl_role")));
    }
    c
}

#[test]
fn a_deny_of_altering_the_role_to_the_user_beats_another_roles_grant_of_it() {
    let report = check(&alter_held_through_another_role(true));
    assert!(rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

#[test]
fn altering_the_denied_role_through_another_role_leaves_it() {
    assert_writes(
        &alter_held_through_another_role(false),
        "etl",
        &["ALTER ROLE [etl_role] DROP MEMBER [etl]"],
    );
}

/// `u` holds UPDATE on fence.Resource and ALTER on `d`, which is denied
/// UPDATE on the fence schema; `d` holds ALTER on `r`, another role `u` is
/// in. Leaving `d` costs `u` its right on `r`, which it no longer needs:
/// the DROP MEMBER is the one statement between it and the write.
#[test]
fn leaving_the_denied_role_at_the_cost_of_a_right_no_longer_needed_still_leaves_it() {
    let mut c = clean();
    add_user(&mut c, "u");
    c.principals.push(role("d"));
    c.principals.push(role("r"));
    c.memberships.push(member("d", "u"));
    c.memberships.push(member("r", "u"));
    c.permissions.push(grant("u", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("d", "UPDATE", schema("fence")));
    c.permissions.push(grant("u", "ALTER", on_role("d")));
    c.permissions.push(grant("d", "ALTER", on_role("r")));
    assert_writes(&c, "u", &["DROP MEMBER [u]"]);
}

/// `u` holds UPDATE on fence.Resource and is in `d`, denied UPDATE on the
/// fence schema; `r` holds ALTER on `d`; `u` may add members to `r` when
/// `may_join`: `ALTER ROLE r ADD MEMBER u`, a new session, then `ALTER ROLE
/// d DROP MEMBER u`.
fn joins_a_role_that_may_alter_the_denied_one(may_join: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    c.principals.push(role("r"));
    c.principals.push(role("d"));
    c.memberships.push(member("d", "u"));
    c.permissions.push(grant("u", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("d", "UPDATE", schema("fence")));
    c.permissions.push(grant("r", "ALTER", on_role("d")));
    if may_join {
        c.permissions.push(grant("u", "ALTER", on_role("r")));
    }
    c
}

#[test]
fn a_principal_joins_a_role_that_may_alter_the_denied_one_and_leaves_it() {
    assert_writes(
        &joins_a_role_that_may_alter_the_denied_one(true),
        "u",
        &["ALTER ROLE [r] ADD MEMBER [u];", "ALTER ROLE [d] DROP MEMBER [u];"],
    );
}

#[test]
fn a_principal_that_may_not_join_the_role_that_may_alter_the_denied_one_stays_refused() {
    assert_does_not_write(&joins_a_role_that_may_alter_the_denied_one(false), "u");
}

/// `u` is in `g`, which holds TAKE OWNERSHIP on the fence schema and is in
/// `d`, denied it; `u` may alter `d` when `may_alter`: it drops `g` from
/// `d`, takes the schema, and owns every table in it.
fn takes_the_schema_past_a_deny_a_member_drops(may_alter: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    c.principals.push(role("g"));
    c.principals.push(role("d"));
    c.memberships.push(member("g", "u"));
    c.memberships.push(member("d", "g"));
    c.permissions.push(grant("g", "TAKE OWNERSHIP", schema("fence")));
    c.permissions.push(deny("d", "TAKE OWNERSHIP", schema("fence")));
    if may_alter {
        c.permissions.push(grant("u", "ALTER", on_role("d")));
    }
    c
}

#[test]
fn a_member_that_may_drop_the_deny_of_taking_the_schema_takes_it() {
    let report = check(&takes_the_schema_past_a_deny_a_member_drops(true));
    assert!(
        report.findings.iter().any(|f| f.principal.as_deref() == Some("u")),
        "{report:#?}"
    );
}

#[test]
fn a_member_that_may_not_drop_the_deny_of_taking_the_schema_stays_refused() {
    let report = check(&takes_the_schema_past_a_deny_a_member_drops(false));
    assert!(
        !report.findings.iter().any(|f| f.principal.as_deref() == Some("u")),
        "{report:#?}"
    );
}

/// `u` holds UPDATE on fence.Resource and is in each of `roles` roles, all
/// denied UPDATE on the fence schema; `u` may alter the first, and each may
/// alter the next: `u` leaves them from the last to the first.
fn chain_of_denied_roles(roles: usize) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    c.permissions.push(grant("u", "UPDATE", object("fence", "Resource")));
    for i in 0..roles {
        let r = format!("r{i}");
        c.principals.push(role(&r));
        c.permissions.push(deny(&r, "UPDATE", schema("fence")));
        c.memberships.push(member(&r, "u"));
        if i + 1 < roles {
            c.permissions.push(grant(&r, "ALTER", on_role(&format!("r{}", i + 1))));
        }
    }
    c.permissions.push(grant("u", "ALTER", on_role("r0")));
    c
}

#[test]
fn a_long_chain_of_denied_roles_is_left_from_the_last_to_the_first() {
    assert_writes(
        &chain_of_denied_roles(200),
        "u",
        &[
            "ALTER ROLE [r199] DROP MEMBER [u]; ALTER ROLE [r198] DROP MEMBER [u];",
            "ALTER ROLE [r0] DROP MEMBER [u];",
        ],
    );
}

/// `u` may act as `a`, and `a` as `b` (IMPERSONATE on each); `b` holds
/// UPDATE on fence.Resource and is in `r_deny`, which is denied it; only
/// `a`, in the middle, may alter `r_deny` when `a_alters`. "EXECUTE AS"
/// stacks: `EXECUTE AS USER = 'a'`, `ALTER ROLE r_deny DROP MEMBER b`,
/// `EXECUTE AS USER = 'b'`, and the UPDATE runs as `b` with the drop done.
fn impersonation_chain_denied(a_alters: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    for name in ["a", "b"] {
        c.principals.push(user(name, None));
    }
    c.principals.push(role("r_deny"));
    c.memberships.push(member("r_deny", "b"));
    c.permissions.push(grant("b", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("r_deny", "UPDATE", schema("fence")));
    c.permissions.push(grant("u", "IMPERSONATE", on_role("a")));
    c.permissions.push(grant("a", "IMPERSONATE", on_role("b")));
    if a_alters {
        c.permissions.push(grant("a", "ALTER", on_role("r_deny")));
    }
    c
}

#[test]
fn a_middle_user_of_an_impersonation_chain_drops_the_last_ones_denied_role_first() {
    let c = impersonation_chain_denied(true);
    assert_writes(
        &c,
        "u",
        &[
            "IMPERSONATE on USER::a",
            "IMPERSONATE on USER::b",
            "UPDATE on fence.Resource",
            "ALTER ROLE [r_deny] DROP MEMBER [b]",
        ],
    );
}

#[test]
fn an_impersonation_chain_where_no_one_may_alter_the_denied_role_stays_refused() {
    let c = impersonation_chain_denied(false);
    assert_does_not_write(&c, "u");
    assert_does_not_write(&c, "a");
}

/// `r_grant` holds UPDATE on fence.Resource; `p` is denied UPDATE on the
/// fence schema itself (no membership to drop), may alter `r_grant` when
/// `alters`, and may act as `v` when `impersonates`. "ALTER ROLE ... ADD
/// MEMBER" takes any principal, not only the caller: `ALTER ROLE r_grant
/// ADD MEMBER v`, then `EXECUTE AS USER = 'v'`, and the UPDATE runs as `v`.
fn adds_an_impersonated_user_to_the_granting_role(alters: bool, impersonates: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "p");
    c.principals.push(user("v", None));
    c.principals.push(role("r_grant"));
    c.permissions
        .push(grant("r_grant", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("p", "UPDATE", schema("fence")));
    if alters {
        c.permissions.push(grant("p", "ALTER", on_role("r_grant")));
    }
    if impersonates {
        c.permissions.push(grant("p", "IMPERSONATE", on_role("v")));
    }
    c
}

#[test]
fn a_principal_adds_a_user_it_may_impersonate_to_the_granting_role() {
    let mut c = adds_an_impersonated_user_to_the_granting_role(true, true);
    // `q` may act as `v` too, but may add no one to `r_grant`.
    add_user(&mut c, "q");
    c.permissions.push(grant("q", "IMPERSONATE", on_role("v")));
    assert_writes(
        &c,
        "p",
        &[
            "IMPERSONATE on USER::v",
            "ALTER ROLE [r_grant] ADD MEMBER [v]",
            "UPDATE on fence.Resource",
        ],
    );
    assert_does_not_write(&c, "q");
}

#[test]
fn a_principal_that_may_not_both_add_and_impersonate_stays_refused() {
    for (alters, impersonates) in [(true, false), (false, true)] {
        let c = adds_an_impersonated_user_to_the_granting_role(alters, impersonates);
        assert_does_not_write(&c, "p");
    }
}
