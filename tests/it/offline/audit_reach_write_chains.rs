//! Writes to a fence table through more than one object, on layouts written
//! from "Ownership Chains", "Modify Data Through a View", "Synonyms
//! (Database Engine)" and "CREATE TRIGGER": while every object on the way
//! has the fence tables' owner, only the first is checked, so a grantee of
//! a data right on an outer view, EXECUTE on a procedure writing through a
//! view or a synonym, or a data right on an object whose trigger writes the
//! fence, writes the fence, and FP027 names it with the route.

use crate::support;

use fencepost::audit::{Catalog, Dependency, Finding, ObjectKind, Securable};
use support::fixtures::*;

const INNER: &str = "CREATE VIEW dbo.InnerLeases AS SELECT ResourceId, Owner, Generation FROM fence.Resource;";

fn with_etl() -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    c
}

fn depends(c: &mut Catalog, from: &str, to: &str) {
    c.dependencies.get_or_insert_with(Vec::new).push(Dependency {
        referencing: from.into(),
        referenced: to.into(),
    });
}

fn trigger(name: &str, on: &str, definition: &str) -> fencepost::audit::Object {
    let mut t = module("dbo", name, ObjectKind::Trigger, definition);
    t.parent = Some(on.into());
    t
}

/// The FP027 write finding naming `etl`, whose path runs through each of
/// `through`.
fn written_through(c: &Catalog, through: &[&str]) -> Finding {
    let found: Vec<Finding> = reaching(c, "etl")
        .into_iter()
        .filter(|f| f.permission.as_deref() == Some("write the fence tables"))
        .collect();
    assert_eq!(found.len(), 1, "{:#?}", check(c));
    let steps = step_texts(&found[0]).join(" | ");
    for t in through {
        assert!(steps.contains(t), "{t} not in {steps}");
    }
    found[0].clone()
}

#[test]
fn update_on_a_view_over_a_view_over_a_fence_table_names_the_grantee() {
    let mut c = with_etl();
    c.objects.push(module("dbo", "InnerLeases", ObjectKind::View, INNER));
    c.objects.push(module(
        "dbo",
        "OuterLeases",
        ObjectKind::View,
        "CREATE VIEW dbo.OuterLeases AS SELECT ResourceId, Owner, Generation FROM dbo.InnerLeases;",
    ));
    depends(&mut c, "dbo.OuterLeases", "dbo.InnerLeases");
    c.permissions.push(grant("etl", "UPDATE", object("dbo", "OuterLeases")));
    written_through(&c, &["UPDATE on dbo.OuterLeases", "dbo.InnerLeases", "fence.Resource"]);
}

#[test]
fn execute_on_a_procedure_updating_a_view_over_a_fence_table_names_the_grantee() {
    let mut c = with_etl();
    c.objects.push(module("dbo", "InnerLeases", ObjectKind::View, INNER));
    c.objects.push(module(
        "dbo",
        "BumpLease",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.BumpLease @Id bigint AS \
         UPDATE dbo.InnerLeases SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "BumpLease")));
    written_through(&c, &["EXECUTE on dbo.BumpLease", "dbo.InnerLeases"]);
}

#[test]
fn execute_on_a_procedure_updating_a_synonym_for_a_fence_table_names_the_grantee() {
    let mut c = with_etl();
    c.objects
        .push(module("dbo", "Leases", ObjectKind::Synonym, "[fence].[Resource]"));
    c.objects.push(module(
        "dbo",
        "ResetLease",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.ResetLease @Id bigint AS UPDATE dbo.Leases SET Generation = 0 WHERE ResourceId = @Id;",
    ));
    depends(&mut c, "dbo.ResetLease", "dbo.Leases");
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "ResetLease")));
    written_through(&c, &["EXECUTE on dbo.ResetLease", "dbo.Leases"]);
}

#[test]
fn update_on_a_view_over_a_synonym_for_a_fence_table_names_the_grantee() {
    let mut c = with_etl();
    c.objects
        .push(module("dbo", "Leases", ObjectKind::Synonym, "[fence].[Resource]"));
    c.objects.push(module(
        "dbo",
        "LeaseView",
        ObjectKind::View,
        "CREATE VIEW dbo.LeaseView AS SELECT ResourceId, Generation FROM dbo.Leases;",
    ));
    c.permissions.push(grant("etl", "UPDATE", object("dbo", "LeaseView")));
    written_through(&c, &["UPDATE on dbo.LeaseView", "dbo.Leases"]);
}

#[test]
fn update_on_a_view_whose_instead_of_trigger_writes_a_fence_table_names_the_grantee() {
    let mut c = with_etl();
    c.objects.push(module(
        "dbo",
        "OrderQueue",
        ObjectKind::View,
        "CREATE VIEW dbo.OrderQueue AS SELECT Id FROM dbo.Orders;",
    ));
    c.objects.push(trigger(
        "OrderQueue_Update",
        "dbo.OrderQueue",
        "CREATE TRIGGER dbo.OrderQueue_Update ON dbo.OrderQueue INSTEAD OF UPDATE AS \
         UPDATE fence.Resource SET Generation = 0;",
    ));
    c.permissions.push(grant("etl", "UPDATE", object("dbo", "OrderQueue")));
    written_through(&c, &["UPDATE on dbo.OrderQueue", "dbo.OrderQueue_Update"]);
}

#[test]
fn insert_on_a_table_whose_after_trigger_writes_a_fence_table_names_the_grantee() {
    let mut c = with_etl();
    c.objects.push(trigger(
        "Orders_Insert",
        "dbo.Orders",
        "CREATE TRIGGER dbo.Orders_Insert ON dbo.Orders AFTER INSERT AS UPDATE fence.Resource SET Generation = 0;",
    ));
    c.permissions.push(grant("etl", "INSERT", object("dbo", "Orders")));
    written_through(&c, &["INSERT on dbo.Orders", "dbo.Orders_Insert"]);
}

/// Controls: a link owned by someone else breaks the chain, and a trigger
/// fires on its own events only.
#[test]
fn a_broken_link_or_another_event_writes_nothing() {
    let mut c = with_etl();
    c.principals.push(user("reporter", None));
    let mut inner = module("dbo", "InnerLeases", ObjectKind::View, INNER);
    inner.owner = Some("reporter".into());
    c.objects.push(inner);
    c.objects.push(module(
        "dbo",
        "OuterLeases",
        ObjectKind::View,
        "CREATE VIEW dbo.OuterLeases AS SELECT ResourceId, Owner, Generation FROM dbo.InnerLeases;",
    ));
    c.objects.push(trigger(
        "Orders_Insert",
        "dbo.Orders",
        "CREATE TRIGGER dbo.Orders_Insert ON dbo.Orders AFTER INSERT AS UPDATE fence.Resource SET Generation = 0;",
    ));
    c.permissions.push(grant("etl", "UPDATE", object("dbo", "OuterLeases")));
    c.permissions.push(grant("etl", "DELETE", object("dbo", "Orders")));
    let found: Vec<Finding> = reaching(&c, "etl")
        .into_iter()
        .filter(|f| f.permission.as_deref() == Some("write the fence tables"))
        .collect();
    assert!(found.is_empty(), "{found:#?}");
}
