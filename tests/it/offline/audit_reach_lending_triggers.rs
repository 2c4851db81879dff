//! DML triggers that lend whoever fires them exactly their own write.
//! "CREATE TRIGGER": a DML trigger may be created WITH EXECUTE AS, and its
//! statements then run as that user ("EXECUTE AS Clause"); "ADD SIGNATURE"
//! signs a DML trigger as it signs a procedure, and "Module Signing" adds
//! the rights of the certificate's user while it runs. A trigger runs when
//! a statement it is defined for changes its table, so whoever may make
//! that statement makes the trigger's write with those rights, and nothing
//! else that user may do.
//!
//! Each layout has a control of the same shape that stays clean.

use crate::support;

use super::audit_reach_lending_modules::{WRITE, named_for, no_login, reached, with_etl};
use fencepost::audit::{Catalog, Object, ObjectKind, Schema, SigningKey};
use support::fixtures::*;

const SYNC: &str = "CREATE TRIGGER ops.Orders_Sync ON ops.Orders WITH EXECUTE AS 'maint' AFTER UPDATE AS \
     UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceId IN (SELECT Id FROM inserted);";

/// ops.Orders, a table owned by ops_owner (so nothing chains to the fence,
/// owned by dbo), with the trigger `text` on it running as maint, a user
/// without login in db_datawriter when `maint_writes`; etl holds `right` on
/// ops.Orders.
fn trigger_as_maint(text: &str, maint_writes: bool, right: &str) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("maint"));
    c.principals.push(no_login("ops_owner"));
    if maint_writes {
        c.memberships.push(member("db_datawriter", "maint"));
    }
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    c.objects.push(Object {
        definition: None,
        ..module("ops", "Orders", ObjectKind::Table, "")
    });
    let mut t = module("ops", "Orders_Sync", ObjectKind::Trigger, text);
    t.parent = Some("ops.Orders".into());
    t.execute_as = Some("maint".into());
    c.objects.push(t);
    c.permissions.push(grant("etl", right, object("ops", "Orders")));
    c
}

/// "CREATE TRIGGER" / "EXECUTE AS Clause": an UPDATE of ops.Orders fires
/// ops.Orders_Sync, whose statements run as maint; maint may update
/// fence.Resource, so etl's UPDATE on ops.Orders writes the fence.
#[test]
fn a_write_firing_a_trigger_with_execute_as_a_writer_writes_the_fence() {
    let c = trigger_as_maint(SYNC, true, "UPDATE");
    reached(&c, "etl", WRITE, &["UPDATE on ops.Orders", "ops.Orders_Sync", "maint"]);
}

#[test]
fn control_a_reader_of_the_table_does_not_fire_a_lending_trigger() {
    let c = trigger_as_maint(SYNC, true, "SELECT");
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// The trigger fires AFTER UPDATE only: an INSERT does not run it.
#[test]
fn control_a_right_the_lending_trigger_does_not_fire_for_lends_nothing() {
    let c = trigger_as_maint(SYNC, true, "INSERT");
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn control_a_trigger_running_as_a_user_without_write_rights_lends_nothing() {
    let c = trigger_as_maint(SYNC, false, "UPDATE");
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// A disabled trigger fires for no one.
#[test]
fn control_a_disabled_lending_trigger_lends_nothing() {
    let mut c = trigger_as_maint(SYNC, true, "UPDATE");
    object_mut(&mut c, "ops.Orders_Sync").disabled = true;
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// "ADD SIGNATURE" signs DML triggers too: ops.Orders_Sync, without
/// EXECUTE AS, signed with the certificate Writer whose user cert_writer
/// is in db_datawriter when `writes`.
fn signed_trigger(writes: bool, right: &str) -> Catalog {
    let mut c = trigger_as_maint(&SYNC.replace(" WITH EXECUTE AS 'maint'", ""), false, right);
    object_mut(&mut c, "ops.Orders_Sync").execute_as = None;
    c.principals.push(no_login("cert_writer"));
    if writes {
        c.memberships.push(member("db_datawriter", "cert_writer"));
    }
    c.signing_keys = Some(vec![SigningKey {
        key: "CERTIFICATE".into(),
        name: "Writer".into(),
        owner: Some("dbo".into()),
        user: Some("cert_writer".into()),
        login: None,
        private_key: Some(false),
    }]);
    object_mut(&mut c, "ops.Orders_Sync").signed_by = vec!["CERTIFICATE::Writer".into()];
    c
}

#[test]
fn a_write_firing_a_trigger_signed_by_a_writer_certificate_writes_the_fence() {
    let c = signed_trigger(true, "UPDATE");
    reached(
        &c,
        "etl",
        WRITE,
        &["UPDATE on ops.Orders", "ops.Orders_Sync", "cert_writer"],
    );
}

#[test]
fn control_a_write_firing_a_trigger_signed_by_a_certificate_whose_user_may_not_write_lends_nothing() {
    let c = signed_trigger(false, "UPDATE");
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn control_a_delete_does_not_fire_a_signed_update_trigger() {
    let c = signed_trigger(true, "DELETE");
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// The trigger's statements run as maint, and so does the procedure it
/// runs ("EXECUTE AS Clause"): work.Bump, owned by work_owner, which maint
/// may run, updates fence.Resource, which maint may update.
fn trigger_calling_bump(maint_runs: bool) -> Catalog {
    let mut c = trigger_as_maint(
        "CREATE TRIGGER ops.Orders_Sync ON ops.Orders WITH EXECUTE AS 'maint' AFTER UPDATE AS EXEC work.Bump @Id = 1;",
        true,
        "UPDATE",
    );
    c.principals.push(no_login("work_owner"));
    c.schemas.push(Schema {
        name: "work".into(),
        owner: "work_owner".into(),
    });
    c.objects.push(module(
        "work",
        "Bump",
        ObjectKind::Procedure,
        "CREATE PROCEDURE work.Bump @Id bigint AS \
         UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    ));
    if maint_runs {
        c.permissions.push(grant("maint", "EXECUTE", object("work", "Bump")));
    }
    c
}

#[test]
fn a_write_firing_a_trigger_with_execute_as_that_runs_a_writer_writes_the_fence() {
    let c = trigger_calling_bump(true);
    reached(
        &c,
        "etl",
        WRITE,
        &["UPDATE on ops.Orders", "ops.Orders_Sync", "work.Bump"],
    );
}

#[test]
fn control_a_trigger_with_execute_as_that_runs_what_its_user_may_not_run_lends_nothing() {
    let c = trigger_calling_bump(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// "ALTER TABLE (Transact-SQL)": SWITCH moves a table's rows out, needing
/// ALTER on both tables; "DROP TABLE": dropping needs ALTER on its schema
/// or CONTROL. A trigger WITH EXECUTE AS 'maint' (db_ddladmin's ALTER ANY
/// SCHEMA) whose only statement is such DDL on fence.Resource lends it to
/// whoever fires it, though its text has no data statement.
#[test]
fn a_trigger_whose_only_statement_switches_or_drops_a_fence_table_lends_it() {
    for ddl in [
        "ALTER TABLE fence.Resource SWITCH TO ops.Old;",
        "DROP TABLE fence.Resource;",
    ] {
        let mut c = trigger_as_maint(
            &format!("CREATE TRIGGER ops.Orders_Sync ON ops.Orders WITH EXECUTE AS 'maint' AFTER UPDATE AS {ddl}"),
            false,
            "UPDATE",
        );
        c.memberships.push(member("db_ddladmin", "maint"));
        reached(&c, "etl", WRITE, &["UPDATE on ops.Orders", "ops.Orders_Sync"]);
    }
}

#[test]
fn control_the_same_ddl_trigger_running_as_a_user_without_alter_lends_nothing() {
    let c = trigger_as_maint(
        "CREATE TRIGGER ops.Orders_Sync ON ops.Orders WITH EXECUTE AS 'maint' AFTER UPDATE AS \
         ALTER TABLE fence.Resource SWITCH TO ops.Old;",
        false,
        "UPDATE",
    );
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}
