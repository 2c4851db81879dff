//! DDL a lending module makes on a fence table. "DROP TABLE": it needs
//! ALTER on the table's schema or CONTROL on the table; "ALTER TABLE":
//! SWITCH moves every row of a table (or partition) to another, with ALTER
//! on both; "TRUNCATE TABLE": ALTER on the table. A module WITH EXECUTE AS a
//! principal holding those rights lends its caller that change of the
//! fence's rows. "Ownership Chains": chaining skips the permission checks
//! of data statements only, never of DDL, so a callee owned as the fence
//! tables are lends no TRUNCATE by its owner. Each layout with a control of
//! the same shape.

use crate::support;

use super::audit_reach_lending_modules::{WRITE, named_for, no_login, reached, with_etl};
use fencepost::audit::{Catalog, Object, ObjectKind, Schema};
use support::fixtures::*;

/// `etl` may run ops.Fix (ops_owner's) WITH EXECUTE AS maint, whose
/// statements are `body`.
fn lending(body: &str) -> Catalog {
    let mut c = with_etl();
    for p in ["maint", "ops_owner"] {
        c.principals.push(no_login(p));
    }
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    let mut m = module(
        "ops",
        "Fix",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS {body}"),
    );
    m.execute_as = Some("maint".into());
    c.objects.push(m);
    c.objects.push(Object {
        definition: None,
        ..module("ops", "Stash", ObjectKind::Table, "")
    });
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c
}

#[test]
fn a_lent_drop_table_of_a_fence_table_is_named() {
    let mut c = lending("DROP TABLE fence.Resource;");
    c.permissions.push(grant("maint", "ALTER", schema("fence")));
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix", "fence.Resource"]);
}

#[test]
fn control_a_lent_drop_table_by_a_principal_without_rights_on_the_fence_names_no_one() {
    let mut c = lending("DROP TABLE fence.Resource;");
    c.permissions.push(grant("maint", "ALTER", schema("ops")));
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn a_lent_switch_out_of_a_fence_table_is_named() {
    let mut c = lending("ALTER TABLE fence.Resource SWITCH TO ops.Stash;");
    c.permissions
        .push(grant("maint", "CONTROL", object("fence", "Resource")));
    c.permissions.push(grant("maint", "ALTER", object("ops", "Stash")));
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix", "fence.Resource"]);
}

#[test]
fn control_a_lent_switch_by_a_principal_with_rights_on_the_target_alone_names_no_one() {
    let mut c = lending("ALTER TABLE fence.Resource SWITCH TO ops.Stash;");
    c.permissions.push(grant("maint", "ALTER", object("ops", "Stash")));
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// ops.Fix, as maint (who may run dbo.Wipe and holds nothing on the
/// fence), runs dbo.Wipe, owned by dbo as the fence tables are, whose
/// statement is `statement`.
fn chained_callee(statement: &str) -> Catalog {
    let mut c = lending("EXEC dbo.Wipe;");
    c.objects.push(module(
        "dbo",
        "Wipe",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE dbo.Wipe AS {statement}"),
    ));
    c.permissions.push(grant("maint", "EXECUTE", object("dbo", "Wipe")));
    c
}

#[test]
fn a_chained_callees_delete_is_lent() {
    reached(
        &chained_callee("DELETE FROM fence.Resource;"),
        "etl",
        WRITE,
        &["runs dbo.Wipe"],
    );
}

#[test]
fn control_a_chained_callees_truncate_is_checked_against_the_lender_and_names_no_one() {
    let c = chained_callee("TRUNCATE TABLE fence.Resource;");
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}
