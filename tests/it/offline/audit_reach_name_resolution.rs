//! How `check` resolves the names a module's text uses, on layouts written
//! from "Qualifying Names Inside Stored Procedures" (for EXECUTE, DDL and
//! dynamic SQL an unqualified name resolves first in the default schema of
//! the caller or the EXECUTE AS user, then dbo; other one-part names in the
//! module's own schema, then dbo), "ALTER USER" (users can change their own
//! default schema), "Synonyms (Database Engine)" (a synonym may stand for a
//! procedure; EXECUTE through it runs the base object), "SELECT - column
//! alias" (an alias is no object reference) and "ALTER AUTHORIZATION" with
//! "ALTER ROLE" (taking a schema past a DENY the taker drops first). Each
//! finding has a control of the same shape.

use crate::support;

use super::audit_reach_column_denies::rules_naming;
use super::audit_reach_leaving_roles::{deny, on_role};
use fencepost::audit::{Catalog, Finding, ObjectKind, Report};
use support::fixtures::*;

fn with_etl() -> Catalog {
    let mut c = clean();
    add_user(&mut c, "etl");
    c
}

fn add_user(c: &mut Catalog, name: &str) {
    c.principals.push(user(name, Some(name)));
    c.permissions
        .push(grant(name, "CONNECT", fencepost::audit::Securable::Database));
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

fn write_path(report: &Report, who: &str) -> Option<String> {
    report
        .findings
        .iter()
        .filter(|f| f.principal.as_deref() == Some(who))
        .map(|f| step_texts(f).join(" | "))
        .find(|steps| steps.contains("on fence."))
}

/// Every step of the findings naming `who`.
fn steps_naming(report: &Report, who: &str) -> String {
    report
        .findings
        .iter()
        .filter(|f| f.principal.as_deref() == Some(who))
        .map(|f| step_texts(f).join(" | "))
        .collect::<Vec<_>>()
        .join(" || ")
}

// ---------------------------------------------------------------------
// One-part names in EXECUTE inside a module resolve against the caller
// ---------------------------------------------------------------------

/// dbo.Unstick (owned by dbo, as fence_admin's procedures are) runs `EXEC
/// ForceRelease` by one part: the name resolves in the default schema of
/// whoever runs it, then dbo. `etl`, granted EXECUTE on dbo.Unstick, has
/// fence_admin as its default schema or sets it, and the chain runs
/// fence_admin.ForceRelease unchecked.
fn one_part_exec_wrapper(default_schema: Option<&str>) -> Catalog {
    let mut c = with_etl();
    c.principals
        .iter_mut()
        .find(|p| p.name == "etl")
        .unwrap()
        .default_schema = default_schema.map(Into::into);
    c.objects.push(module(
        "dbo",
        "Unstick",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Unstick @Key nvarchar(300) AS EXEC ForceRelease @ResourceKey = @Key;",
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "Unstick")));
    c
}

#[test]
fn one_part_exec_with_caller_default_schema_fence_admin() {
    let c = one_part_exec_wrapper(Some("fence_admin"));
    let report = check(&c);
    assert!(!rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

#[test]
fn one_part_exec_caller_may_set_own_default_schema() {
    let c = one_part_exec_wrapper(Some("dbo"));
    let report = check(&c);
    assert!(!rules_naming(&report, "etl").is_empty(), "{report:#?}");
    let steps = steps_naming(&report, "etl");
    assert!(steps.contains("DEFAULT_SCHEMA"), "{steps}");
}

/// Control: the two-part call is found.
#[test]
fn control_two_part_exec_is_found() {
    let mut c = one_part_exec_wrapper(Some("dbo"));
    c.objects.last_mut().unwrap().definition = Some(
        "CREATE PROCEDURE dbo.Unstick @Key nvarchar(300) AS EXEC fence_admin.ForceRelease @ResourceKey = @Key;".into(),
    );
    let report = check(&c);
    assert!(!rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

/// The same one-part EXEC in an AFTER INSERT trigger on dbo.Orders: a
/// trigger without EXECUTE AS runs as the caller, so the name resolves in
/// the default schema of whoever inserts.
#[test]
fn one_part_exec_in_a_trigger_resolves_against_the_inserter() {
    let mut c = with_etl();
    c.principals
        .iter_mut()
        .find(|p| p.name == "etl")
        .unwrap()
        .default_schema = Some("fence_admin".into());
    c.objects.push(module("dbo", "Orders", ObjectKind::Table, ""));
    c.objects.push(trigger(
        "OrdersRelease",
        "dbo.Orders",
        "CREATE TRIGGER dbo.OrdersRelease ON dbo.Orders AFTER INSERT AS EXEC ForceRelease @ResourceKey = N'k';",
    ));
    c.permissions.push(grant("etl", "INSERT", object("dbo", "Orders")));
    let report = check(&c);
    assert!(!rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

// ---------------------------------------------------------------------
// Synonyms for a fence_admin procedure
// ---------------------------------------------------------------------

/// dbo.Unstick runs `EXEC dbo.Release`, a synonym whose base object is
/// fence_admin.ForceRelease, by two parts or by three naming this database.
fn synonym_wrapper(base: &str) -> Catalog {
    let mut c = with_etl();
    c.objects.push(module("dbo", "Release", ObjectKind::Synonym, base));
    c.objects.push(module(
        "dbo",
        "Unstick",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Unstick @Key nvarchar(300) AS EXEC dbo.Release @ResourceKey = @Key;",
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "Unstick")));
    c
}

#[test]
fn wrapper_over_a_synonym_for_an_admin_procedure() {
    let c = synonym_wrapper("[fence_admin].[ForceRelease]");
    let report = check(&c);
    assert!(!rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

#[test]
fn wrapper_over_a_three_part_synonym_for_an_admin_procedure() {
    let c = synonym_wrapper("[orders].[fence_admin].[ForceRelease]");
    let report = check(&c);
    assert!(!rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

/// Control: a synonym for a procedure outside fence_admin hands etl
/// nothing.
#[test]
fn control_wrapper_over_a_synonym_for_another_procedure() {
    let mut c = synonym_wrapper("[dbo].[Harmless]");
    c.objects.push(module(
        "dbo",
        "Harmless",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Harmless @ResourceKey nvarchar(300) AS SELECT 1;",
    ));
    let report = check(&c);
    assert!(rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

// ---------------------------------------------------------------------
// One-part names falling back to dbo, and column aliases
// ---------------------------------------------------------------------

/// app.Reset (schema app owned by dbo) runs `UPDATE Leases` by one part;
/// app has no Leases, dbo.Leases is a synonym for fence.Resource: inside a
/// module a one-part name resolves in the module's schema, then dbo.
fn one_part_update_in_app(app_has_its_own: bool) -> Catalog {
    let mut c = with_etl();
    if !c.schemas.iter().any(|s| s.name == "app") {
        let mut app = c.schemas.iter().find(|s| s.name == "dbo").unwrap().clone();
        app.name = "app".into();
        app.owner = "dbo".into();
        c.schemas.push(app);
    }
    c.objects
        .push(module("dbo", "Leases", ObjectKind::Synonym, "[fence].[Resource]"));
    if app_has_its_own {
        c.objects.push(module("app", "Leases", ObjectKind::Table, ""));
    }
    c.objects.push(module(
        "app",
        "Reset",
        ObjectKind::Procedure,
        "CREATE PROCEDURE app.Reset AS UPDATE Leases SET Generation = 0;",
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("app", "Reset")));
    c
}

#[test]
fn one_part_name_in_another_schema_falls_back_to_a_dbo_synonym() {
    let c = one_part_update_in_app(false);
    assert_eq!(fence_writes(&c, "etl").len(), 1, "{:#?}", check(&c));
}

/// Control: app.Leases exists, so the one-part name is app's own table.
#[test]
fn control_one_part_name_in_another_schema_finds_its_own_table_first() {
    let c = one_part_update_in_app(true);
    let w = fence_writes(&c, "etl");
    assert!(w.is_empty(), "{w:#?}");
}

/// dbo.Leases is a synonym for fence.Resource. dbo.OrderStats, granted to
/// `etl`, only counts orders and names its column Leases: a column alias is
/// no object reference, so running it writes nothing.
#[test]
fn a_column_alias_named_like_a_synonym_is_no_reference() {
    let mut c = with_etl();
    c.objects
        .push(module("dbo", "Leases", ObjectKind::Synonym, "[fence].[Resource]"));
    c.objects.push(module("dbo", "Orders", ObjectKind::Table, ""));
    c.objects.push(module(
        "dbo",
        "OrderStats",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.OrderStats AS SELECT COUNT(*) AS Leases FROM dbo.Orders;",
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "OrderStats")));
    let w = fence_writes(&c, "etl");
    assert!(w.is_empty(), "{w:#?}");
}

/// Control: the procedure updating the synonym by one part is found.
#[test]
fn control_one_part_synonym_update_is_found() {
    let mut c = with_etl();
    c.objects
        .push(module("dbo", "Leases", ObjectKind::Synonym, "[fence].[Resource]"));
    c.objects.push(module(
        "dbo",
        "OrderStats",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.OrderStats AS UPDATE Leases SET Generation = 0;",
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "OrderStats")));
    assert_eq!(fence_writes(&c, "etl").len(), 1, "{:#?}", check(&c));
}

// ---------------------------------------------------------------------
// TAKE OWNERSHIP past a DENY the holder itself drops
// ---------------------------------------------------------------------

/// `u` holds TAKE OWNERSHIP on the fence schema and is in `d`, denied TAKE
/// OWNERSHIP on it; `u` holds ALTER on `d`. The way past is `ALTER ROLE [d]
/// DROP MEMBER [u]`, reconnect, `ALTER AUTHORIZATION ON SCHEMA::fence TO
/// u`: the printed path names the DROP MEMBER. Without ALTER on `d` (the
/// control) `u` stays refused.
fn taking_past_a_deny(may_alter_d: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    c.principals.push(role("d"));
    c.memberships.push(member("d", "u"));
    c.permissions.push(grant("u", "TAKE OWNERSHIP", schema("fence")));
    c.permissions.push(deny("d", "TAKE OWNERSHIP", schema("fence")));
    if may_alter_d {
        c.permissions.push(grant("u", "ALTER", on_role("d")));
    }
    c
}

#[test]
fn taking_the_schema_past_a_deny_the_holder_drops_names_the_drop() {
    let report = check(&taking_past_a_deny(true));
    let path = write_path(&report, "u").unwrap_or_else(|| panic!("no finding for u: {report:#?}"));
    assert!(path.contains("ALTER ROLE [d] DROP MEMBER [u]"), "{path}");
}

#[test]
fn control_taking_the_schema_past_a_deny_the_holder_cannot_drop() {
    let report = check(&taking_past_a_deny(false));
    assert!(write_path(&report, "u").is_none(), "{report:#?}");
}

// ---------------------------------------------------------------------
// One-part names in DDL inside a module resolve against the EXECUTE AS user
// ---------------------------------------------------------------------

/// dbo.Purge runs `TRUNCATE TABLE Resource` WITH EXECUTE AS 'janitor', a
/// user holding ALTER on the fence schema (TRUNCATE TABLE needs ALTER on the
/// table) whose default schema is `janitor_schema`. "Qualifying Names Inside
/// Stored Procedures": a DDL statement's one-part name resolves in the
/// default schema of the EXECUTE AS user, then dbo. `etl` may EXECUTE
/// dbo.Purge.
fn one_part_truncate_as(janitor_schema: &str) -> Catalog {
    let mut c = with_etl();
    let mut janitor = user("janitor", None);
    janitor.default_schema = Some(janitor_schema.into());
    c.principals.push(janitor);
    c.permissions.push(grant("janitor", "ALTER", schema("fence")));
    let mut purge = module(
        "dbo",
        "Purge",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Purge WITH EXECUTE AS 'janitor' AS TRUNCATE TABLE Resource;",
    );
    purge.execute_as = Some("janitor".into());
    c.objects.push(purge);
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "Purge")));
    c
}

#[test]
fn a_one_part_truncate_resolves_in_the_execute_as_users_default_schema() {
    let c = one_part_truncate_as("fence");
    let report = check(&c);
    let steps = steps_naming(&report, "etl");
    assert!(steps.contains("dbo.Purge writes fence.Resource"), "{report:#?}");
}

/// Control: the EXECUTE AS user's default schema is dbo, which has no
/// Resource: the TRUNCATE names no fence table.
#[test]
fn control_a_one_part_truncate_as_a_user_of_another_default_schema_names_no_fence_table() {
    let c = one_part_truncate_as("dbo");
    let report = check(&c);
    assert!(rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

/// Control: the two-part TRUNCATE is found whatever the default schema.
#[test]
fn control_a_two_part_truncate_as_a_user_holding_alter_is_found() {
    let mut c = one_part_truncate_as("dbo");
    c.objects.last_mut().unwrap().definition =
        Some("CREATE PROCEDURE dbo.Purge WITH EXECUTE AS 'janitor' AS TRUNCATE TABLE fence.Resource;".into());
    let report = check(&c);
    assert!(
        steps_naming(&report, "etl").contains("dbo.Purge writes fence.Resource"),
        "{report:#?}"
    );
}
