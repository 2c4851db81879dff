//! Writing through a view or an inline table-valued function, on layouts
//! written from "Ownership Chains" and "Modify Data Through a View": an
//! INSERT, UPDATE or DELETE on a view (or an inline function, which is
//! updatable as a view is) checks the caller's permission on the view only
//! when the view and the table it selects from have one owner. So a grantee
//! of a data right on a dbo-owned view over a fence table writes the fence,
//! and FP027 names that grantee with the route; a view owned by someone
//! else, or a right that only reads, is no way in.

use crate::support;

use fencepost::audit::{Catalog, Finding, ObjectKind, Permission, PermissionState, Securable};
use support::fixtures::*;

const VIEW: &str = "CREATE VIEW dbo.OpenLeases AS SELECT ResourceId, Owner, Generation FROM fence.Resource;";
const INLINE: &str = "CREATE FUNCTION dbo.LeasesOf(@Owner nvarchar(128)) RETURNS TABLE AS \
                      RETURN SELECT ResourceId, Generation FROM fence.Resource WHERE Owner = @Owner;";

/// A dbo-owned view over fence.Resource, and `etl` granted `permission` on
/// it.
fn layout(kind: ObjectKind, definition: &str, name: &str, permission: &str) -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    c.objects.push(module("dbo", name, kind, definition));
    c.permissions.push(grant("etl", permission, object("dbo", name)));
    c
}

fn writes(c: &Catalog, who: &str) -> Vec<Finding> {
    reaching(c, who)
        .into_iter()
        .filter(|f| f.permission.as_deref() == Some("write the fence tables"))
        .collect()
}

#[test]
fn update_on_a_dbo_owned_view_over_a_fence_table_names_the_grantee() {
    for permission in ["UPDATE", "INSERT", "DELETE"] {
        let c = layout(ObjectKind::View, VIEW, "OpenLeases", permission);
        let report = check(&c);
        let f = writes(&c, "etl");
        assert_eq!(f.len(), 1, "{permission}: {report:#?}");
        let steps = step_texts(&f[0]);
        assert!(
            steps[0].starts_with(&format!("{permission} on dbo.OpenLeases")),
            "{:#?}",
            f[0]
        );
        assert!(
            steps.last().unwrap().contains("fence.Resource") && steps.last().unwrap().contains("ownership chaining"),
            "{:#?}",
            f[0]
        );
        assert!(f[0].fix.contains("REVOKE"), "{:#?}", f[0]);
    }
}

#[test]
fn update_on_a_dbo_owned_inline_function_over_a_fence_table_names_the_grantee() {
    let c = layout(ObjectKind::Function, INLINE, "LeasesOf", "UPDATE");
    let f = writes(&c, "etl");
    assert_eq!(f.len(), 1, "{:#?}", check(&c));
    assert!(
        step_texts(&f[0])[0].starts_with("UPDATE on dbo.LeasesOf"),
        "{:#?}",
        f[0]
    );
}

#[test]
fn update_on_the_view_held_through_its_schema_names_the_grantee() {
    let mut c = layout(ObjectKind::View, VIEW, "OpenLeases", "SELECT");
    c.permissions.push(grant("etl", "UPDATE", schema("dbo")));
    assert_eq!(writes(&c, "etl").len(), 1, "{:#?}", check(&c));
}

#[test]
fn select_on_the_view_writes_nothing() {
    let c = layout(ObjectKind::View, VIEW, "OpenLeases", "SELECT");
    assert!(writes(&c, "etl").is_empty(), "{:#?}", check(&c));
}

#[test]
fn a_view_owned_by_someone_else_breaks_the_chain() {
    let mut c = layout(ObjectKind::View, VIEW, "OpenLeases", "UPDATE");
    c.principals.push(user("report_owner", None));
    object_mut(&mut c, "dbo.OpenLeases").owner = Some("report_owner".into());
    assert!(writes(&c, "etl").is_empty(), "{:#?}", check(&c));
}

#[test]
fn a_deny_on_the_view_cuts_it() {
    let mut c = layout(ObjectKind::View, VIEW, "OpenLeases", "UPDATE");
    c.permissions.push(Permission {
        state: PermissionState::Deny,
        ..grant("etl", "UPDATE", object("dbo", "OpenLeases"))
    });
    assert!(writes(&c, "etl").is_empty(), "{:#?}", check(&c));
}

#[test]
fn a_view_over_a_table_of_the_application_writes_nothing() {
    let c = layout(
        ObjectKind::View,
        "CREATE VIEW dbo.OpenOrders AS SELECT Id FROM dbo.Orders;",
        "OpenOrders",
        "UPDATE",
    );
    let report = check(&c);
    assert!(writes(&c, "etl").is_empty(), "{report:#?}");
}

#[test]
fn a_view_that_names_another_fence_table_first_in_a_filter_still_writes_the_one_it_selects_from() {
    // fence.Recovery sorts before fence.Resource: the view writes the latter.
    let view = "CREATE VIEW dbo.RecoveredLeases AS SELECT r.ResourceId, r.Owner FROM fence.Resource AS r \
                WHERE EXISTS (SELECT 1 FROM fence.Recovery AS x WHERE x.GenerationFloor <= r.Generation);";
    let c = layout(ObjectKind::View, view, "RecoveredLeases", "UPDATE");
    let f = writes(&c, "etl");
    assert_eq!(f.len(), 1, "{:#?}", check(&c));
    assert!(
        step_texts(&f[0]).last().unwrap().contains("fence.Resource"),
        "{:#?}",
        f[0]
    );
}
