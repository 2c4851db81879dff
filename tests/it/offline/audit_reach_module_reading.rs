//! How `check` reads module text that leads to a fence table, on layouts
//! written from "Modify Data Through a View" (aggregates, GROUP BY,
//! DISTINCT, UNION make a view's columns read-only; a delimited identifier
//! is a name, never a keyword: "Database Identifiers"), "CREATE TRIGGER"
//! (the header lists `WITH EXECUTE AS`, then FOR | AFTER | INSTEAD OF and
//! its events, anywhere on its lines; every trigger on a table fires; an
//! INSTEAD OF trigger runs in place of the statement) and each with a
//! control of the same shape that stays clean.

use crate::support;

use fencepost::audit::{Catalog, Finding, ObjectKind, Securable};
use support::fixtures::*;

pub(super) fn with_etl() -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    c
}

pub(super) fn trigger(name: &str, on: &str, definition: &str) -> fencepost::audit::Object {
    let mut t = module("dbo", name, ObjectKind::Trigger, definition);
    t.parent = Some(on.into());
    t
}

pub(super) fn writes(c: &Catalog) -> Vec<Finding> {
    reaching(c, "etl")
        .into_iter()
        .filter(|f| f.permission.as_deref() == Some("write the fence tables"))
        .collect()
}

/// `etl` granted UPDATE on the dbo view `definition`.
fn granted_view(definition: &str) -> Catalog {
    let mut c = with_etl();
    c.objects.push(module("dbo", "LeaseView", ObjectKind::View, definition));
    c.permissions.push(grant("etl", "UPDATE", object("dbo", "LeaseView")));
    c
}

#[test]
fn a_column_named_like_a_reserved_word_leaves_a_view_writable() {
    for column in ["[Group]", "[Distinct]", "[Union]", "\"Having\""] {
        let c = granted_view(&format!(
            "CREATE VIEW dbo.LeaseView AS SELECT ResourceId, Owner AS {column} FROM fence.Resource;"
        ));
        assert_eq!(writes(&c).len(), 1, "{column}: {:#?}", check(&c));
    }
}

#[test]
fn the_reserved_words_themselves_keep_a_view_read_only() {
    let c = granted_view("CREATE VIEW dbo.LeaseView AS SELECT DISTINCT Owner AS [Group] FROM fence.Resource;");
    assert!(writes(&c).is_empty(), "{:#?}", writes(&c));
}

#[test]
fn a_scalar_subquery_in_the_select_list_is_no_table_source() {
    let c = granted_view(
        "CREATE VIEW dbo.LeaseView AS SELECT o.Id, (SELECT MAX(r.Generation) FROM fence.Resource r) AS Top \
         FROM dbo.Orders o;",
    );
    assert!(writes(&c).is_empty(), "{:#?}", writes(&c));
}

#[test]
fn a_derived_table_after_a_comma_in_from_is_a_table_source() {
    let c = granted_view(
        "CREATE VIEW dbo.LeaseView AS SELECT d.ResourceId FROM dbo.Orders o, (SELECT ResourceId FROM \
         fence.Resource) d;",
    );
    assert_eq!(writes(&c).len(), 1, "{:#?}", check(&c));
}

#[test]
fn aggregates_of_every_kind_make_a_view_read_only() {
    for call in [
        "APPROX_COUNT_DISTINCT(Owner)",
        "GROUPING(Owner)",
        "GROUPING_ID(Owner)",
        "STRING_AGG(Owner, ',')",
        "STDEV(Generation)",
        "VAR(Generation)",
        "CHECKSUM_AGG(Generation)",
    ] {
        let c = granted_view(&format!(
            "CREATE VIEW dbo.LeaseView AS SELECT {call} AS x FROM fence.Resource;"
        ));
        assert!(writes(&c).is_empty(), "{call}: {:#?}", writes(&c));
    }
}

/// `etl` granted `right` on dbo.Orders, whose triggers are `triggers`.
fn triggered_table(right: &str, triggers: &[(&str, &str)]) -> Catalog {
    let mut c = with_etl();
    for (name, text) in triggers {
        c.objects.push(trigger(name, "dbo.Orders", text));
    }
    c.permissions.push(grant("etl", right, object("dbo", "Orders")));
    c
}

#[test]
fn a_trigger_header_with_execute_as_still_names_its_events() {
    let c = triggered_table(
        "INSERT",
        &[(
            "Orders_Insert",
            "CREATE TRIGGER dbo.Orders_Insert ON dbo.Orders WITH EXECUTE AS OWNER AFTER INSERT AS \
             UPDATE fence.Resource SET Generation = 0;",
        )],
    );
    assert_eq!(writes(&c).len(), 1, "{:#?}", check(&c));
}

#[test]
fn a_trigger_event_on_its_own_line_is_read_and_the_body_is_not() {
    let text = "CREATE TRIGGER dbo.Orders_Insert ON dbo.Orders\nAFTER INSERT\nAS\nUPDATE fence.Resource SET \
                Generation = 0;";
    let c = triggered_table("INSERT", &[("Orders_Insert", text)]);
    assert_eq!(writes(&c).len(), 1, "{:#?}", check(&c));
    // Control: UPDATE in the body is no event of the trigger.
    let c = triggered_table("UPDATE", &[("Orders_Insert", text)]);
    assert!(writes(&c).is_empty(), "{:#?}", writes(&c));
}

#[test]
fn every_trigger_on_a_table_is_followed() {
    let c = triggered_table(
        "DELETE",
        &[
            (
                "Orders_A",
                "CREATE TRIGGER dbo.Orders_A ON dbo.Orders AFTER INSERT AS UPDATE fence.Resource SET Generation = 0;",
            ),
            (
                "Orders_B",
                "CREATE TRIGGER dbo.Orders_B ON dbo.Orders AFTER DELETE AS DELETE FROM fence.Resource;",
            ),
        ],
    );
    let found = writes(&c);
    assert_eq!(found.len(), 1, "{:#?}", check(&c));
    assert!(step_texts(&found[0]).join(" | ").contains("dbo.Orders_B"), "{found:#?}");
    // Control: no trigger fires on UPDATE.
    let mut c = c;
    c.permissions.retain(|p| p.grantee != "etl" || p.permission != "DELETE");
    c.permissions.push(grant("etl", "UPDATE", object("dbo", "Orders")));
    assert!(writes(&c).is_empty(), "{:#?}", writes(&c));
}

/// An INSTEAD OF UPDATE trigger on a view over fence.Resource writes
/// dbo.Orders instead: an UPDATE through the view never reaches the
/// fence, a DELETE does.
fn view_with_instead_of_update(right: &str) -> Catalog {
    view_with_instead_of("UPDATE", "UPDATE dbo.Orders SET Id = Id;", right)
}

/// `etl` granted `right` on dbo.LeaseView over fence.Resource, whose
/// INSTEAD OF trigger for `events` runs `body`.
pub(super) fn view_with_instead_of(events: &str, body: &str, right: &str) -> Catalog {
    let mut c = with_etl();
    c.objects.push(module(
        "dbo",
        "LeaseView",
        ObjectKind::View,
        "CREATE VIEW dbo.LeaseView AS SELECT ResourceId, Owner FROM fence.Resource;",
    ));
    c.objects.push(trigger(
        "LeaseView_Write",
        "dbo.LeaseView",
        &format!("CREATE TRIGGER dbo.LeaseView_Write ON dbo.LeaseView INSTEAD OF {events} AS {body}"),
    ));
    c.permissions.push(grant("etl", right, object("dbo", "LeaseView")));
    c
}

#[test]
fn an_instead_of_trigger_writing_elsewhere_keeps_its_event_off_the_fence() {
    let c = view_with_instead_of_update("UPDATE");
    assert!(writes(&c).is_empty(), "{:#?}", writes(&c));
}

#[test]
fn an_event_no_instead_of_trigger_takes_still_writes_through_the_view() {
    let c = view_with_instead_of_update("DELETE");
    assert_eq!(writes(&c).len(), 1, "{:#?}", check(&c));
}

/// `etl` granted EXECUTE on `schema.BumpLease`, owned by dbo, whose text
/// names its table by one part: SQL Server resolves a one-part name in a
/// module against the module's own schema first, then dbo.
fn one_part_procedure(schema: &str, statement: &str) -> Catalog {
    let mut c = with_etl();
    let mut p = module(
        schema,
        "BumpLease",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE {schema}.BumpLease @Id bigint AS {statement} WHERE ResourceId = @Id;"),
    );
    p.owner = Some("dbo".into());
    c.objects.push(p);
    c.permissions.push(grant("etl", "EXECUTE", object(schema, "BumpLease")));
    c
}

#[test]
fn a_one_part_name_in_a_module_of_the_fence_schema_is_the_fence_table() {
    let c = one_part_procedure("fence", "UPDATE Resource SET Generation = 0");
    assert_eq!(writes(&c).len(), 1, "{:#?}", check(&c));
}

#[test]
fn a_one_part_name_for_a_synonym_in_the_modules_schema_is_followed() {
    let mut c = one_part_procedure("dbo", "UPDATE Leases SET Generation = 0");
    c.objects
        .push(module("dbo", "Leases", ObjectKind::Synonym, "[fence].[Resource]"));
    assert_eq!(writes(&c).len(), 1, "{:#?}", check(&c));
}

#[test]
fn a_one_part_name_in_a_module_of_another_schema_is_not_the_fence_table() {
    let c = one_part_procedure("dbo", "UPDATE Resource SET Generation = 0");
    assert!(writes(&c).is_empty(), "{:#?}", writes(&c));
}

/// `etl` granted EXECUTE on dbo.ResetLease, which updates the synonym
/// dbo.Leases whose base object is `base` ("CREATE SYNONYM": a three-part
/// name may name the current database).
fn synonym_with_base(base: &str) -> Catalog {
    let mut c = with_etl();
    c.objects.push(module("dbo", "Leases", ObjectKind::Synonym, base));
    c.objects.push(module(
        "dbo",
        "ResetLease",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.ResetLease @Id bigint AS UPDATE dbo.Leases SET Generation = 0 WHERE ResourceId = @Id;",
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "ResetLease")));
    c
}

#[test]
fn a_three_part_synonym_base_naming_this_database_is_the_fence_table() {
    let c = synonym_with_base("[orders].[fence].[Resource]");
    assert_eq!(c.database, "orders");
    assert_eq!(writes(&c).len(), 1, "{:#?}", check(&c));
}

#[test]
fn a_three_part_synonym_base_naming_another_database_is_not_the_fence_table() {
    assert!(writes(&synonym_with_base("[archive].[fence].[Resource]")).is_empty());
}

/// dbo.Orders with an AFTER DELETE trigger that deletes from
/// fence.Resource, disabled when `disabled` (sys.triggers.is_disabled):
/// a disabled trigger does not fire ("DISABLE TRIGGER"), but whoever holds
/// ALTER on the table may ENABLE it.
fn orders_with_trigger(disabled: bool, right: &str) -> Catalog {
    let mut c = triggered_table(
        right,
        &[(
            "Orders_Delete",
            "CREATE TRIGGER dbo.Orders_Delete ON dbo.Orders AFTER DELETE AS DELETE FROM fence.Resource;",
        )],
    );
    c.objects
        .iter_mut()
        .find(|o| o.name == "Orders_Delete")
        .unwrap()
        .disabled = disabled;
    c
}

#[test]
fn a_disabled_trigger_does_not_fire_for_a_data_right() {
    assert!(writes(&orders_with_trigger(true, "DELETE")).is_empty());
    // Control: enabled, it fires.
    assert_eq!(writes(&orders_with_trigger(false, "DELETE")).len(), 1);
}

#[test]
fn whoever_may_enable_a_disabled_trigger_still_reaches_the_fence() {
    let report = check(&orders_with_trigger(true, "ALTER"));
    assert!(
        report.findings.iter().any(|f| f.principal.as_deref() == Some("etl")
            && step_texts(f).iter().any(|s| s.contains("ALTER on dbo.Orders"))),
        "{report:#?}"
    );
}

/// A trigger named like a header word, bracketed and one part (its schema
/// is its table's), on UPDATE of dbo.Orders: its name is no FOR or AFTER.
fn trigger_named(name: &str) -> Catalog {
    triggered_table(
        "UPDATE",
        &[(
            name.trim_matches(['[', ']', '"']),
            &format!("CREATE TRIGGER {name} ON dbo.Orders AFTER UPDATE AS UPDATE fence.Resource SET Generation = 0;"),
        )],
    )
}

#[test]
fn a_trigger_named_like_a_header_word_still_names_its_events() {
    for name in ["[for]", "[After]", "\"for\""] {
        let c = trigger_named(name);
        assert_eq!(writes(&c).len(), 1, "{name}: {:#?}", check(&c));
    }
}

#[test]
fn a_trigger_with_an_ordinary_name_names_its_events() {
    assert_eq!(writes(&trigger_named("[Orders_Update]")).len(), 1);
}
