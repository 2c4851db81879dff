//! Eighth probes of the lent writes: whose context a signature's rights are
//! added to when the signed code is reached from a module signed by a
//! login in sysadmin, or from a module WITH EXECUTE AS that goes back to its
//! caller; and the table an UPDATE of a common table expression over a
//! join writes when its FROM clause names that table in three parts.
//! Layouts written from Microsoft's documentation where SQL Server lets a
//! principal write a fence table and check does not name it (false clean),
//! or refuses it and check names it (false finding); each with a control of
//! the same shape that passes. A probe that fails names a hole in what
//! FP027 follows.

use crate::support;

use super::audit_reach_attack_probes5::{BUMP, clean_for_etl, fires_orders_trigger};
use super::audit_reach_leaving_roles::deny;
use super::audit_reach_lending_modules::{WRITE, no_login, reached, with_etl};
use fencepost::audit::{Catalog, Membership, Object, ObjectKind, Schema, SigningKey};
use support::fixtures::*;

/// `etl`, ops_owner (owner of the schema ops) and cert_writer (users
/// without login); CERTIFICATE::Writer's user is cert_writer, in
/// db_datawriter; CERTIFICATE::Root has no user and the login root_signer,
/// in sysadmin. ops.B (ops_owner's, so an EXEC from ops code chains to it)
/// updates fence.Resource and is signed with Writer; etl may not run it.
fn signed_callee() -> Catalog {
    let mut c = with_etl();
    for u in ["ops_owner", "cert_writer", "maint", "bystander"] {
        c.principals.push(no_login(u));
    }
    c.memberships.push(member("db_datawriter", "cert_writer"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    c.signing_keys = Some(vec![
        SigningKey {
            key: "CERTIFICATE".into(),
            name: "Writer".into(),
            owner: Some("dbo".into()),
            user: Some("cert_writer".into()),
            login: None,
            private_key: Some(false),
        },
        SigningKey {
            key: "CERTIFICATE".into(),
            name: "Root".into(),
            owner: Some("dbo".into()),
            user: None,
            login: Some("root_signer".into()),
            private_key: Some(false),
        },
    ]);
    server_facts(&mut c).role_members.push(Membership {
        role: "sysadmin".into(),
        member: "root_signer".into(),
    });
    let mut b: Object = module(
        "ops",
        "B",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.B AS {BUMP}"),
    );
    b.signed_by = vec!["CERTIFICATE::Writer".into()];
    c.objects.push(b);
    c
}

/// [`signed_callee`], and `etl` may run ops.A, signed with Root (whose
/// login is in sysadmin), whose text runs ops.B; ops.B is countersigned
/// with Root when `countersigned`. etl is denied UPDATE on fence.Resource.
fn sysadmin_signed_caller(countersigned: bool) -> Catalog {
    let mut c = signed_callee();
    let mut a: Object = module(
        "ops",
        "A",
        ObjectKind::Procedure,
        "CREATE PROCEDURE ops.A AS EXEC ops.B;",
    );
    a.signed_by = vec!["CERTIFICATE::Root".into()];
    c.objects.push(a);
    if countersigned {
        let b = c.objects.iter_mut().find(|o| o.name == "B").unwrap();
        b.counter_signed_by = vec!["CERTIFICATE::Root".into()];
    }
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "A")));
    c.permissions.push(deny("etl", "UPDATE", object("fence", "Resource")));
    c
}

// 1. "Module Signing (Database Engine)" / "Signing Stored Procedures in SQL
// Server": a signature adds its key's rights to the caller's and "does not
// change the execution context"; the added rights hold for the signed
// module only, and reach a module it calls only when that module is
// countersigned by the same key ("ADD SIGNATURE (Transact-SQL)", COUNTER
// SIGNATURE). ops.A is signed by Root, whose login is in sysadmin, so ops.A
// itself passes every check; but ops.B, not countersigned by Root, runs in
// etl's context with cert_writer's rights added. "Permissions Hierarchy
// (Database Engine)": a permission denied to any principal of the context
// is refused (sysadmin, absent from ops.B's context, does not pass over
// it), and "DENY (Transact-SQL)" made to etl on fence.Resource refuses
// ops.B's UPDATE. etl writes nothing. check gives ops.B's signature the
// context of ops.A's sysadmin signature (Beside::Nobody, "no check
// applies") instead of etl's, so no DENY binds: a false finding. Control:
// ops.B countersigned by Root keeps sysadmin in its context, and the
// UPDATE passes.

#[test]
fn probe8_01_a_sysadmin_signature_on_the_caller_does_not_lift_a_deny_in_a_signed_callee() {
    clean_for_etl(&sysadmin_signed_caller(false));
}

#[test]
fn probe8_01_control_the_callee_countersigned_by_the_sysadmin_key() {
    reached(
        &sysadmin_signed_caller(true),
        "etl",
        WRITE,
        &["EXECUTE on ops.A", "ops.B"],
    );
}

/// [`signed_callee`], and `etl` may run ops.A WITH EXECUTE AS 'maint' (who
/// holds nothing), which goes back to its caller and runs ops.B
/// (`EXECUTE AS CALLER; EXEC ops.B; REVERT;`); ops.A and ops.B are both
/// ops_owner's. `denied`: the user denied UPDATE on fence.Resource.
fn caller_region_runs_signed(denied: &str) -> Catalog {
    let mut c = signed_callee();
    let mut a: Object = module(
        "ops",
        "A",
        ObjectKind::Procedure,
        "CREATE PROCEDURE ops.A WITH EXECUTE AS 'maint' AS EXECUTE AS CALLER; EXEC ops.B; REVERT;",
    );
    a.execute_as = Some("maint".into());
    c.objects.push(a);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "A")));
    c.permissions.push(deny(denied, "UPDATE", object("fence", "Resource")));
    c
}

// 2. "EXECUTE AS (Transact-SQL)": inside a module, EXECUTE AS CALLER runs
// the statements after it as the module's caller, until REVERT;
// "Ownership Chains": when ops.A runs ops.B, both ops_owner's, the
// EXECUTE permission on ops.B is not evaluated (the chain compares owners,
// whatever the context); "Signing Stored Procedures in SQL Server": ops.B
// then runs in etl's context with cert_writer's rights (db_datawriter)
// added, and its UPDATE of fence.Resource passes. The DENY made to maint,
// whose context EXECUTE AS CALLER left, binds nothing there. etl writes
// the fence. check walks ops.A's callees from maint's part of its text
// only (the caller's part is the caller's own), and etl may not run
// ops.B itself: a false clean (see 5). Control: the DENY made to etl,
// whose context ops.B runs in, refuses the UPDATE.

#[test]
fn probe8_02_a_signed_callee_run_after_execute_as_caller_writes_for_the_caller() {
    reached(&caller_region_runs_signed("maint"), "etl", WRITE, &["ops.A", "ops.B"]);
}

#[test]
fn probe8_02_control_a_deny_to_the_caller_refuses_it() {
    clean_for_etl(&caller_region_runs_signed("etl"));
}

// 3. "FROM clause plus JOIN, APPLY, PIVOT (Transact-SQL)": a table source
// is `table_or_view_name [ [ AS ] table_alias ]`, the name in one to four
// parts (`database_name.schema_name.object_name` names a table of this
// database, orders, as `ops.Orders` does); "CREATE VIEW", Updatable Views:
// an UPDATE of the expression changes the one base table its SET columns
// come from, here ops.Orders (w.Shipped), whose AFTER UPDATE trigger
// ops.OrdersBump ("CREATE TRIGGER") updates fence.Resource as its caller,
// maint (in db_datawriter): etl, through ops.Fix, writes the fence. check
// matches the three-part name to ops.Orders and names etl (this probe
// passes). Control: the same query naming ops.Orders in two parts.

fn cte_over_join(orders: &str) -> Catalog {
    fires_orders_trigger(&format!(
        "WITH L AS (SELECT l.Id, w.Shipped FROM ops.Log AS l JOIN {orders} AS w ON w.Id = l.Id) \
         UPDATE L SET Shipped = 1;"
    ))
}

#[test]
fn probe8_03_a_cte_update_of_a_table_named_in_three_parts_fires_its_trigger() {
    reached(
        &cte_over_join("orders.ops.Orders"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

#[test]
fn probe8_03_control_the_table_named_in_two_parts() {
    reached(
        &cte_over_join("ops.Orders"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

// 4. "Table Hints (Transact-SQL)": `WITH ( <table_hint> )` follows the
// table source and its alias and changes nothing of what is written;
// same pages as 3 otherwise. check reads the alias before the hint and
// names etl (this probe passes). Control: the same query without the hint.

fn cte_over_join_hinted(hint: &str) -> Catalog {
    fires_orders_trigger(&format!(
        "WITH L AS (SELECT l.Id, w.Shipped FROM ops.Log AS l WITH (NOLOCK) JOIN ops.Orders AS w {hint} ON w.Id = l.Id) \
         UPDATE L SET Shipped = 1;"
    ))
}

#[test]
fn probe8_04_a_table_hint_after_the_alias_leaves_the_table_written() {
    reached(
        &cte_over_join_hinted("WITH (ROWLOCK)"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

#[test]
fn probe8_04_control_no_hint() {
    reached(&cte_over_join_hinted(""), "etl", WRITE, &["which fires ops.OrdersBump"]);
}

// 5. The root of 2, without EXECUTE AS: "Ownership Chains", ops.A and
// ops.B are both ops_owner's, so when ops.A runs ops.B the EXECUTE
// permission on ops.B is not evaluated; "Signing Stored Procedures in SQL
// Server" / "Module Signing (Database Engine)": ops.B runs in the caller's
// context with cert_writer's rights (db_datawriter) added, and its UPDATE
// of fence.Resource (ops_owner's code, dbo's table: checked) passes. etl,
// which may run ops.A only, writes the fence. check lends a signed module's
// write to whoever holds EXECUTE on it, and walks callees only from code
// that runs as someone (EXECUTE AS or signed): ops.A, run in etl's own
// context, is never walked, and etl is left clean: a false clean.
// Control: etl is granted EXECUTE on ops.B as well.

fn plain_caller_chains_to_signed(execute_on_b: bool) -> Catalog {
    let mut c = signed_callee();
    c.objects.push(module(
        "ops",
        "A",
        ObjectKind::Procedure,
        "CREATE PROCEDURE ops.A AS EXEC ops.B;",
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "A")));
    if execute_on_b {
        c.permissions.push(grant("etl", "EXECUTE", object("ops", "B")));
    }
    c
}

#[test]
fn probe8_05_a_signed_module_run_through_an_ownership_chain_lends_its_write() {
    reached(&plain_caller_chains_to_signed(false), "etl", WRITE, &["ops.A", "ops.B"]);
}

#[test]
fn probe8_05_control_execute_granted_on_the_signed_module() {
    reached(&plain_caller_chains_to_signed(true), "etl", WRITE, &["ops.B"]);
}

// 8. "CREATE TRIGGER (Transact-SQL)": a DML trigger runs in the context of
// the statement that fires it, here ops.Fix's UPDATE of stage.Orders, run
// as maint ("EXECUTE AS Clause": the module's context stays in force in
// what it runs); "Signing Stored Procedures in SQL Server": the signature
// on stage.OrdersBump adds cert_writer's rights (db_datawriter) to that
// context, maint's, and does not change it. etl's token is not in it, so
// "DENY (Transact-SQL)" made to etl does not refuse the trigger's UPDATE of
// fence.Resource: etl, through ops.Fix, writes the fence. check leads the
// lent write to the trigger's own node, whose signature it adds to the
// path's caller, etl, and binds etl's DENY: a false clean. Control: the
// DENY made to bystander.
//
// 9. The same pages, the other way: the DENY made to maint, in whose
// context the trigger runs, takes precedence over cert_writer's grant, and
// the UPDATE is refused; check binds the DENY to the path's caller, etl,
// which does not hold it, and names etl: a false finding. Control: maint
// denied another verb (DELETE) leaves the UPDATE.

/// [`signed_callee`], and `etl` may run ops.Fix WITH EXECUTE AS 'maint'
/// (granted UPDATE on stage.Orders alone), which updates stage.Orders
/// (stage_owner's, so no chain skips a check); its
/// AFTER UPDATE trigger stage.OrdersBump, signed with Writer, updates
/// fence.Resource. `denied`: the user denied UPDATE on fence.Resource.
fn lent_write_fires_signed_trigger(denied: &str) -> Catalog {
    let mut c = signed_callee();
    c.principals.push(no_login("stage_owner"));
    c.schemas.push(Schema {
        name: "stage".into(),
        owner: "stage_owner".into(),
    });
    c.objects
        .push(super::audit_reach_lending_modules::table("stage", "Orders"));
    c.permissions.push(grant("maint", "UPDATE", object("stage", "Orders")));
    let mut m: Object = module(
        "ops",
        "Fix",
        ObjectKind::Procedure,
        "CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS UPDATE stage.Orders SET Shipped = 1;",
    );
    m.execute_as = Some("maint".into());
    c.objects.push(m);
    let mut t = module(
        "stage",
        "OrdersBump",
        ObjectKind::Trigger,
        &format!("CREATE TRIGGER stage.OrdersBump ON stage.Orders AFTER UPDATE AS {BUMP}"),
    );
    t.parent = Some("stage.Orders".into());
    t.signed_by = vec!["CERTIFICATE::Writer".into()];
    c.objects.push(t);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c.permissions.push(deny(denied, "UPDATE", object("fence", "Resource")));
    c
}

#[test]
fn probe8_08_a_deny_to_the_caller_does_not_bind_a_signed_trigger_a_lent_write_fires() {
    reached(
        &lent_write_fires_signed_trigger("etl"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "stage.OrdersBump"],
    );
}

#[test]
fn probe8_08_control_the_deny_made_to_a_bystander() {
    reached(
        &lent_write_fires_signed_trigger("bystander"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "stage.OrdersBump"],
    );
}

#[test]
fn probe8_09_a_deny_to_the_context_a_signed_trigger_runs_in_refuses_its_write() {
    clean_for_etl(&lent_write_fires_signed_trigger("maint"));
}

#[test]
fn probe8_09_control_a_deny_of_another_verb_to_that_context() {
    let mut c = lent_write_fires_signed_trigger("bystander");
    c.permissions.push(deny("maint", "DELETE", object("fence", "Resource")));
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix", "stage.OrdersBump"]);
}
