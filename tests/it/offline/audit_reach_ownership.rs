//! Taking ownership, on layouts written from "ALTER AUTHORIZATION
//! (Transact-SQL)": TAKE OWNERSHIP on a schema lets its holder make itself
//! the schema's owner, and the owner of a schema holds CONTROL on it, which
//! is every permission on every table in it; the owner of dbo's schema
//! cannot be changed. TAKE OWNERSHIP on a table makes the holder its owner;
//! on a role, its owner, who adds members. TAKE OWNERSHIP on the database
//! makes a login its owner, and so dbo, but only a login that is not
//! already a user in it ("sp_changedbowner": drop the user first): a
//! member of a Windows group that holds it has no user of its own.

use crate::support;

use fencepost::audit::{Catalog, LoginKind, Object, ObjectKind, Permission, PermissionState, Principal, PrincipalKind};
use fencepost::audit::{Schema, Securable};
use support::fixtures::*;

fn deny(grantee: &str, permission: &str, on: Securable) -> Permission {
    Permission {
        state: PermissionState::Deny,
        ..grant(grantee, permission, on)
    }
}

/// An ETL user of its own SQL login, holding `permission` on `on`.
fn etl_with(permission: &str, on: Securable) -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    c.permissions.push(grant("etl", permission, on));
    c
}

/// The findings naming `who` with a path to the fence, of any rule.
fn named(c: &Catalog, who: &str) -> Vec<fencepost::audit::Finding> {
    check(c)
        .findings
        .into_iter()
        .filter(|f| f.principal.as_deref() == Some(who) && !f.path.is_empty())
        .collect()
}

/// The findings naming `who` whose path ends writing a fence table: FP027's,
/// or an older rule's that gained the path (FP003 names a grant on a fence
/// table itself).
fn writes_the_fence(c: &Catalog, who: &str) -> Vec<fencepost::audit::Finding> {
    check(c)
        .findings
        .into_iter()
        .filter(|f| f.principal.as_deref() == Some(who))
        .filter(|f| f.path.last().is_some_and(|s| s.step.contains("fence.")))
        .filter(|f| f.permission.as_deref() != Some("run fence_admin procedures"))
        .filter(|f| f.permission.as_deref() != Some("change the shipped procedures"))
        .collect()
}

#[test]
fn take_ownership_of_the_fence_schema_is_every_fence_table_written() {
    let c = etl_with("TAKE OWNERSHIP", schema("fence"));
    let report = check(&c);
    let f = writes_the_fence(&c, "etl");
    assert_eq!(f.len(), 1, "{report:#?}");
    let steps = step_texts(&f[0]);
    assert!(
        steps[0].contains("TAKE OWNERSHIP on SCHEMA::fence") && steps[0].contains("ALTER AUTHORIZATION ON SCHEMA::"),
        "{:#?}",
        f[0]
    );
    assert!(
        f[0].fix.contains("REVOKE TAKE OWNERSHIP ON SCHEMA::[fence]"),
        "{:#?}",
        f[0]
    );
}

#[test]
fn take_ownership_of_the_fence_schema_reaches_tables_of_an_owner_of_their_own_too() {
    // CONTROL on a schema is every permission on every object in it,
    // whoever owns the object.
    let mut c = etl_with("TAKE OWNERSHIP", schema("fence"));
    for o in c.objects.iter_mut().filter(|o| o.schema == "fence") {
        o.owner = Some("dbo".into());
    }
    assert_eq!(writes_the_fence(&c, "etl").len(), 1, "{:#?}", check(&c));
}

#[test]
fn take_ownership_held_through_a_role_names_the_role() {
    let mut c = clean();
    c.principals.push(role("loaders"));
    c.principals.push(user("etl", Some("etl")));
    c.memberships.push(member("loaders", "etl"));
    c.permissions.push(grant("loaders", "TAKE OWNERSHIP", schema("fence")));
    let f = writes_the_fence(&c, "loaders");
    assert_eq!(f.len(), 1, "{:#?}", check(&c));
    assert!(f[0].why.contains("etl"), "{:#?}", f[0]);
}

#[test]
fn a_deny_of_take_ownership_or_of_control_on_the_schema_leaves_it_clean() {
    for denied in ["TAKE OWNERSHIP", "CONTROL"] {
        let mut c = etl_with("TAKE OWNERSHIP", schema("fence"));
        c.permissions.push(deny("etl", denied, schema("fence")));
        let report = check(&c);
        assert!(writes_the_fence(&c, "etl").is_empty(), "{denied}: {report:#?}");
        assert!(
            !report.findings.iter().any(|f| f.principal.as_deref() == Some("etl")),
            "{denied}: {report:#?}"
        );
    }
}

#[test]
fn take_ownership_of_a_schema_without_fence_tables_is_clean() {
    // The control: the same grant on a schema of the application's own.
    let mut c = etl_with("TAKE OWNERSHIP", schema("staging"));
    c.schemas.push(Schema {
        name: "staging".into(),
        owner: "dbo".into(),
    });
    c.objects.push(Object {
        definition: None,
        ..module("staging", "Load", ObjectKind::Table, "")
    });
    let report = check(&c);
    assert!(named(&c, "etl").is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn take_ownership_of_the_dbo_schema_is_clean_as_its_owner_cannot_change() {
    // "Cannot change the owner of sys, dbo, or information_schema."
    let c = etl_with("TAKE OWNERSHIP", schema("dbo"));
    let report = check(&c);
    assert!(named(&c, "etl").is_empty(), "{report:#?}");
}

#[test]
fn take_ownership_of_a_fence_table_writes_it() {
    let c = etl_with("TAKE OWNERSHIP", object("fence", "Resource"));
    let f = writes_the_fence(&c, "etl");
    assert_eq!(f.len(), 1, "{:#?}", check(&c));
    assert!(
        step_texts(&f[0])[0].contains("TAKE OWNERSHIP on fence.Resource"),
        "{:#?}",
        f[0]
    );
    // Control: on a table of the application's own.
    let c = etl_with("TAKE OWNERSHIP", object("dbo", "Orders"));
    assert!(named(&c, "etl").is_empty(), "{:#?}", check(&c));
}

#[test]
fn take_ownership_of_a_fence_role_adds_members_to_it() {
    let c = etl_with(
        "TAKE OWNERSHIP",
        Securable::Principal {
            name: "fence_operator".into(),
        },
    );
    let report = check(&c);
    let found = named(&c, "etl");
    assert!(
        found.iter().any(|f| f
            .path
            .iter()
            .any(|s| s.step.contains("TAKE OWNERSHIP on ROLE::fence_operator"))),
        "{report:#?}"
    );
    // Control: a role that holds nothing.
    let mut c = etl_with("TAKE OWNERSHIP", Securable::Principal { name: "clerks".into() });
    c.principals.push(role("clerks"));
    assert!(named(&c, "etl").is_empty(), "{:#?}", check(&c));
}

fn windows_group(name: &str) -> Principal {
    Principal {
        login: Some(name.into()),
        login_kind: Some(LoginKind::WindowsGroup),
        ..Principal::new(name, PrincipalKind::Group)
    }
}

#[test]
fn take_ownership_of_the_database_makes_a_windows_groups_member_dbo() {
    // The group's members sign in with logins of their own that have no
    // user here: any of them may make itself the database's owner.
    let mut c = clean();
    c.principals.push(windows_group(r"CORP\etl-team"));
    c.permissions
        .push(grant(r"CORP\etl-team", "TAKE OWNERSHIP", Securable::Database));
    let report = check(&c);
    let f = writes_the_fence(&c, r"CORP\etl-team");
    assert_eq!(f.len(), 1, "{report:#?}");
    assert!(
        f[0].path[0].step.contains("ALTER AUTHORIZATION ON DATABASE::"),
        "{:#?}",
        f[0]
    );
}

#[test]
fn take_ownership_of_the_database_held_by_a_plain_user_makes_no_one_dbo() {
    // Its login already has a user here, and SQL Server refuses to make
    // such a login the owner; it may make no other login owner without
    // being able to act as that login.
    let c = etl_with("TAKE OWNERSHIP", Securable::Database);
    let report = check(&c);
    assert!(writes_the_fence(&c, "etl").is_empty(), "{report:#?}");
}
