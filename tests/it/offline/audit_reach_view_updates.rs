//! Views that cannot write a fence table, on layouts written from "Modify
//! Data Through a View": a modification through a view must change columns
//! of one base table, taken directly from it, and a view with aggregates,
//! GROUP BY, HAVING or DISTINCT takes none; an INSTEAD OF trigger on the
//! view replaces those limits with what the trigger does. A view that
//! names a fence table only to filter, or only to count, is no way to write
//! it; one whose text is hidden still counts.

use crate::support;

use fencepost::audit::{Catalog, Finding, ObjectKind, Securable};
use support::fixtures::*;

/// `etl` granted UPDATE and DELETE on a dbo-owned view with `definition`.
fn granted_view(name: &str, definition: Option<&str>) -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    let mut v = module("dbo", name, ObjectKind::View, definition.unwrap_or(""));
    v.definition = definition.map(String::from);
    c.objects.push(v);
    c.dependencies
        .get_or_insert_with(Vec::new)
        .push(fencepost::audit::Dependency {
            referencing: format!("dbo.{name}"),
            referenced: "fence.Resource".into(),
        });
    for p in ["UPDATE", "DELETE"] {
        c.permissions.push(grant("etl", p, object("dbo", name)));
    }
    c
}

fn writes(c: &Catalog) -> Vec<Finding> {
    reaching(c, "etl")
        .into_iter()
        .filter(|f| f.permission.as_deref() == Some("write the fence tables"))
        .collect()
}

#[test]
fn an_aggregate_view_over_a_fence_table_writes_nothing() {
    let c = granted_view(
        "LeaseCount",
        Some("CREATE VIEW dbo.LeaseCount AS SELECT Owner, COUNT(*) AS Leases FROM fence.Resource GROUP BY Owner;"),
    );
    assert!(writes(&c).is_empty(), "{:#?}", writes(&c));
}

#[test]
fn a_distinct_view_over_a_fence_table_writes_nothing() {
    let c = granted_view(
        "LeaseOwners",
        Some("CREATE VIEW dbo.LeaseOwners AS SELECT DISTINCT Owner FROM [fence].[Resource];"),
    );
    assert!(writes(&c).is_empty(), "{:#?}", writes(&c));
}

#[test]
fn a_view_naming_a_fence_table_only_in_a_filter_writes_nothing() {
    let c = granted_view(
        "UnleasedOrders",
        Some(
            "CREATE VIEW dbo.UnleasedOrders AS SELECT o.Id FROM dbo.Orders AS o \
             WHERE NOT EXISTS (SELECT 1 FROM fence.Resource AS r WHERE r.ResourceId = o.Id);",
        ),
    );
    assert!(writes(&c).is_empty(), "{:#?}", writes(&c));
}

/// Controls: a join, a derived table and a common table expression keep a
/// fence table's columns updatable, and a hidden text is taken as
/// updatable.
#[test]
fn a_join_a_derived_table_a_cte_or_a_hidden_text_still_writes() {
    for (name, text) in [
        (
            "JoinedLeases",
            Some(
                "CREATE VIEW dbo.JoinedLeases AS SELECT r.ResourceId, r.Generation FROM fence.Resource AS r JOIN dbo.Orders AS o ON o.Id = r.ResourceId;",
            ),
        ),
        (
            "DerivedLeases",
            Some(
                "CREATE VIEW dbo.DerivedLeases AS SELECT d.ResourceId FROM (SELECT ResourceId FROM fence.Resource) AS d;",
            ),
        ),
        (
            "CteLeases",
            Some(
                "CREATE VIEW dbo.CteLeases AS WITH l AS (SELECT ResourceId, Generation FROM fence.Resource) SELECT ResourceId, Generation FROM l;",
            ),
        ),
        ("HiddenLeases", None),
    ] {
        let c = granted_view(name, text);
        assert_eq!(writes(&c).len(), 1, "{name}: {:#?}", check(&c));
    }
}

/// An INSTEAD OF trigger on an aggregate view decides what a write to it
/// does: when it writes the fence table, the grantee still writes it.
#[test]
fn an_aggregate_view_with_an_instead_of_trigger_writing_the_fence_still_writes() {
    let mut c = granted_view(
        "LeaseCount",
        Some("CREATE VIEW dbo.LeaseCount AS SELECT Owner, COUNT(*) AS Leases FROM fence.Resource GROUP BY Owner;"),
    );
    let mut t = module(
        "dbo",
        "LeaseCount_Delete",
        ObjectKind::Trigger,
        "CREATE TRIGGER dbo.LeaseCount_Delete ON dbo.LeaseCount INSTEAD OF DELETE AS \
         DELETE r FROM fence.Resource AS r JOIN deleted AS d ON d.Owner = r.Owner;",
    );
    t.parent = Some("dbo.LeaseCount".into());
    c.objects.push(t);
    assert_eq!(writes(&c).len(), 1, "{:#?}", check(&c));
}
