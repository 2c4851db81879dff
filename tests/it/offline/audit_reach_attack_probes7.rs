//! Seventh probes of the lent writes: whose DENY refuses the write a
//! signature lends when the signed code is reached in a context other than
//! the caller's own (an EXECUTE AS before it, or on the same module), when
//! the caller may leave the denied role, and when the refused write would
//! fire a trigger; and the one table an UPDATE of a common table expression
//! over a join writes when an alias is used again inside a derived table.
//! Layouts written from Microsoft's documentation where SQL Server lets a
//! principal write a fence table and check does not name it (false clean),
//! or refuses it and check names it (false finding); each with a control of
//! the same shape that passes. A probe that fails names a hole in what
//! FP027 follows.

use crate::support;

use super::audit_reach_attack_probes5::{clean_for_etl, fires_orders_trigger};
use super::audit_reach_leaving_roles::{deny, on_role};
use super::audit_reach_lending_modules::{WRITE, no_login, reached, with_etl};
use fencepost::audit::{Catalog, Object, ObjectKind, Schema, SigningKey};
use support::fixtures::*;

const BUMP: &str = "UPDATE fence.Resource SET Generation = Generation + 1;";

/// `etl`, and maint, ops_owner, cert_writer and bystander (users without
/// login); cert_writer, the user of CERTIFICATE::Writer, is in
/// db_datawriter; the schema ops is ops_owner's.
fn with_writer_key() -> Catalog {
    let mut c = with_etl();
    for u in ["maint", "ops_owner", "cert_writer", "bystander"] {
        c.principals.push(no_login(u));
    }
    c.memberships.push(member("db_datawriter", "cert_writer"));
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
    c
}

/// [`with_writer_key`], and `etl` may run ops.A WITH EXECUTE AS maint
/// (who holds nothing), whose text runs ops.B; ops.B (ops_owner's too, so
/// the EXEC chains; maint is granted EXECUTE on it anyway) updates
/// fence.Resource and is signed with CERTIFICATE::Writer. `denied`: the
/// user denied UPDATE on fence.Resource.
fn run_as_then_signed(denied: &str) -> Catalog {
    let mut c = with_writer_key();
    let mut a: Object = module(
        "ops",
        "A",
        ObjectKind::Procedure,
        "CREATE PROCEDURE ops.A WITH EXECUTE AS 'maint' AS EXEC ops.B;",
    );
    a.execute_as = Some("maint".into());
    c.objects.push(a);
    let mut b: Object = module(
        "ops",
        "B",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.B AS {BUMP}"),
    );
    b.signed_by = vec!["CERTIFICATE::Writer".into()];
    c.objects.push(b);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "A")));
    c.permissions.push(grant("maint", "EXECUTE", object("ops", "B")));
    c.permissions.push(deny(denied, "UPDATE", object("fence", "Resource")));
    c
}

// 1. "EXECUTE AS Clause (Transact-SQL)": a module WITH EXECUTE AS 'user'
// runs as that user, and the context stays in force in the modules it
// calls; "Signing Stored Procedures in SQL Server": when a signed procedure
// is executed, "SQL Server combines the permissions of the certificate user
// ... with those of the caller", and signing "does not change the execution
// context". ops.B's caller is maint's context, which no longer holds etl:
// ops.B's UPDATE runs with maint's and cert_writer's tokens, and the DENY
// to etl ("DENY (Transact-SQL)") is in neither. etl writes fence.Resource.
// check takes the DENYs of the signed write for the caller of ops.A and
// binds etl: a false clean. Control: the DENY is made to bystander.

#[test]
fn probe7_01_a_deny_to_the_caller_of_a_module_run_as_another_does_not_bind_its_signed_callee() {
    reached(&run_as_then_signed("etl"), "etl", WRITE, &["EXECUTE on ops.A", "ops.B"]);
}

#[test]
fn probe7_01_control_the_deny_made_to_a_bystander() {
    reached(
        &run_as_then_signed("bystander"),
        "etl",
        WRITE,
        &["EXECUTE on ops.A", "ops.B"],
    );
}

// 2. Same pages, the other way: the DENY is made to maint, whose token is
// the context ops.B's signature adds cert_writer's rights to; "DENY
// (Transact-SQL)": DENY takes precedence over the grant cert_writer holds
// through db_datawriter, so ops.B's UPDATE is refused and etl, through
// ops.A, writes nothing. check leaves etl clean (this probe passes; it
// guards the same path as 1 from the other side). Control: maint is denied
// another verb (DELETE), which leaves the UPDATE.

fn run_as_then_signed_verb(verb: &str) -> Catalog {
    let mut c = run_as_then_signed("bystander");
    c.permissions.push(deny("maint", verb, object("fence", "Resource")));
    c
}

#[test]
fn probe7_02_a_deny_to_the_context_a_signed_callee_runs_in_refuses_its_write() {
    clean_for_etl(&run_as_then_signed_verb("UPDATE"));
}

#[test]
fn probe7_02_control_a_deny_of_another_verb_to_that_context() {
    reached(
        &run_as_then_signed_verb("DELETE"),
        "etl",
        WRITE,
        &["EXECUTE on ops.A", "ops.B"],
    );
}

/// `etl` may run ops.Fix, WITH EXECUTE AS maint (holding nothing) and
/// signed with CERTIFICATE::Writer (cert_writer in db_datawriter), which
/// updates fence.Resource; `denied` is denied UPDATE on fence.Resource.
fn run_as_and_signed(denied: &str) -> Catalog {
    let mut c = with_writer_key();
    let mut m: Object = module(
        "ops",
        "Fix",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS {BUMP}"),
    );
    m.execute_as = Some("maint".into());
    m.signed_by = vec!["CERTIFICATE::Writer".into()];
    c.objects.push(m);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c.permissions.push(deny(denied, "UPDATE", object("fence", "Resource")));
    c
}

// 3. "EXECUTE AS Clause (Transact-SQL)" / "Signing Stored Procedures in SQL
// Server": ops.Fix is both WITH EXECUTE AS 'maint' and signed. Its
// statements run as maint (the caller's context is replaced), and the
// signature adds cert_writer's rights to that context, not to etl's, which
// is no longer in force. The DENY to etl does not refuse the UPDATE: etl
// writes fence.Resource. check binds the caller's DENY to the signature's
// write whatever EXECUTE AS the same module has: a false clean. Control:
// the DENY is made to bystander.

#[test]
fn probe7_03_a_deny_to_the_caller_does_not_bind_a_signature_on_a_module_run_as_another() {
    reached(&run_as_and_signed("etl"), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe7_03_control_the_deny_made_to_a_bystander() {
    reached(&run_as_and_signed("bystander"), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

// 4. Same pages: the DENY is made to maint, the context ops.Fix's
// signature adds its rights to; it takes precedence over cert_writer's
// grant ("DENY (Transact-SQL)") and the UPDATE is refused. check binds a
// DENY of the signed write only to etl, and names it: a false finding.
// Control: the DENY made to bystander (as 3's).

#[test]
fn probe7_04_a_deny_to_the_execute_as_user_binds_the_signature_on_the_same_module() {
    clean_for_etl(&run_as_and_signed("maint"));
}

#[test]
fn probe7_04_control_the_deny_made_to_a_bystander() {
    reached(&run_as_and_signed("bystander"), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

// 5. "CREATE VIEW (Transact-SQL)", Updatable Views (which "WITH
// common_table_expression" applies to an expression an UPDATE names): a
// modification "must reference columns from only one base table"; "FROM
// clause plus JOIN, APPLY, PIVOT (Transact-SQL)": a derived table is a
// query of its own, so the alias w inside it names its own table, and the
// outer w is ops.Orders. Log.Shipped is the outer w.Shipped: the UPDATE
// changes ops.Orders, whose AFTER UPDATE trigger ops.OrdersBump ("CREATE
// TRIGGER") updates fence.Resource as its caller, maint (in
// db_datawriter): etl, through ops.Fix, writes the fence. check takes the
// first `name AS w` anywhere in the query, the derived table's ops.Log,
// for the table written and fires nothing: a false clean. Control: the
// derived table's alias is x.

fn cte_alias_reused(inner: &str) -> Catalog {
    fires_orders_trigger(&format!(
        "WITH Log AS (SELECT w.Id, w.Shipped FROM (SELECT {inner}.Id FROM ops.Log AS {inner}) AS d \
         JOIN ops.Orders AS w ON w.Id = d.Id) UPDATE Log SET Shipped = 1;"
    ))
}

#[test]
fn probe7_05_an_alias_reused_inside_a_derived_table_does_not_name_the_table_a_cte_update_writes() {
    reached(&cte_alias_reused("w"), "etl", WRITE, &["which fires ops.OrdersBump"]);
}

#[test]
fn probe7_05_control_the_derived_table_under_another_alias() {
    reached(&cte_alias_reused("x"), "etl", WRITE, &["which fires ops.OrdersBump"]);
}

// 6. "ALTER ROLE (Transact-SQL)": dropping a member needs ALTER on the
// role; "Signing Stored Procedures in SQL Server": the signature's rights
// are combined with the caller's. etl is in loaders, denied UPDATE on
// fence.Resource, and holds ALTER on loaders: it runs `ALTER ROLE loaders
// DROP MEMBER etl`, then ops.Fix (signed by CERTIFICATE::Writer, whose user
// is in db_datawriter), whose UPDATE no DENY in its context refuses any
// more; check names it, leaving loaders first (this probe passes).
// Control: etl may not leave loaders, and is refused.

fn signed_denied_through_a_role(may_leave: bool) -> Catalog {
    let mut c = with_writer_key();
    let mut m: Object = module(
        "ops",
        "Fix",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.Fix AS {BUMP}"),
    );
    m.signed_by = vec!["CERTIFICATE::Writer".into()];
    c.objects.push(m);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c.principals.push(role("loaders"));
    c.memberships.push(member("loaders", "etl"));
    c.permissions
        .push(deny("loaders", "UPDATE", object("fence", "Resource")));
    if may_leave {
        c.permissions.push(grant("etl", "ALTER", on_role("loaders")));
    }
    c
}

#[test]
fn probe7_06_a_caller_that_may_leave_the_denied_role_writes_through_the_signature() {
    reached(
        &signed_denied_through_a_role(true),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "DROP MEMBER [etl]"],
    );
}

#[test]
fn probe7_06_control_a_caller_that_may_not_leave_it_is_refused() {
    clean_for_etl(&signed_denied_through_a_role(false));
}

// 7. "Signing Stored Procedures in SQL Server": the signature's rights are
// combined with the caller's, so a DENY to the caller ("DENY
// (Transact-SQL)") still refuses a statement of the signed module; "CREATE
// TRIGGER": an AFTER trigger fires only when its statement succeeds.
// ops.Fix (signed by CERTIFICATE::Writer, whose user is in db_datawriter)
// updates stage.Orders (stage_owner's, so no chain skips the check),
// whose trigger stage.OrdersBump runs WITH EXECUTE AS 'maint' (in
// db_datawriter) and updates fence.Resource. etl is denied UPDATE on
// stage.Orders: ops.Fix's UPDATE is refused, the trigger never fires, and
// etl writes nothing; check leaves it clean (this probe passes).
// Control: etl is denied DELETE on stage.Orders,
// which leaves the UPDATE and the trigger's write.

fn signed_write_fires_trigger(denied_verb: &str) -> Catalog {
    let mut c = with_writer_key();
    c.principals.push(no_login("stage_owner"));
    c.schemas.push(Schema {
        name: "stage".into(),
        owner: "stage_owner".into(),
    });
    c.memberships.push(member("db_datawriter", "maint"));
    c.objects
        .push(super::audit_reach_lending_modules::table("stage", "Orders"));
    let mut m: Object = module(
        "ops",
        "Fix",
        ObjectKind::Procedure,
        "CREATE PROCEDURE ops.Fix AS UPDATE stage.Orders SET Shipped = 1;",
    );
    m.signed_by = vec!["CERTIFICATE::Writer".into()];
    c.objects.push(m);
    let mut t = module(
        "stage",
        "OrdersBump",
        ObjectKind::Trigger,
        &format!("CREATE TRIGGER stage.OrdersBump ON stage.Orders WITH EXECUTE AS 'maint' AFTER UPDATE AS {BUMP}"),
    );
    t.parent = Some("stage.Orders".into());
    t.execute_as = Some("maint".into());
    c.objects.push(t);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c.permissions.push(deny("etl", denied_verb, object("stage", "Orders")));
    c
}

#[test]
fn probe7_07_a_deny_to_the_caller_refuses_the_signed_write_that_would_fire_a_trigger() {
    clean_for_etl(&signed_write_fires_trigger("UPDATE"));
}

#[test]
fn probe7_07_control_a_deny_of_another_verb_leaves_the_trigger_firing() {
    reached(
        &signed_write_fires_trigger("DELETE"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "stage.OrdersBump"],
    );
}
