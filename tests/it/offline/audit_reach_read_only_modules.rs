//! A module that only reads a table whose trigger writes the fence: the
//! trigger fires on writes, never on reads ("CREATE TRIGGER": DML triggers
//! fire on INSERT, UPDATE or DELETE), so EXECUTE on it reaches nothing. A
//! module whose text holds a data statement, or runs SQL built at run time,
//! is still followed whatever it names: telling which table an aliased
//! UPDATE writes from the text alone would risk missing a write.

use crate::support;

use fencepost::audit::{Catalog, ObjectKind, Securable};
use support::fixtures::*;

const ORDERS_TRIGGER: &str =
    "CREATE TRIGGER dbo.Orders_Insert ON dbo.Orders AFTER INSERT AS UPDATE fence.Resource SET Generation = 0;";

/// `etl`, allowed EXECUTE on `dbo.Report` whose text is `body`, beside a
/// trigger on `dbo.Orders` that writes the fence.
fn layout(body: &str) -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    let mut trigger = module("dbo", "Orders_Insert", ObjectKind::Trigger, ORDERS_TRIGGER);
    trigger.parent = Some("dbo.Orders".into());
    c.objects.push(trigger);
    c.objects.push(module(
        "dbo",
        "Report",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE dbo.Report AS {body}"),
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "Report")));
    c
}

fn writes(c: &Catalog) -> bool {
    reaching(c, "etl")
        .iter()
        .any(|f| f.permission.as_deref() == Some("write the fence tables"))
}

#[test]
fn a_procedure_that_only_reads_a_triggered_table_reaches_nothing() {
    let c = layout("SELECT COUNT(*) FROM dbo.Orders WHERE Id > 0;");
    assert!(!writes(&c), "{:#?}", check(&c));
    // Words in comments are no statements.
    let c = layout("-- INSERT INTO dbo.Orders is done elsewhere\nSELECT Id FROM dbo.Orders;");
    assert!(!writes(&c), "{:#?}", check(&c));
}

#[test]
fn a_procedure_that_writes_a_triggered_table_by_an_alias_still_reaches_the_fence() {
    let c = layout("INSERT INTO dbo.Orders (Id) SELECT 1;");
    assert!(writes(&c), "{:#?}", check(&c));
    let c = layout("UPDATE o SET Id = Id FROM dbo.Orders o;");
    assert!(writes(&c), "{:#?}", check(&c));
    let c = layout(
        "MERGE dbo.Orders AS o USING (SELECT 1 AS Id) AS s ON o.Id = s.Id WHEN NOT MATCHED THEN INSERT (Id) VALUES (s.Id);",
    );
    assert!(writes(&c), "{:#?}", check(&c));
}

#[test]
fn a_procedure_that_reads_a_triggered_table_and_runs_dynamic_sql_is_still_followed() {
    let c = layout("SELECT Id FROM dbo.Orders; EXEC (N'SELECT 1');");
    assert!(writes(&c), "{:#?}", check(&c));
}
