//! Which statements reach a fence table through triggers, on layouts
//! written from "CREATE TRIGGER": a DML trigger fires only for the events
//! its header names; an INSTEAD OF trigger on a view that runs a statement
//! against its own view is not called again, "the statement processes as
//! if the table had no INSTEAD OF trigger" and goes to the view's base
//! table; a comment in the header is no part of it. Each with a control of
//! the same shape that stays clean.

use crate::support;

use super::audit_reach_module_reading::{trigger, view_with_instead_of, with_etl, writes};
use fencepost::audit::{Catalog, ObjectKind};
use support::fixtures::*;

/// `etl` granted `right` on dbo.LeaseView over fence.Resource, whose
/// INSTEAD OF trigger for every event runs `body`.
fn view_with_instead_of_all(right: &str, body: &str) -> Catalog {
    view_with_instead_of("INSERT, UPDATE, DELETE", body, right)
}

#[test]
fn an_instead_of_trigger_writing_its_own_view_writes_the_base_table() {
    for right in ["INSERT", "UPDATE", "DELETE"] {
        let c = view_with_instead_of_all(
            right,
            "UPDATE v SET Owner = i.Owner FROM dbo.LeaseView AS v JOIN inserted AS i ON i.ResourceId = v.ResourceId;",
        );
        assert_eq!(writes(&c).len(), 1, "{right}: {:#?}", check(&c));
    }
}

#[test]
fn an_instead_of_trigger_for_every_event_writing_elsewhere_writes_nothing() {
    for right in ["INSERT", "UPDATE", "DELETE"] {
        let c = view_with_instead_of_all(right, "UPDATE dbo.Orders SET Id = Id;");
        assert!(writes(&c).is_empty(), "{right}: {:#?}", writes(&c));
    }
}

/// `etl` granted `right` on dbo.OrderView over dbo.Orders, whose AFTER
/// INSERT trigger writes fence.Resource.
fn view_over_triggered_table(right: &str) -> Catalog {
    let mut c = with_etl();
    c.objects.push(module(
        "dbo",
        "OrderView",
        ObjectKind::View,
        "CREATE VIEW dbo.OrderView AS SELECT Id FROM dbo.Orders;",
    ));
    c.objects.push(trigger(
        "Orders_Insert",
        "dbo.Orders",
        "CREATE TRIGGER dbo.Orders_Insert ON dbo.Orders AFTER INSERT AS UPDATE fence.Resource SET Generation = 0;",
    ));
    c.permissions.push(grant("etl", right, object("dbo", "OrderView")));
    c
}

#[test]
fn a_delete_through_a_view_fires_no_insert_trigger_of_its_base_table() {
    for right in ["DELETE", "UPDATE"] {
        let c = view_over_triggered_table(right);
        assert!(writes(&c).is_empty(), "{right}: {:#?}", writes(&c));
    }
}

#[test]
fn an_insert_through_a_view_fires_the_insert_trigger_of_its_base_table() {
    let c = view_over_triggered_table("INSERT");
    let found = writes(&c);
    assert_eq!(found.len(), 1, "{:#?}", check(&c));
    assert!(
        step_texts(&found[0]).join(" | ").contains("dbo.Orders_Insert"),
        "{found:#?}"
    );
}

/// An AFTER UPDATE trigger on dbo.Orders that writes fence.Resource, with
/// `comment` in its header and the fence table named in its body after
/// an alias's AS.
fn commented_header(comment: &str, right: &str) -> Catalog {
    let mut c = with_etl();
    c.objects.push(trigger(
        "Orders_Update",
        "dbo.Orders",
        &format!(
            "CREATE TRIGGER dbo.Orders_Update ON dbo.Orders {comment} AFTER UPDATE AS \
             UPDATE r SET Generation = 0 FROM [fence].[Resource] AS r;"
        ),
    ));
    c.permissions.push(grant("etl", right, object("dbo", "Orders")));
    c
}

#[test]
fn a_bracket_or_quote_in_a_header_comment_hides_nothing() {
    for comment in ["/* [ */", "/* it's \"x */", "-- [\n"] {
        let c = commented_header(comment, "UPDATE");
        assert_eq!(writes(&c).len(), 1, "{comment}: {:#?}", check(&c));
    }
}

/// Control: the header still names UPDATE alone, so DELETE fires nothing.
#[test]
fn a_header_comment_adds_no_event() {
    for comment in ["/* [ */", "/* it's \"x */", "-- [\n", "/* audited */"] {
        let c = commented_header(comment, "DELETE");
        assert!(writes(&c).is_empty(), "{comment}: {:#?}", writes(&c));
    }
}
