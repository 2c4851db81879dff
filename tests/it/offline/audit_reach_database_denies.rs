//! Database-level DENYs cut the ways they refuse, on layouts written from
//! Microsoft's documentation ("Permissions Hierarchy (Database Engine)": a
//! permission denied, or one that covers or contains it, to any principal
//! of the security context refuses it; "DENY Object Permissions": a
//! column-level DENY refuses that column only). A fixed role's rights are
//! refused to a member denied them; an owner and a holder of CONTROL where
//! the DENY is made, who may revoke it, are not bound.

use crate::support;

use fencepost::audit::{Catalog, Finding, Permission, PermissionState, Securable};
use support::fixtures::*;

fn deny(grantee: &str, permission: &str, on: Securable) -> Permission {
    Permission {
        state: PermissionState::Deny,
        ..grant(grantee, permission, on)
    }
}

/// The findings naming `principal` with a path to the fence: FP027's, or
/// an older rule's that FP027 gave its path (FP003 names a grant on the
/// fence schema whatever DENY stands beside it; only the path says it is
/// a way in).
fn named(c: &Catalog, principal: &str) -> Vec<Finding> {
    check(c)
        .findings
        .into_iter()
        .filter(|f| f.principal.as_deref() == Some(principal) && !f.path.is_empty())
        .collect()
}

/// An ETL user in db_datawriter, denied every data write on the fence
/// schema.
fn fenced_etl(c: &mut Catalog, name: &str) {
    c.principals.push(user(name, Some(name)));
    c.memberships.push(member("db_datawriter", name));
    for p in ["INSERT", "UPDATE", "DELETE"] {
        c.permissions.push(deny(name, p, schema("fence")));
    }
}

#[test]
fn a_db_datawriter_member_denied_the_fence_schema_does_not_write_it() {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.memberships.push(member("db_datawriter", "etl"));
    assert!(!named(&c, "etl").is_empty());
    fenced_etl(&mut c, "etl2");
    c.principals.retain(|p| p.name != "etl");
    c.memberships.retain(|m| m.member != "etl");
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn a_deny_on_one_fence_table_leaves_the_others_writable() {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.memberships.push(member("db_datawriter", "etl"));
    for p in ["INSERT", "UPDATE", "DELETE"] {
        c.permissions.push(deny("etl", p, object("fence", "Resource")));
    }
    let f = named(&c, "etl");
    assert_eq!(f.len(), 1, "{:#?}", check(&c));
    assert_ne!(f[0].object, "fence.Resource", "{:#?}", f[0]);
}

#[test]
fn a_deny_to_a_role_of_the_member_or_to_public_binds_it_and_a_column_deny_does_not() {
    // To a role it is in.
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.principals.push(role("loaders"));
    c.memberships.push(member("db_datawriter", "etl"));
    c.memberships.push(member("loaders", "etl"));
    c.permissions.push(deny("loaders", "CONTROL", schema("fence")));
    assert!(named(&c, "etl").is_empty(), "{:#?}", check(&c));
    // To public: everyone but the owner.
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.memberships.push(member("db_datawriter", "etl"));
    c.permissions.push(deny("public", "CONTROL", schema("fence")));
    assert!(named(&c, "etl").is_empty(), "{:#?}", check(&c));
    // On one column: the rest of the row is still written.
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.memberships.push(member("db_datawriter", "etl"));
    for p in ["INSERT", "UPDATE", "DELETE"] {
        c.permissions.push(deny(
            "etl",
            p,
            Securable::Object {
                schema: "fence".into(),
                name: "Resource".into(),
                column: Some("Generation".into()),
            },
        ));
    }
    assert!(!named(&c, "etl").is_empty(), "{:#?}", check(&c));
}

#[test]
fn control_revokes_a_deny_in_its_way_unless_control_is_what_is_denied() {
    let mut c = clean();
    c.principals.push(user("lead", Some("lead")));
    c.permissions.push(grant("lead", "CONTROL", schema("fence")));
    c.permissions.push(deny("lead", "UPDATE", schema("fence")));
    assert!(!named(&c, "lead").is_empty(), "{:#?}", check(&c));
    c.permissions.push(deny("lead", "CONTROL", schema("fence")));
    assert!(named(&c, "lead").is_empty(), "{:#?}", check(&c));
}

#[test]
fn a_member_denied_is_left_out_of_its_role_and_of_whoever_becomes_it() {
    // A role in db_datawriter: one member denied, one not.
    let mut c = clean();
    c.principals.push(role("loaders"));
    c.memberships.push(member("db_datawriter", "loaders"));
    fenced_etl(&mut c, "etl");
    c.memberships
        .retain(|m| !(m.role == "db_datawriter" && m.member == "etl"));
    c.memberships.push(member("loaders", "etl"));
    c.principals.push(user("etl2", Some("etl2")));
    c.memberships.push(member("loaders", "etl2"));
    let report = check(&c);
    let loaders = named(&c, "loaders");
    assert!(!loaders.is_empty(), "{report:#?}");
    let members: Vec<&str> = loaders[0]
        .why
        .split_once("; its members ")
        .map(|(_, m)| m.trim_end_matches(" hold the same path").split(", ").collect())
        .unwrap_or_default();
    assert!(members.contains(&"etl2"), "{:#?}", loaders[0]);
    assert!(
        !members.iter().any(|m| *m == "etl" || *m == "login etl"),
        "{:#?}",
        loaders[0]
    );
    assert!(named(&c, "etl").is_empty(), "{report:#?}");
    // Impersonating the denied member writes nothing; the other does.
    c.principals.push(user("batch", Some("batch")));
    c.permissions.push(grant(
        "batch",
        "IMPERSONATE",
        Securable::Principal { name: "etl".into() },
    ));
    assert!(named(&c, "batch").is_empty(), "{:#?}", check(&c));
    c.permissions.push(grant(
        "batch",
        "IMPERSONATE",
        Securable::Principal { name: "etl2".into() },
    ));
    assert!(!named(&c, "batch").is_empty(), "{:#?}", check(&c));
}
