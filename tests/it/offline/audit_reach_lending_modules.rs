//! Modules that lend their caller exactly their own write. "EXECUTE AS
//! Clause": the statements of a module WITH EXECUTE AS a user run as that
//! user, whoever calls it. "Module Signing" / "ADD SIGNATURE": a module
//! signed with a certificate runs with the rights of the certificate's user
//! added to the caller's. Either way whoever may run the module does what
//! its text does with those rights, and nothing else: the caller does not
//! become that user.
//!
//! Each layout has a control of the same shape that stays clean.

use crate::support;

use super::audit_reach_leaving_roles::deny;
use fencepost::audit::{
    Catalog, Finding, Object, ObjectKind, Principal, Schema, Securable, SigningKey, UserAuthentication,
};
use support::fixtures::*;

/// The clean deployment with `etl`, a login that is no service.
pub(super) fn with_etl() -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    c
}

/// A table of `schema_name` (no text).
pub(super) fn table(schema_name: &str, name: &str) -> Object {
    Object {
        definition: None,
        ..module(schema_name, name, ObjectKind::Table, "")
    }
}

/// How long `check` took on `c`, when it answered within `secs` seconds.
pub(super) fn within(secs: u64, c: Catalog) -> Option<std::time::Duration> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let start = std::time::Instant::now();
        let _ = check(&c);
        let _ = tx.send(start.elapsed());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs)).ok()
}

/// Every finding of any rule that names `principal`.
pub(super) fn naming(c: &Catalog, principal: &str) -> Vec<Finding> {
    check(c)
        .findings
        .into_iter()
        .filter(|f| {
            f.principal
                .as_deref()
                .is_some_and(|p| p.split(", ").any(|n| n.eq_ignore_ascii_case(principal)))
        })
        .collect()
}

/// The finding naming `principal` with a path to `goal` whose steps mention
/// each of `through`.
pub(super) fn reached(c: &Catalog, principal: &str, goal: &str, through: &[&str]) -> Finding {
    let found = naming(c, principal);
    let hit = found.iter().find(|f| {
        let steps = step_texts(f).join(" | ");
        !f.path.is_empty()
            && (f.permission.as_deref() == Some(goal) || steps.contains(goal))
            && through.iter().all(|t| steps.contains(t))
    });
    match hit {
        Some(f) => f.clone(),
        None => panic!(
            "{principal} is not named with a path to {goal} through {through:?}; findings naming it: {found:#?}\n\
             whole report: {:#?}",
            check(c)
        ),
    }
}

/// Whether FP027 names `principal` as reaching `goal`.
pub(super) fn named_for(c: &Catalog, principal: &str, goal: &str) -> bool {
    reaching(c, principal)
        .iter()
        .any(|f| f.permission.as_deref() == Some(goal))
}

pub(super) const WRITE: &str = "write the fence tables";

const UPDATE_RESOURCE: &str = "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
     UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceId = @Id;";

/// A user without login.
pub(super) fn no_login(name: &str) -> Principal {
    Principal {
        authentication: Some(UserAuthentication::NoLogin),
        ..user(name, None)
    }
}

/// `etl` may run ops.Fix, whose text is `text`, WITH EXECUTE AS `maint`, a
/// user without login in db_datawriter when `maint_writes`. The ops schema
/// is owned by ops_owner, not dbo, so no ownership chain reaches the fence.
fn execute_as_maint(text: &str, maint_writes: bool) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("maint"));
    c.principals.push(no_login("ops_owner"));
    if maint_writes {
        c.memberships.push(member("db_datawriter", "maint"));
    }
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    let mut fix = module("ops", "Fix", ObjectKind::Procedure, text);
    fix.execute_as = Some("maint".into());
    c.objects.push(fix);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c
}

/// "EXECUTE AS Clause": the statements of ops.Fix run as maint, a user
/// without login in db_datawriter, whoever calls it; etl may call it. The
/// module is owned by the ops schema's owner, not dbo, so no chain is
/// needed: maint's own UPDATE right writes the fence.
#[test]
fn execute_on_a_module_with_execute_as_a_writer_writes_the_fence_as_it() {
    let c = execute_as_maint(UPDATE_RESOURCE, true);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn control_a_module_with_execute_as_a_writer_that_only_reads_lends_nothing() {
    let c = execute_as_maint(
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
         SELECT Generation FROM fence.Resource WHERE ResourceId = @Id;",
        true,
    );
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn control_a_module_with_execute_as_a_user_without_write_rights_lends_nothing() {
    let c = execute_as_maint(UPDATE_RESOURCE, false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
    assert!(naming(&c, "etl").is_empty(), "{:#?}", check(&c));
}

/// The caller does not become maint: running ops.Fix does what its text
/// does as maint, and nothing else maint may do (here, change the shipped
/// procedures).
#[test]
fn control_the_caller_of_a_writing_module_does_not_become_its_user() {
    let mut c = execute_as_maint(UPDATE_RESOURCE, true);
    c.permissions.push(grant("maint", "ALTER", schema("fence_admin")));
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
    let on_admin = |f: &Finding| f.why.contains("fence_admin") || f.object.contains("fence_admin");
    assert!(naming(&c, "maint").iter().any(on_admin), "{:#?}", check(&c));
    assert!(!naming(&c, "etl").iter().any(on_admin), "{:#?}", check(&c));
    assert!(
        !named_for(&c, "etl", "change the shipped procedures"),
        "{:#?}",
        check(&c)
    );
}

/// The module lends the write its text makes, not every write maint may
/// make: an INSERT where maint may only UPDATE does nothing.
#[test]
fn control_a_module_whose_write_its_user_may_not_make_lends_nothing() {
    let mut c = execute_as_maint(
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
         INSERT INTO fence.Resource (ResourceId) VALUES (@Id);",
        false,
    );
    c.permissions
        .push(grant("maint", "UPDATE", object("fence", "Resource")));
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn a_module_inserting_where_its_user_may_insert_writes_the_fence() {
    let mut c = execute_as_maint(
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
         INSERT INTO fence.Resource (ResourceId) VALUES (@Id);",
        false,
    );
    c.permissions
        .push(grant("maint", "INSERT", object("fence", "Resource")));
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix", "INSERT"]);
}

/// A DENY of the write made to maint binds the module's statements, which
/// run as maint.
#[test]
fn control_a_module_whose_user_is_denied_the_write_lends_nothing() {
    let mut c = execute_as_maint(UPDATE_RESOURCE, true);
    c.permissions.push(deny("maint", "UPDATE", schema("fence")));
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// "EXECUTE AS Clause": EXECUTE AS OWNER runs the statements as the
/// module's owner, here ops_owner, granted UPDATE on fence.Resource; the
/// owners differ, so this is no ownership chain.
#[test]
fn execute_on_a_module_with_execute_as_owner_writes_with_the_owners_right() {
    let mut c = execute_as_maint(UPDATE_RESOURCE, false);
    object_mut(&mut c, "ops.Fix").execute_as = Some("OWNER".into());
    c.permissions
        .push(grant("ops_owner", "UPDATE", object("fence", "Resource")));
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

/// SQL built at run time from a parameter runs whatever the caller hands
/// it, as maint: the caller does all maint may, as check already follows.
#[test]
fn execute_on_a_module_running_dynamic_sql_as_a_writer_writes_the_fence() {
    let c = execute_as_maint(
        "CREATE PROCEDURE ops.Fix @sql nvarchar(max) WITH EXECUTE AS 'maint' AS EXEC(@sql);",
        true,
    );
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

/// `etl` may run ops.Load, which updates fence.Resource, owned by
/// ops_owner and signed with the certificate Writer, whose user cert_writer
/// is in db_datawriter when `writes`.
pub(super) fn signed_by_writer(text: &str, writes: bool) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("cert_writer"));
    c.principals.push(no_login("ops_owner"));
    if writes {
        c.memberships.push(member("db_datawriter", "cert_writer"));
    }
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    c.signing_keys = Some(vec![SigningKey {
        key: "CERTIFICATE".into(),
        name: "Writer".into(),
        owner: Some("dbo".into()),
        user: Some("cert_writer".into()),
        login: None,
        private_key: Some(false),
    }]);
    let mut load: Object = module("ops", "Load", ObjectKind::Procedure, text);
    load.signed_by = vec!["CERTIFICATE::Writer".into()];
    c.objects.push(load);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Load")));
    c
}

pub(super) const LOAD: &str = "CREATE PROCEDURE ops.Load @Id bigint AS \
     UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceId = @Id;";

/// "Module Signing" / "ADD SIGNATURE": a module signed with a certificate
/// runs with the rights of the certificate's user added to the caller's.
/// ops.Load, owned by ops_owner (no chain to the fence), is signed with
/// Writer, whose user is in db_datawriter; etl may run it, and its UPDATE of
/// fence.Resource passes on the signature.
#[test]
fn execute_on_a_module_signed_by_a_writer_certificate_writes_the_fence() {
    let c = signed_by_writer(LOAD, true);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Load"]);
}

#[test]
fn control_a_module_signed_by_a_certificate_whose_user_may_not_write_lends_nothing() {
    let c = signed_by_writer(LOAD, false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn control_a_signed_module_that_only_reads_lends_nothing() {
    let c = signed_by_writer(
        "CREATE PROCEDURE ops.Load @Id bigint AS SELECT Generation FROM fence.Resource WHERE ResourceId = @Id;",
        true,
    );
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// "EXECUTE AS Clause" with dbo: dbo passes every permission check in its
/// database, granted nothing, so a module running as dbo lends its write
/// though no grant names dbo.
#[test]
fn execute_on_a_module_with_execute_as_dbo_writes_the_fence() {
    let mut c = execute_as_maint(UPDATE_RESOURCE, false);
    c.objects.iter_mut().find(|o| o.name == "Fix").unwrap().execute_as = Some("dbo".into());
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

/// A member of db_owner passes every check in the database too.
#[test]
fn execute_on_a_module_with_execute_as_a_db_owner_member_writes_the_fence() {
    let mut c = execute_as_maint(UPDATE_RESOURCE, false);
    c.memberships.push(member("db_owner", "maint"));
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}
