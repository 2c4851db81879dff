//! Which derived columns keep a view from writing a fence table, on layouts
//! written from "Modify Data Through a View": the columns modified "must
//! reference the underlying data in the table columns directly", not
//! through an aggregate function or GROUP BY, HAVING or DISTINCT, and "the
//! previous restrictions apply to any subqueries in the FROM clause of the
//! view". A windowed aggregate (`COUNT(*) OVER ()`) derives its own column
//! only, and leaves the plain columns beside it updatable; a user function
//! named like an aggregate (`dbo.Max(x)`) is a scalar function, no
//! aggregate. Each with a control of the same shape.

use crate::support;

use super::audit_reach_module_reading::writes;
use fencepost::audit::{Catalog, ObjectKind, Securable};
use support::fixtures::*;

/// `etl` granted UPDATE and DELETE on the dbo view `definition`.
fn granted_view(definition: &str) -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    c.objects.push(module("dbo", "LeaseView", ObjectKind::View, definition));
    for p in ["UPDATE", "DELETE"] {
        c.permissions.push(grant("etl", p, object("dbo", "LeaseView")));
    }
    c
}

#[test]
fn a_windowed_aggregate_leaves_the_plain_columns_updatable() {
    for column in [
        "COUNT(*) OVER ()",
        "SUM(Generation) OVER (PARTITION BY Owner)",
        "MAX (Generation)\n  OVER (ORDER BY ResourceId)",
    ] {
        let c = granted_view(&format!(
            "CREATE VIEW dbo.LeaseView AS SELECT ResourceId, Owner, {column} AS Seen FROM fence.Resource;"
        ));
        assert_eq!(writes(&c).len(), 1, "{column}: {:#?}", check(&c));
    }
}

#[test]
fn a_user_function_named_like_an_aggregate_leaves_the_view_updatable() {
    for call in ["dbo.Max(Generation)", "[dbo].[Count](Owner)", "dbo . Sum (Generation)"] {
        let c = granted_view(&format!(
            "CREATE VIEW dbo.LeaseView AS SELECT ResourceId, Owner, {call} AS Seen FROM fence.Resource;"
        ));
        assert_eq!(writes(&c).len(), 1, "{call}: {:#?}", check(&c));
    }
}

/// Controls: the same calls with no OVER and no schema are aggregates.
#[test]
fn a_plain_aggregate_keeps_the_view_read_only() {
    for column in ["COUNT(*)", "SUM(Generation)", "MAX (Generation)"] {
        let c = granted_view(&format!(
            "CREATE VIEW dbo.LeaseView AS SELECT {column} AS Seen FROM fence.Resource;"
        ));
        assert!(writes(&c).is_empty(), "{column}: {:#?}", writes(&c));
    }
}

#[test]
fn a_fence_table_read_only_through_an_aggregating_cte_or_derived_table_writes_nothing() {
    for text in [
        "CREATE VIEW dbo.LeaseView AS WITH c AS (SELECT Owner, COUNT(*) AS n FROM fence.Resource GROUP BY Owner) \
         SELECT * FROM c;",
        "CREATE VIEW dbo.LeaseView AS SELECT d.Owner, d.n FROM (SELECT Owner, COUNT(*) AS n FROM fence.Resource \
         GROUP BY Owner) AS d;",
        "CREATE VIEW dbo.LeaseView AS SELECT d.Owner FROM (SELECT DISTINCT Owner FROM [fence].[Resource]) AS d;",
        "CREATE VIEW dbo.LeaseView AS SELECT o.Id, d.n FROM dbo.Orders AS o JOIN (SELECT Owner, MAX(Generation) AS n \
         FROM fence.Resource GROUP BY Owner) AS d ON d.Owner = o.Customer;",
    ] {
        let c = granted_view(text);
        assert!(writes(&c).is_empty(), "{text}: {:#?}", writes(&c));
    }
}

/// Controls: a plain CTE or derived table, beside or over an aggregating
/// one, still takes the fence table's columns directly.
#[test]
fn a_plain_cte_or_derived_table_beside_an_aggregating_one_still_writes() {
    for text in [
        "CREATE VIEW dbo.LeaseView AS WITH c AS (SELECT Owner, COUNT(*) AS n FROM dbo.Orders GROUP BY Owner), \
         l AS (SELECT ResourceId, Owner FROM fence.Resource) SELECT l.ResourceId FROM l JOIN c ON c.Owner = l.Owner;",
        "CREATE VIEW dbo.LeaseView AS SELECT d.Owner FROM (SELECT Owner, Generation FROM fence.Resource) AS d;",
        "CREATE VIEW dbo.LeaseView AS SELECT d.ResourceId FROM (SELECT ResourceId FROM (SELECT ResourceId, Owner \
         FROM fence.Resource) AS e) AS d;",
    ] {
        let c = granted_view(text);
        assert_eq!(writes(&c).len(), 1, "{text}: {:#?}", check(&c));
    }
}
