//! Layouts where `check` must find the way past DENYs however the catalog
//! lists its memberships, must not count a DENY of an unrelated permission
//! as a reason to leave or not to join a role, and must read trigger
//! headers whose names are the unreserved words AFTER and INSTEAD. Each
//! `control_*` test is the same layout that was already judged right.

use crate::support;

use super::audit_reach_leaving_roles::{deny, on_role};
use fencepost::audit::{Catalog, Finding, ObjectKind, Report, Securable};
use support::fixtures::*;

fn add_user(c: &mut Catalog, name: &str) {
    c.principals.push(user(name, Some(name)));
    c.permissions.push(grant(name, "CONNECT", Securable::Database));
}

fn write_path(report: &Report, who: &str) -> Option<String> {
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

// ---------------------------------------------------------------------
// Leaving denied roles (drops.rs)
// ---------------------------------------------------------------------

/// `u` holds UPDATE on fence.Resource and is in `d1` and `d2`, both denied
/// UPDATE on the fence schema, and in the harmless role `r`. `u` holds
/// ALTER on `d1`; `d1` holds ALTER on `d2`; `d2` holds ALTER on `r`.
/// Leaving `d1` first loses the right over `d2`; leaving `d2` first only
/// loses the right over `r`, which is not needed: `ALTER ROLE d2 DROP
/// MEMBER u` (ALTER through d1), reconnect, `ALTER ROLE d1 DROP MEMBER u`
/// (own ALTER), reconnect, UPDATE fence.Resource. `d1_first` lists the
/// membership in `d1` first.
fn two_denied_roles_each_drop_costs_a_right(d1_first: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    for r in ["d1", "d2", "r"] {
        c.principals.push(role(r));
    }
    let order = if d1_first { ["d1", "d2", "r"] } else { ["d2", "d1", "r"] };
    for r in order {
        c.memberships.push(member(r, "u"));
    }
    c.permissions.push(grant("u", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("d1", "UPDATE", schema("fence")));
    c.permissions.push(deny("d2", "UPDATE", schema("fence")));
    c.permissions.push(grant("u", "ALTER", on_role("d1")));
    c.permissions.push(grant("d1", "ALTER", on_role("d2")));
    c.permissions.push(grant("d2", "ALTER", on_role("r")));
    c
}

#[test]
fn leaving_order_d2_listed_first() {
    assert_writes(
        &two_denied_roles_each_drop_costs_a_right(false),
        "u",
        &["ALTER ROLE [d2] DROP MEMBER [u]", "ALTER ROLE [d1] DROP MEMBER [u]"],
    );
}

#[test]
fn leaving_order_d1_listed_first() {
    assert_writes(
        &two_denied_roles_each_drop_costs_a_right(true),
        "u",
        &["ALTER ROLE [d2] DROP MEMBER [u]", "ALTER ROLE [d1] DROP MEMBER [u]"],
    );
}

/// Control for the layout above: `u` may alter `d1` only, so it can
/// leave neither role in a way that keeps it out of both.
#[test]
fn leaving_order_control_no_right_over_d2() {
    let mut c = two_denied_roles_each_drop_costs_a_right(true);
    c.permissions.retain(|p| !(p.grantee == "d1" && p.on == on_role("d2")));
    assert_does_not_write(&c, "u");
}

// ---------------------------------------------------------------------
// DENYs of other permissions (drops.rs)
// ---------------------------------------------------------------------

/// `u` holds UPDATE on fence.Resource and is in `d0`, denied UPDATE on the
/// fence schema; `u` may add members to `j` (ALTER on it), and `j` holds
/// ALTER on `d0`. `j` is also denied something unrelated to the fence
/// (SELECT on dbo.Orders). `ALTER ROLE j ADD MEMBER u`, reconnect, `ALTER
/// ROLE d0 DROP MEMBER u`, reconnect: u writes. The DENY made to `j` has
/// nothing to do with the write ("DENY Object Permissions": a DENY refuses
/// the permission it names, on the securable it names).
fn joins_a_role_with_an_unrelated_deny(unrelated_deny: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    c.principals.push(role("j"));
    c.principals.push(role("d0"));
    c.objects.push(module("dbo", "Orders", ObjectKind::Table, ""));
    c.memberships.push(member("d0", "u"));
    c.permissions.push(grant("u", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("d0", "UPDATE", schema("fence")));
    c.permissions.push(grant("u", "ALTER", on_role("j")));
    c.permissions.push(grant("j", "ALTER", on_role("d0")));
    if unrelated_deny {
        c.permissions.push(deny("j", "SELECT", object("dbo", "Orders")));
    }
    c
}

#[test]
fn joining_a_role_with_an_unrelated_deny_still_lets_u_leave() {
    assert_writes(
        &joins_a_role_with_an_unrelated_deny(true),
        "u",
        &["ALTER ROLE [j] ADD MEMBER [u];", "ALTER ROLE [d0] DROP MEMBER [u];"],
    );
}

#[test]
fn control_joining_a_role_without_any_deny() {
    assert_writes(
        &joins_a_role_with_an_unrelated_deny(false),
        "u",
        &["ALTER ROLE [j] ADD MEMBER [u];", "ALTER ROLE [d0] DROP MEMBER [u];"],
    );
}

/// `u` holds UPDATE on fence.Resource; it is in `d0` (denied UPDATE on the
/// fence schema), in `x` (denied SELECT on dbo.Orders only) and in `h`.
/// `u` may alter `x`; `x` may alter `d0`; `d0` may alter `h`. Leaving `x`
/// is never needed, and costs the right over `d0`; leaving `d0` costs the
/// unneeded right over `h`. `ALTER ROLE d0 DROP MEMBER u` (x's ALTER), then
/// UPDATE. `x_first` lists u's membership in `x` first.
fn a_role_with_an_unrelated_deny_beside_the_denied_one(x_first: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    for r in ["d0", "x", "h"] {
        c.principals.push(role(r));
    }
    c.objects.push(module("dbo", "Orders", ObjectKind::Table, ""));
    let order = if x_first { ["x", "d0", "h"] } else { ["d0", "x", "h"] };
    for r in order {
        c.memberships.push(member(r, "u"));
    }
    c.permissions.push(grant("u", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("d0", "UPDATE", schema("fence")));
    c.permissions.push(deny("x", "SELECT", object("dbo", "Orders")));
    c.permissions.push(grant("u", "ALTER", on_role("x")));
    c.permissions.push(grant("x", "ALTER", on_role("d0")));
    c.permissions.push(grant("d0", "ALTER", on_role("h")));
    c
}

#[test]
fn unrelated_deny_role_listed_first_is_not_left_first() {
    assert_writes(
        &a_role_with_an_unrelated_deny_beside_the_denied_one(true),
        "u",
        &["ALTER ROLE [d0] DROP MEMBER [u]"],
    );
}

#[test]
fn control_unrelated_deny_role_listed_second() {
    assert_writes(
        &a_role_with_an_unrelated_deny_beside_the_denied_one(false),
        "u",
        &["ALTER ROLE [d0] DROP MEMBER [u]"],
    );
}

// ---------------------------------------------------------------------
// Trigger headers (trigger_header.rs)
// ---------------------------------------------------------------------

fn with_etl() -> Catalog {
    let mut c = clean();
    add_user(&mut c, "etl");
    c
}

fn trigger(name: &str, on: &str, definition: &str) -> fencepost::audit::Object {
    let mut t = module("dbo", name, ObjectKind::Trigger, definition);
    t.parent = Some(on.into());
    t
}

fn fence_writes(c: &Catalog, who: &str) -> Vec<Finding> {
    reaching(c, who)
        .into_iter()
        .filter(|f| f.permission.as_deref() == Some("write the fence tables"))
        .collect()
}

/// `etl` may INSERT into dbo.Orders (owned by dbo, as the fence tables
/// are); the AFTER INSERT trigger on it writes fence.Resource. AFTER and
/// INSTEAD are not reserved keywords ("Reserved Keywords (Transact-SQL)"),
/// so a trigger may be named After without brackets.
fn orders_with_trigger(table: &str, definition: &str) -> Catalog {
    let mut c = with_etl();
    c.objects.push(module("dbo", table, ObjectKind::Table, ""));
    c.objects.push(trigger("After", &format!("dbo.{table}"), definition));
    c.permissions.push(grant("etl", "INSERT", object("dbo", table)));
    c
}

#[test]
fn trigger_named_after_unbracketed_fires_on_insert() {
    let c = orders_with_trigger(
        "Orders",
        "CREATE TRIGGER After ON dbo.Orders AFTER INSERT AS UPDATE fence.Resource SET Generation = Generation + 1;",
    );
    assert_eq!(fence_writes(&c, "etl").len(), 1, "{:#?}", check(&c));
}

/// The table the trigger is on is named After (one part: a trigger is in
/// its table's schema).
#[test]
fn trigger_on_a_table_named_after_unbracketed_fires_on_insert() {
    let mut c = orders_with_trigger(
        "After",
        "CREATE TRIGGER dbo.OrdersAudit ON After AFTER INSERT AS UPDATE fence.Resource SET Generation = Generation + 1;",
    );
    c.objects.last_mut().unwrap().name = "OrdersAudit".into();
    assert_eq!(fence_writes(&c, "etl").len(), 1, "{:#?}", check(&c));
}

/// Control: the same trigger with a two-part name is found.
#[test]
fn control_trigger_two_part_name_is_found() {
    let c = orders_with_trigger(
        "Orders",
        "CREATE TRIGGER dbo.After ON dbo.Orders AFTER INSERT AS UPDATE fence.Resource SET Generation = Generation + 1;",
    );
    assert_eq!(fence_writes(&c, "etl").len(), 1, "{:#?}", check(&c));
}

/// dbo.LeaseView selects from fence.Resource; its INSTEAD OF INSERT
/// trigger, named After without brackets, writes dbo.Log only. `etl` may
/// INSERT into the view only: the trigger runs in place of the insert
/// ("CREATE TRIGGER": INSTEAD OF), so fence.Resource is never written.
#[test]
fn instead_of_trigger_named_after_keeps_the_insert_off_the_base_table() {
    let mut c = with_etl();
    c.objects.push(module(
        "dbo",
        "LeaseView",
        ObjectKind::View,
        "CREATE VIEW dbo.LeaseView AS SELECT ResourceId, Owner FROM fence.Resource;",
    ));
    c.objects.push(module("dbo", "Log", ObjectKind::Table, ""));
    c.objects.push(trigger(
        "After",
        "dbo.LeaseView",
        "CREATE TRIGGER After ON dbo.LeaseView INSTEAD OF INSERT AS INSERT INTO dbo.Log (Id) SELECT ResourceId FROM inserted;",
    ));
    c.permissions.push(grant("etl", "INSERT", object("dbo", "LeaseView")));
    let w = fence_writes(&c, "etl");
    assert!(w.is_empty(), "{w:#?}");
}

/// Control: the same trigger named dbo.Redirect keeps etl clean.
#[test]
fn control_instead_of_trigger_two_part_name_keeps_insert_off() {
    let mut c = with_etl();
    c.objects.push(module(
        "dbo",
        "LeaseView",
        ObjectKind::View,
        "CREATE VIEW dbo.LeaseView AS SELECT ResourceId, Owner FROM fence.Resource;",
    ));
    c.objects.push(module("dbo", "Log", ObjectKind::Table, ""));
    c.objects.push(trigger(
        "Redirect",
        "dbo.LeaseView",
        "CREATE TRIGGER dbo.Redirect ON dbo.LeaseView INSTEAD OF INSERT AS INSERT INTO dbo.Log (Id) SELECT ResourceId FROM inserted;",
    ));
    c.permissions.push(grant("etl", "INSERT", object("dbo", "LeaseView")));
    let w = fence_writes(&c, "etl");
    assert!(w.is_empty(), "{w:#?}");
}
