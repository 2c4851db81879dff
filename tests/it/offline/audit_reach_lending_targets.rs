//! What a lending module's statements reach besides a fence table named in
//! its text. "EXECUTE AS Clause": its statements, an EXEC among them, are
//! checked against the principal it runs as; "ADD SIGNATURE": a signed
//! module's statements are checked with the rights of the key's user added
//! to the caller's. So an EXEC of a fence_admin procedure that user may run
//! runs it ("GRANT Object Permissions": EXECUTE is checked on the procedure
//! called). "Modify Data Through a View" and "Synonyms (Database Engine)": a
//! write through an updatable view or a synonym is checked on the view or
//! synonym, and its base object, of the same owner, is not checked at all
//! ("Ownership Chains"). Either way the caller makes that call or write,
//! and nothing else the user may do.
//!
//! Each layout has a control of the same shape that stays clean.

use crate::support;

use super::audit_reach_lending_modules::{WRITE, named_for, naming, no_login, reached, with_etl};
use fencepost::audit::{Catalog, Object, ObjectKind, Schema, SigningKey};
use support::fixtures::*;

const ADMIN: &str = "run fence_admin procedures";

/// `etl` may run `ops.<name>` (owned by ops_owner, so no chain reaches
/// dbo's code or tables), whose text is `text`, WITH EXECUTE AS maint.
fn lending(name: &str, text: &str) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("maint"));
    c.principals.push(no_login("ops_owner"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    let mut m = module("ops", name, ObjectKind::Procedure, text);
    m.execute_as = Some("maint".into());
    c.objects.push(m);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", name)));
    c
}

const RELEASE: &str =
    "CREATE PROCEDURE ops.Release @Id bigint WITH EXECUTE AS 'maint' AS EXEC fence_admin.ForceRelease @Id;";

/// ops.Release runs as maint, a member of fence_operator when
/// `operator`, which the deploy grants EXECUTE on fence_admin.ForceRelease.
fn release(operator: bool) -> Catalog {
    let mut c = lending("Release", RELEASE);
    if operator {
        c.memberships.push(member("fence_operator", "maint"));
    }
    c
}

/// "EXECUTE AS Clause": the EXEC of fence_admin.ForceRelease is checked
/// against maint, who may run it through fence_operator: etl, no
/// operator, runs it through ops.Release.
#[test]
fn a_module_with_execute_as_an_operator_lends_its_call_of_a_fence_admin_procedure() {
    let c = release(true);
    reached(
        &c,
        "etl",
        ADMIN,
        &["EXECUTE on ops.Release", "fence_admin.ForceRelease", "maint"],
    );
}

#[test]
fn control_a_module_with_execute_as_a_user_who_may_not_run_the_fence_admin_procedure_lends_nothing() {
    let c = release(false);
    assert!(!named_for(&c, "etl", ADMIN), "{:#?}", check(&c));
    assert!(naming(&c, "etl").is_empty(), "{:#?}", check(&c));
}

/// The caller does not become maint: it makes that call, and nothing else
/// maint may do (here, write the fence tables).
#[test]
fn control_the_caller_of_a_module_lending_a_fence_admin_call_does_not_become_its_user() {
    let mut c = release(true);
    c.memberships.push(member("db_datawriter", "maint"));
    reached(&c, "etl", ADMIN, &["EXECUTE on ops.Release"]);
    assert!(!naming(&c, "maint").is_empty(), "{:#?}", check(&c));
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// A module that only names the procedure in a comment calls nothing.
#[test]
fn control_a_module_with_execute_as_an_operator_that_only_mentions_fence_admin_lends_nothing() {
    let c = lending(
        "Release",
        "CREATE PROCEDURE ops.Release @Id bigint WITH EXECUTE AS 'maint' AS \
         -- EXEC fence_admin.ForceRelease ran here once\n SELECT 1;",
    );
    let mut c = c;
    c.memberships.push(member("fence_operator", "maint"));
    assert!(!named_for(&c, "etl", ADMIN), "{:#?}", check(&c));
}

/// ops.Release runs work.Step, owned by work_owner, which maint may run:
/// "EXECUTE AS Clause", the context stays maint's in what it calls, so
/// work.Step's EXEC of fence_admin.ForceRelease is checked against maint.
fn nested_release(operator: bool) -> Catalog {
    let mut c = release(operator);
    object_mut(&mut c, "ops.Release").definition =
        Some("CREATE PROCEDURE ops.Release @Id bigint WITH EXECUTE AS 'maint' AS EXEC work.Step @Id;".into());
    c.principals.push(no_login("work_owner"));
    c.schemas.push(Schema {
        name: "work".into(),
        owner: "work_owner".into(),
    });
    c.objects.push(module(
        "work",
        "Step",
        ObjectKind::Procedure,
        "CREATE PROCEDURE work.Step @Id bigint AS EXEC fence_admin.ForceRelease @Id;",
    ));
    c.permissions.push(grant("maint", "EXECUTE", object("work", "Step")));
    c
}

#[test]
fn a_module_with_execute_as_an_operator_lends_a_fence_admin_call_made_by_what_it_runs() {
    let c = nested_release(true);
    reached(
        &c,
        "etl",
        ADMIN,
        &["EXECUTE on ops.Release", "work.Step", "fence_admin.ForceRelease"],
    );
}

#[test]
fn control_a_module_with_execute_as_a_non_operator_running_a_fence_admin_caller_lends_nothing() {
    let c = nested_release(false);
    assert!(!named_for(&c, "etl", ADMIN), "{:#?}", check(&c));
}

/// ops.Release, without EXECUTE AS, signed with the certificate Operator,
/// whose user cert_operator is in fence_operator when `operator`.
fn signed_release(operator: bool) -> Catalog {
    let mut c = release(false);
    let m = object_mut(&mut c, "ops.Release");
    m.execute_as = None;
    m.definition = Some(RELEASE.replace(" WITH EXECUTE AS 'maint'", ""));
    m.signed_by = vec!["CERTIFICATE::Operator".into()];
    c.principals.push(no_login("cert_operator"));
    if operator {
        c.memberships.push(member("fence_operator", "cert_operator"));
    }
    c.signing_keys = Some(vec![SigningKey {
        key: "CERTIFICATE".into(),
        name: "Operator".into(),
        owner: Some("dbo".into()),
        user: Some("cert_operator".into()),
        login: None,
        private_key: Some(false),
    }]);
    c
}

/// "ADD SIGNATURE": the EXEC in the signed module is checked with
/// cert_operator's rights added to etl's.
#[test]
fn a_module_signed_by_an_operator_certificate_lends_its_call_of_a_fence_admin_procedure() {
    let c = signed_release(true);
    reached(
        &c,
        "etl",
        ADMIN,
        &["EXECUTE on ops.Release", "fence_admin.ForceRelease", "cert_operator"],
    );
}

#[test]
fn control_a_module_signed_by_a_certificate_whose_user_may_not_run_fence_admin_lends_nothing() {
    let c = signed_release(false);
    assert!(!named_for(&c, "etl", ADMIN), "{:#?}", check(&c));
}

const FIX_VIEW: &str = "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
     UPDATE dbo.ResourceView SET Generation = Generation + 1 WHERE ResourceId = @Id;";

/// dbo.ResourceView, an updatable view over fence.Resource owned by dbo as
/// the fence is; maint holds `right` on it.
fn through_view(right: &str) -> Catalog {
    let mut c = lending("Fix", FIX_VIEW);
    c.objects.push(Object {
        kind: ObjectKind::View,
        ..module(
            "dbo",
            "ResourceView",
            ObjectKind::View,
            "CREATE VIEW dbo.ResourceView AS SELECT ResourceId, Generation FROM fence.Resource;",
        )
    });
    c.permissions.push(grant("maint", right, object("dbo", "ResourceView")));
    c
}

/// "Modify Data Through a View": maint's UPDATE on the view writes
/// fence.Resource, which the chain from dbo leaves unchecked; ops.Fix
/// makes that UPDATE as maint for etl.
#[test]
fn a_module_with_execute_as_writing_through_a_view_its_user_may_update_writes_the_fence() {
    let c = through_view("UPDATE");
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix", "dbo.ResourceView", "maint"]);
}

/// maint may only read the view: the UPDATE is refused.
#[test]
fn control_a_module_with_execute_as_writing_through_a_view_its_user_may_only_read_lends_nothing() {
    let c = through_view("SELECT");
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// dbo.R, a synonym for fence.Resource owned by dbo as the table is; maint
/// holds `right` on the synonym.
fn through_synonym(right: &str) -> Catalog {
    let mut c = lending(
        "Fix",
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
         UPDATE dbo.R SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    );
    c.objects
        .push(module("dbo", "R", ObjectKind::Synonym, "[fence].[Resource]"));
    c.permissions.push(grant("maint", right, object("dbo", "R")));
    c
}

/// "Synonyms (Database Engine)": the UPDATE through dbo.R is checked on the
/// synonym, where maint holds it, and not on fence.Resource.
#[test]
fn a_module_with_execute_as_writing_through_a_synonym_its_user_may_update_writes_the_fence() {
    let c = through_synonym("UPDATE");
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix", "dbo.R", "maint"]);
}

#[test]
fn control_a_module_with_execute_as_writing_through_a_synonym_its_user_may_only_read_lends_nothing() {
    let c = through_synonym("SELECT");
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// ops.OrdersRelease, an AFTER INSERT trigger on ops.Orders WITH EXECUTE AS
/// maint (a member of fence_operator when `operator`), EXECs
/// fence_admin.ForceRelease; etl may INSERT into ops.Orders.
fn release_trigger(operator: bool) -> Catalog {
    let mut c = release(operator);
    c.permissions
        .retain(|p| !(p.grantee == "etl" && p.on == object("ops", "Release")));
    c.objects.retain(|o| o.name != "Release");
    c.objects.push(Object {
        definition: None,
        ..module("ops", "Orders", ObjectKind::Table, "")
    });
    let mut t = module(
        "ops",
        "OrdersRelease",
        ObjectKind::Trigger,
        "CREATE TRIGGER ops.OrdersRelease ON ops.Orders WITH EXECUTE AS 'maint' AFTER INSERT AS \
         EXEC fence_admin.ForceRelease 1;",
    );
    t.parent = Some("ops.Orders".into());
    t.execute_as = Some("maint".into());
    c.objects.push(t);
    c.permissions.push(grant("etl", "INSERT", object("ops", "Orders")));
    c
}

/// "CREATE TRIGGER": the trigger's statements run as maint for whoever
/// fires it, so etl's INSERT runs fence_admin.ForceRelease as maint.
#[test]
fn a_trigger_with_execute_as_an_operator_lends_its_fence_admin_call_to_whoever_fires_it() {
    let c = release_trigger(true);
    reached(
        &c,
        "etl",
        ADMIN,
        &["INSERT on ops.Orders", "ops.OrdersRelease", "fence_admin.ForceRelease"],
    );
}

#[test]
fn control_a_trigger_with_execute_as_a_non_operator_calling_fence_admin_lends_nothing() {
    let c = release_trigger(false);
    assert!(!named_for(&c, "etl", ADMIN), "{:#?}", check(&c));
}
