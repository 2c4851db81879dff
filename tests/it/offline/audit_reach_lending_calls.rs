//! Modules that lend a write made by a procedure they call. "EXECUTE AS
//! Clause": the execution context a module WITH EXECUTE AS switches to
//! stays in force for the modules it calls, until it returns; so an EXEC
//! of another procedure is checked against that user (unless the two
//! modules' owners chain, "Ownership Chains"), and so are the callee's own
//! statements, unless they chain from its owner to the fence tables'.
//! "ADD SIGNATURE": a signature's rights are lost when the signed module
//! executes another module; only a module countersigned with the same key
//! keeps them for the call. Either way the caller makes the writes the
//! modules make, and nothing else.
//!
//! Each layout has a control of the same shape that stays clean.

use crate::support;

use super::audit_reach_lending_modules::{WRITE, named_for, no_login, reached, with_etl};
use fencepost::audit::{Catalog, ObjectKind, Schema, SigningKey};
use support::fixtures::*;

const OUTER: &str = "CREATE PROCEDURE ops.Nightly @Id bigint WITH EXECUTE AS 'maint' AS EXEC work.Bump @Id = @Id;";

const BUMP: &str = "CREATE PROCEDURE work.Bump @Id bigint AS \
     UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceId = @Id;";

/// `etl` may run ops.Nightly (owned by ops_owner), which runs as maint and
/// calls work.Bump, owned by `bump_owner` (the work schema's owner); maint
/// is in db_datawriter when `maint_writes` and may run work.Bump when
/// `maint_runs`.
fn nightly(bump_owner: &str, maint_writes: bool, maint_runs: bool) -> Catalog {
    let mut c = with_etl();
    for p in ["maint", "ops_owner", "work_owner"] {
        c.principals.push(no_login(p));
    }
    if maint_writes {
        c.memberships.push(member("db_datawriter", "maint"));
    }
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    c.schemas.push(Schema {
        name: "work".into(),
        owner: bump_owner.into(),
    });
    let mut outer = module("ops", "Nightly", ObjectKind::Procedure, OUTER);
    outer.execute_as = Some("maint".into());
    c.objects.push(outer);
    c.objects.push(module("work", "Bump", ObjectKind::Procedure, BUMP));
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Nightly")));
    if maint_runs {
        c.permissions.push(grant("maint", "EXECUTE", object("work", "Bump")));
    }
    c
}

/// "EXECUTE AS Clause": work.Bump, called from ops.Nightly, runs as maint
/// too; maint may run it and may update fence.Resource, so etl writes it.
#[test]
fn a_module_with_execute_as_calling_a_writer_the_user_may_run_writes_the_fence() {
    let c = nightly("work_owner", true, true);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Nightly", "work.Bump", "maint"]);
}

/// The EXEC of work.Bump is checked against maint, who may not run it.
#[test]
fn control_a_module_with_execute_as_calling_what_the_user_may_not_run_lends_nothing() {
    let c = nightly("work_owner", true, false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// work.Bump's UPDATE is checked against maint, who may not make it.
#[test]
fn control_a_module_with_execute_as_calling_a_writer_whose_write_the_user_may_not_make_lends_nothing() {
    let c = nightly("work_owner", false, true);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// "Ownership Chains": work.Bump is owned by dbo, as fence.Resource is, so
/// its UPDATE is not checked; maint need only run it.
#[test]
fn a_module_with_execute_as_calling_a_fence_owners_writer_writes_the_fence() {
    let c = nightly("dbo", false, true);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Nightly", "work.Bump", "dbo"]);
}

#[test]
fn control_a_module_with_execute_as_that_may_not_call_the_fence_owners_writer_lends_nothing() {
    let c = nightly("dbo", false, false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// "Ownership Chains": ops.Nightly and work.Bump are both owned by
/// ops_owner, so the EXEC of work.Bump is not checked; its UPDATE is,
/// against maint, who may make it.
#[test]
fn a_module_with_execute_as_chaining_to_a_writer_writes_the_fence() {
    let c = nightly("ops_owner", true, false);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Nightly", "work.Bump", "maint"]);
}

#[test]
fn control_a_module_with_execute_as_chaining_to_a_writer_whose_write_the_user_may_not_make_lends_nothing() {
    let c = nightly("ops_owner", false, false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// A module whose text names work.Bump without running it calls nothing.
#[test]
fn control_a_module_with_execute_as_that_only_mentions_a_writer_in_a_comment_lends_nothing() {
    let mut c = nightly("work_owner", true, true);
    object_mut(&mut c, "ops.Nightly").definition = Some(
        "CREATE PROCEDURE ops.Nightly @Id bigint WITH EXECUTE AS 'maint' AS \
         -- EXEC work.Bump used to run here\n SELECT 1;"
            .into(),
    );
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// `etl` may run ops.Nightly, signed with the certificate Writer whose user
/// cert_writer is in db_datawriter and may run work.Bump; work.Bump is
/// countersigned with Writer when `countersigned`.
fn signed_nightly(countersigned: bool) -> Catalog {
    let mut c = nightly("work_owner", false, false);
    object_mut(&mut c, "ops.Nightly").execute_as = None;
    object_mut(&mut c, "ops.Nightly").definition = Some(OUTER.replace(" WITH EXECUTE AS 'maint'", ""));
    c.principals.push(no_login("cert_writer"));
    c.memberships.push(member("db_datawriter", "cert_writer"));
    c.permissions
        .push(grant("cert_writer", "EXECUTE", object("work", "Bump")));
    c.signing_keys = Some(vec![SigningKey {
        key: "CERTIFICATE".into(),
        name: "Writer".into(),
        owner: Some("dbo".into()),
        user: Some("cert_writer".into()),
        login: None,
        private_key: Some(false),
    }]);
    object_mut(&mut c, "ops.Nightly").signed_by = vec!["CERTIFICATE::Writer".into()];
    if countersigned {
        object_mut(&mut c, "work.Bump").counter_signed_by = vec!["CERTIFICATE::Writer".into()];
    }
    c
}

/// "ADD SIGNATURE", Countersignatures: work.Bump, countersigned with the
/// key that signed ops.Nightly, keeps that signature's rights while
/// ops.Nightly calls it.
#[test]
fn a_signed_module_calling_a_countersigned_writer_writes_the_fence() {
    let c = signed_nightly(true);
    reached(
        &c,
        "etl",
        WRITE,
        &["EXECUTE on ops.Nightly", "work.Bump", "cert_writer"],
    );
}

/// Without the countersignature the signature is lost in the call: work.Bump
/// runs with etl's rights alone.
#[test]
fn control_a_signed_module_calling_a_writer_not_countersigned_lends_nothing() {
    let c = signed_nightly(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// "ADD SIGNATURE": a countersignature by itself grants no permissions, so
/// whoever may run work.Bump directly gets nothing from it.
#[test]
fn control_a_countersigned_module_run_directly_lends_nothing() {
    let mut c = signed_nightly(true);
    c.permissions.push(grant("etl", "EXECUTE", object("work", "Bump")));
    c.permissions
        .retain(|p| !(p.grantee == "etl" && p.on == object("ops", "Nightly")));
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}
