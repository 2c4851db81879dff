//! The code a lent write reaches beyond its own text: one-part calls
//! resolved for the context they run in ("Qualifying Names Inside Stored
//! Procedures"), triggers a signed module's write fires ("ADD SIGNATURE":
//! a signature's rights carry into a trigger only when it is countersigned
//! with the same key), writes through a view of another owner ("Ownership
//! Chains": the chain breaks at the base, which is checked too) and EXECUTE
//! AS USER inside a module, which a DENY of IMPERSONATE stops. Each layout
//! with a control of the same shape.

use crate::support;

use super::audit_reach_leaving_roles::{deny, on_role};
use super::audit_reach_lending_modules::{WRITE, named_for, no_login, reached, table, with_etl};
use fencepost::audit::{Catalog, Object, ObjectKind, Schema, SigningKey};
use support::fixtures::*;

const BUMP: &str = "UPDATE fence.Resource SET Generation = Generation + 1;";

/// `etl` may run ops.Fix (ops_owner's), whose text is `text`.
fn with_fix(text: &str) -> Catalog {
    let mut c = with_etl();
    for p in ["maint", "ops_owner"] {
        c.principals.push(no_login(p));
    }
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    c.objects.push(module("ops", "Fix", ObjectKind::Procedure, text));
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c
}

/// A trigger on `on` for INSERT that runs as its caller and bumps the fence.
fn bumping_trigger(schema_name: &str, name: &str, on: &str) -> Object {
    let mut t = module(
        schema_name,
        name,
        ObjectKind::Trigger,
        &format!("CREATE TRIGGER {schema_name}.{name} ON {on} AFTER INSERT AS {BUMP}"),
    );
    t.parent = Some(on.into());
    t
}

/// ops.Fix WITH EXECUTE AS maint (a writer, default schema `default`) runs
/// `EXEC Step`; ops.Step bumps the fence.
fn one_part_call(default: Option<&str>) -> Catalog {
    let mut c = with_fix("CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS EXEC Step;");
    object_mut(&mut c, "ops.Fix").execute_as = Some("maint".into());
    c.objects.push(module(
        "ops",
        "Step",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.Step AS {BUMP}"),
    ));
    let maint = c.principals.iter_mut().find(|p| p.name == "maint").unwrap();
    maint.default_schema = default.map(str::to_string);
    c.memberships.push(member("db_datawriter", "maint"));
    c
}

#[test]
fn a_one_part_call_runs_the_procedure_of_the_context_users_default_schema() {
    reached(&one_part_call(Some("ops")), "etl", WRITE, &["runs ops.Step"]);
}

#[test]
fn control_a_one_part_call_that_resolves_in_dbo_does_not_run_ops_step() {
    let c = one_part_call(None);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// ops.Fix, signed by CERTIFICATE::Writer (user cert_runner, a writer),
/// inserts into ops.Orders, whose trigger runs as its caller and bumps the
/// fence; the trigger is countersigned with Writer or not.
fn signed_write_fires(countersigned: bool) -> Catalog {
    let mut c = with_fix("CREATE PROCEDURE ops.Fix @Id bigint AS INSERT INTO ops.Orders (Id) VALUES (@Id);");
    c.principals.push(no_login("cert_runner"));
    c.memberships.push(member("db_datawriter", "cert_runner"));
    c.signing_keys = Some(vec![SigningKey {
        key: "CERTIFICATE".into(),
        name: "Writer".into(),
        owner: Some("dbo".into()),
        user: Some("cert_runner".into()),
        login: None,
        private_key: Some(false),
    }]);
    object_mut(&mut c, "ops.Fix").signed_by = vec!["CERTIFICATE::Writer".into()];
    c.objects.push(table("ops", "Orders"));
    let mut t = bumping_trigger("ops", "OrdersBump", "ops.Orders");
    if countersigned {
        t.counter_signed_by = vec!["CERTIFICATE::Writer".into()];
    }
    c.objects.push(t);
    c
}

#[test]
fn a_signed_write_fires_a_countersigned_trigger_with_the_signatures_rights() {
    reached(
        &signed_write_fires(true),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "which fires ops.OrdersBump"],
    );
}

#[test]
fn control_a_trigger_not_countersigned_runs_with_its_callers_rights_alone() {
    let c = signed_write_fires(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// ops.Fix WITH EXECUTE AS maint inserts through work.OrdersView (of
/// work_owner, over ops.Orders, so the chain breaks at the table); maint
/// may insert through the view, and into the table or not. The table's
/// trigger runs as its caller, maint, a writer.
fn write_through_a_foreign_view(on_base: bool) -> Catalog {
    let mut c = with_fix(
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS INSERT INTO work.OrdersView (Id) VALUES (@Id);",
    );
    object_mut(&mut c, "ops.Fix").execute_as = Some("maint".into());
    c.principals.push(no_login("work_owner"));
    c.schemas.push(Schema {
        name: "work".into(),
        owner: "work_owner".into(),
    });
    c.objects.push(table("ops", "Orders"));
    c.objects.push(module(
        "work",
        "OrdersView",
        ObjectKind::View,
        "CREATE VIEW work.OrdersView AS SELECT Id FROM ops.Orders;",
    ));
    c.objects.push(bumping_trigger("ops", "OrdersBump", "ops.Orders"));
    c.permissions
        .push(grant("maint", "INSERT", object("work", "OrdersView")));
    if on_base {
        c.permissions.push(grant("maint", "INSERT", object("ops", "Orders")));
    }
    c.permissions
        .push(grant("maint", "UPDATE", object("fence", "Resource")));
    c
}

#[test]
fn a_write_through_a_view_of_another_owner_fires_the_base_tables_trigger_when_the_base_passes() {
    reached(
        &write_through_a_foreign_view(true),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

#[test]
fn control_the_same_write_refused_on_the_base_fires_nothing() {
    let c = write_through_a_foreign_view(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// ops.Fix WITH EXECUTE AS maint switches to writer (a writer) by EXECUTE
/// AS USER; maint holds IMPERSONATE on writer through a role, and may be
/// denied it itself.
fn switch_denied(denied: bool) -> Catalog {
    let mut c = with_fix(&format!(
        "CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS EXECUTE AS USER = 'writer'; {BUMP} REVERT;"
    ));
    object_mut(&mut c, "ops.Fix").execute_as = Some("maint".into());
    c.principals.push(no_login("writer"));
    c.principals.push(role("switchers"));
    c.memberships.push(member("db_datawriter", "writer"));
    c.memberships.push(member("switchers", "maint"));
    c.permissions.push(grant("switchers", "IMPERSONATE", on_role("writer")));
    if denied {
        c.permissions.push(deny("maint", "IMPERSONATE", on_role("writer")));
    }
    c
}

#[test]
fn execute_as_user_held_through_a_role_switches_a_lending_module() {
    reached(
        &switch_denied(false),
        "etl",
        WRITE,
        &["then switches to writer (EXECUTE AS USER = 'writer')"],
    );
}

#[test]
fn control_a_deny_of_impersonate_to_the_module_user_stops_the_switch() {
    let c = switch_denied(true);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}
