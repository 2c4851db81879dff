//! Second probes of the lent calls and writes (triggers, callees, switches
//! inside a module, recursion): layouts written from Microsoft's
//! documentation where SQL Server lets a principal write a fence table
//! through a module WITH EXECUTE AS (or signed), each with a control of the
//! same shape. A probe that fails names a hole in what FP027 follows.

use crate::support;

use super::audit_reach_leaving_roles::on_role;
use super::audit_reach_lending_modules::{WRITE, named_for, no_login, reached, table, with_etl, within};
use fencepost::audit::{Catalog, ObjectKind, Schema, SigningKey};
use support::fixtures::*;

/// `etl` may run ops.Fix (ops_owner's) WITH EXECUTE AS maint, text `text`.
fn lending(text: &str) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("maint"));
    c.principals.push(no_login("ops_owner"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    let mut m = module("ops", "Fix", ObjectKind::Procedure, text);
    m.execute_as = Some("maint".into());
    c.objects.push(m);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c
}

/// A trigger `schema.name` (no EXECUTE AS, so it runs as its caller) on
/// `on` for `event`, whose statements are `body`.
fn trigger(c: &mut Catalog, schema_name: &str, name: &str, on: &str, event: &str, body: &str) {
    let mut t = module(
        schema_name,
        name,
        ObjectKind::Trigger,
        &format!("CREATE TRIGGER {schema_name}.{name} ON {on} AFTER {event} AS {body}"),
    );
    t.parent = Some(on.into());
    c.objects.push(t);
}

const BUMP: &str = "UPDATE fence.Resource SET Generation = Generation + 1;";

fn writer(c: &mut Catalog, yes: bool) {
    if yes {
        c.memberships.push(member("db_datawriter", "maint"));
    }
}

// 1. "Synonyms (Database Engine)": a synonym stands for its base object in
// INSERT, and "CREATE TRIGGER": a DML trigger fires for a statement that
// modifies its table, running as its caller. ops.Fix, as maint, inserts
// into ops.OS, a synonym for ops.Orders, whose AFTER INSERT trigger updates
// fence.Resource, checked against maint (in db_datawriter).

fn trigger_by_synonym(w: bool) -> Catalog {
    let mut c =
        lending("CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS INSERT INTO ops.OS (Id) VALUES (@Id);");
    c.objects.push(table("ops", "Orders"));
    c.objects
        .push(module("ops", "OS", ObjectKind::Synonym, "[ops].[Orders]"));
    trigger(&mut c, "ops", "OrdersBump", "ops.Orders", "INSERT", BUMP);
    writer(&mut c, w);
    c
}

#[test]
fn probe2_01_a_lent_insert_by_a_synonym_fires_the_tables_caller_trigger() {
    reached(&trigger_by_synonym(true), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe2_01_control_the_same_for_a_lender_who_may_not_write_lends_nothing() {
    let c = trigger_by_synonym(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 2. "Modify Data Through a View": an UPDATE of a view modifies its base
// table, and "CREATE TRIGGER": an AFTER trigger on that table fires.
// ops.Fix, as maint, updates ops.OrdersView (ops_owner's, over ops.Orders,
// the chain skips the table's check), whose base's AFTER UPDATE trigger
// updates fence.Resource as maint (in db_datawriter).

fn trigger_by_view(w: bool) -> Catalog {
    let mut c = lending(
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS UPDATE ops.OrdersView SET Shipped = 1 WHERE Id = @Id;",
    );
    c.objects.push(table("ops", "Orders"));
    c.objects.push(module(
        "ops",
        "OrdersView",
        ObjectKind::View,
        "CREATE VIEW ops.OrdersView AS SELECT Id, Shipped FROM ops.Orders;",
    ));
    trigger(&mut c, "ops", "OrdersBump", "ops.Orders", "UPDATE", BUMP);
    writer(&mut c, w);
    c
}

#[test]
fn probe2_02_a_lent_update_through_a_view_fires_the_base_tables_caller_trigger() {
    reached(&trigger_by_view(true), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe2_02_control_the_same_for_a_lender_who_may_not_write_lends_nothing() {
    let c = trigger_by_view(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 3. "EXECUTE AS Clause": the context stays maint's in what ops.Fix runs,
// so ops.Step's (ops_owner's, the chain skips EXECUTE) INSERT into
// ops.Orders fires the AFTER INSERT trigger ("CREATE TRIGGER", runs as its
// caller) with maint's rights; its UPDATE of fence.Resource passes for
// maint in db_datawriter.

fn trigger_by_callee(w: bool) -> Catalog {
    let mut c = lending("CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS EXEC ops.Step @Id;");
    c.objects.push(module(
        "ops",
        "Step",
        ObjectKind::Procedure,
        "CREATE PROCEDURE ops.Step @Id bigint AS INSERT INTO ops.Orders (Id) VALUES (@Id);",
    ));
    c.objects.push(table("ops", "Orders"));
    trigger(&mut c, "ops", "OrdersBump", "ops.Orders", "INSERT", BUMP);
    writer(&mut c, w);
    c
}

#[test]
fn probe2_03_a_callees_write_in_the_lent_context_fires_the_caller_trigger() {
    reached(&trigger_by_callee(true), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe2_03_control_the_same_for_a_lender_who_may_not_write_lends_nothing() {
    let c = trigger_by_callee(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 4. "Create Nested Triggers": with the nested triggers option on (the
// default) a trigger's write fires the triggers on what it writes, up to
// 32 levels. ops.Fix, as maint, inserts into ops.Orders; its trigger
// inserts into ops.Log, whose trigger updates fence.Resource; both run as
// their caller, so as maint (in db_datawriter).

fn nested_triggers(w: bool) -> Catalog {
    let mut c = lending(
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS INSERT INTO ops.Orders (Id) VALUES (@Id);",
    );
    c.objects.push(table("ops", "Orders"));
    c.objects.push(table("ops", "Log"));
    trigger(
        &mut c,
        "ops",
        "OrdersLog",
        "ops.Orders",
        "INSERT",
        "INSERT INTO ops.Log (Id) SELECT Id FROM inserted;",
    );
    trigger(&mut c, "ops", "LogBump", "ops.Log", "INSERT", BUMP);
    writer(&mut c, w);
    c
}

#[test]
fn probe2_04_a_trigger_fired_by_a_trigger_of_a_lent_write_writes_as_the_lender() {
    reached(&nested_triggers(true), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe2_04_control_the_same_for_a_lender_who_may_not_write_lends_nothing() {
    let c = nested_triggers(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 5. "EXECUTE AS (Transact-SQL)": EXECUTE AS USER inside a module switches
// to that user when the current context (here maint's, "EXECUTE AS
// Clause") holds IMPERSONATE on it. ops.Fix, as maint, switches to
// writer (in db_datawriter) and updates fence.Resource.

fn switch_inside(impersonate: bool) -> Catalog {
    let mut c = lending(
        "CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS \
         EXECUTE AS USER = 'writer'; UPDATE fence.Resource SET Generation = Generation + 1; REVERT;",
    );
    c.principals.push(no_login("writer"));
    c.memberships.push(member("db_datawriter", "writer"));
    if impersonate {
        c.permissions.push(grant("maint", "IMPERSONATE", on_role("writer")));
    }
    c
}

#[test]
fn probe2_05_execute_as_user_inside_a_lending_module_writes_as_that_user() {
    reached(&switch_inside(true), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe2_05_control_without_impersonate_the_switch_fails_and_lends_nothing() {
    let c = switch_inside(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 6. "Qualifying Names Inside Stored Procedures": a one-part procedure
// name in an EXECUTE inside a module resolves in the default schema of the
// EXECUTE AS user (maint's is ops), so `EXEC Step` runs ops.Step
// (ops_owner's, chain), whose UPDATE of fence.Resource runs as maint (in
// db_datawriter).

fn one_part_callee(w: bool) -> Catalog {
    let mut c = lending("CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS EXEC Step;");
    c.objects.push(module(
        "ops",
        "Step",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.Step AS {BUMP}"),
    ));
    c.principals
        .iter_mut()
        .find(|p| p.name == "maint")
        .unwrap()
        .default_schema = Some("ops".into());
    writer(&mut c, w);
    c
}

#[test]
fn probe2_06_a_one_part_exec_of_a_callee_is_followed() {
    reached(&one_part_callee(true), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe2_06_control_the_same_for_a_lender_who_may_not_write_lends_nothing() {
    let c = one_part_callee(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 7. "Nesting Stored Procedures" (a procedure may call itself, directly or
// through another, up to 32 levels), "ADD SIGNATURE" (a signed module runs
// with its caller's context plus the key user's rights) and "EXECUTE AS
// Clause". ops.Load, signed by Writer (user cert_runner, who may EXECUTE
// work.Back), runs work.Back WITH EXECUTE AS 'writer', which runs ops.Load
// again: now its caller's context is writer's (in db_datawriter), so its
// UPDATE of fence.Resource passes.

fn recursion_through_a_switch(w: bool) -> Catalog {
    let mut c = with_etl();
    for p in ["cert_runner", "ops_owner", "work_owner", "writer"] {
        c.principals.push(no_login(p));
    }
    for (s, o) in [("ops", "ops_owner"), ("work", "work_owner")] {
        c.schemas.push(Schema {
            name: s.into(),
            owner: o.into(),
        });
    }
    c.signing_keys = Some(vec![SigningKey {
        key: "CERTIFICATE".into(),
        name: "Writer".into(),
        owner: Some("dbo".into()),
        user: Some("cert_runner".into()),
        login: None,
        private_key: Some(false),
    }]);
    let mut load = module(
        "ops",
        "Load",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.Load @n int AS IF @n = 0 EXEC work.Back; ELSE {BUMP}"),
    );
    load.signed_by = vec!["CERTIFICATE::Writer".into()];
    c.objects.push(load);
    let mut back = module(
        "work",
        "Back",
        ObjectKind::Procedure,
        "CREATE PROCEDURE work.Back WITH EXECUTE AS 'writer' AS EXEC ops.Load 1;",
    );
    back.execute_as = Some("writer".into());
    c.objects.push(back);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Load")));
    c.permissions
        .push(grant("cert_runner", "EXECUTE", object("work", "Back")));
    c.permissions.push(grant("writer", "EXECUTE", object("ops", "Load")));
    if w {
        c.memberships.push(member("db_datawriter", "writer"));
    }
    c
}

#[test]
fn probe2_07_a_signed_module_run_again_under_a_callees_execute_as_writes_as_it() {
    reached(
        &recursion_through_a_switch(true),
        "etl",
        WRITE,
        &["EXECUTE on ops.Load"],
    );
}

#[test]
fn probe2_07_control_the_same_when_the_callees_user_may_not_write_names_no_one() {
    let c = recursion_through_a_switch(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 8. Cost: 500 procedures WITH EXECUTE AS maint each insert into
// ops.Orders, which has 200 AFTER INSERT triggers ("CREATE TRIGGER": a
// table may have many) that each log and run a helper; 300 helpers exist.
// Nothing reaches the fence; the audit must answer in bounded time.

fn many_triggers(enabled: bool) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("maint"));
    c.principals.push(no_login("ops_owner"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    c.objects.push(table("ops", "Orders"));
    c.objects.push(table("ops", "Log"));
    for i in 0..300 {
        c.objects.push(module(
            "ops",
            &format!("H{i}"),
            ObjectKind::Procedure,
            &format!(
                "CREATE PROCEDURE ops.H{i} AS INSERT INTO ops.Log (Id) VALUES ({i}); EXEC ops.H{};",
                (i + 1) % 300
            ),
        ));
    }
    for i in 0..500 {
        let mut m = module(
            "ops",
            &format!("L{i}"),
            ObjectKind::Procedure,
            &format!("CREATE PROCEDURE ops.L{i} WITH EXECUTE AS 'maint' AS INSERT INTO ops.Orders (Id) VALUES ({i});"),
        );
        m.execute_as = Some("maint".into());
        c.objects.push(m);
        c.permissions
            .push(grant("etl", "EXECUTE", object("ops", &format!("L{i}"))));
    }
    for i in 0..200 {
        trigger(
            &mut c,
            "ops",
            &format!("T{i}"),
            "ops.Orders",
            "INSERT",
            &format!("INSERT INTO ops.Log (Id) SELECT Id FROM inserted; EXEC ops.H{i};"),
        );
        c.objects.last_mut().unwrap().disabled = !enabled;
    }
    c
}

#[test]
fn probe2_08_500_lending_procedures_and_200_triggers_are_audited_in_bounded_time() {
    let took = within(60, many_triggers(true));
    assert!(
        took.is_some(),
        "500 lending procedures, 200 triggers: no answer in 60 s"
    );
    eprintln!("took {took:?}");
}

#[test]
fn probe2_08_control_the_same_with_the_triggers_disabled() {
    let took = within(60, many_triggers(false));
    assert!(took.is_some(), "500 lending procedures: no answer in 60 s");
    eprintln!("took {took:?}");
}

// 9. "EXECUTE AS (Transact-SQL)": in a module WITH EXECUTE AS, statements
// after REVERT run as the module's EXECUTE AS user again, not as its
// caller. ops.Fix, as maint (in db_datawriter), runs work.Step WITH
// EXECUTE AS 'nobody' (no rights on the fence), whose UPDATE of
// fence.Resource comes after its EXECUTE AS CALLER ... REVERT, so runs as
// nobody and is refused: no one is named. Control: the UPDATE inside the
// caller region runs as maint and passes.

fn callee_back_to_caller(inside: bool) -> Catalog {
    let mut c = lending("CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS EXEC work.Step;");
    c.principals.push(no_login("nobody"));
    c.principals.push(no_login("work_owner"));
    c.schemas.push(Schema {
        name: "work".into(),
        owner: "work_owner".into(),
    });
    let text = if inside {
        format!("CREATE PROCEDURE work.Step WITH EXECUTE AS 'nobody' AS EXECUTE AS CALLER; {BUMP} REVERT;")
    } else {
        format!("CREATE PROCEDURE work.Step WITH EXECUTE AS 'nobody' AS EXECUTE AS CALLER; SELECT 1; REVERT; {BUMP}")
    };
    let mut step = module("work", "Step", ObjectKind::Procedure, &text);
    step.execute_as = Some("nobody".into());
    c.objects.push(step);
    c.permissions.push(grant("maint", "EXECUTE", object("work", "Step")));
    writer(&mut c, true);
    c
}

#[test]
fn probe2_09_a_callees_write_after_its_revert_runs_as_its_own_user_and_names_no_one() {
    let c = callee_back_to_caller(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn probe2_09_control_the_callees_write_inside_its_caller_region_runs_as_the_lender() {
    reached(&callee_back_to_caller(true), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

// 10. "CREATE TRIGGER": a trigger WITH EXECUTE AS 'writer' runs as writer
// for every statement that fires it. ops.Fix, as maint (who may INSERT
// into ops.Orders), inserts there; the trigger updates fence.Resource as
// writer (in db_datawriter).

fn lent_write_fires_a_lending_trigger(w: bool) -> Catalog {
    let mut c = lending(
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS INSERT INTO work.Orders (Id) VALUES (@Id);",
    );
    c.principals.push(no_login("writer"));
    c.principals.push(no_login("work_owner"));
    c.schemas.push(Schema {
        name: "work".into(),
        owner: "work_owner".into(),
    });
    c.objects.push(table("work", "Orders"));
    c.permissions.push(grant("maint", "INSERT", object("work", "Orders")));
    trigger(&mut c, "work", "OrdersBump", "work.Orders", "INSERT", BUMP);
    let t = c.objects.last_mut().unwrap();
    t.execute_as = Some("writer".into());
    t.definition = t
        .definition
        .as_ref()
        .map(|d| d.replace(" AFTER INSERT AS ", " WITH EXECUTE AS 'writer' AFTER INSERT AS "));
    if w {
        c.memberships.push(member("db_datawriter", "writer"));
    }
    c
}

#[test]
fn probe2_10_a_lent_write_fires_a_trigger_with_execute_as_that_writes_the_fence() {
    reached(
        &lent_write_fires_a_lending_trigger(true),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

#[test]
fn probe2_10_control_the_same_trigger_whose_user_may_not_write_names_no_one() {
    let c = lent_write_fires_a_lending_trigger(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// Controls that the layouts above are read right where the path is the
// one check already follows: the same catalogs with the write named
// directly, the callee named in two parts, the switching callee run
// directly.

#[test]
fn probe2_01_control_the_same_insert_naming_the_table_is_followed() {
    let mut c = trigger_by_synonym(true);
    object_mut(&mut c, "ops.Fix").definition = Some(
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS INSERT INTO ops.Orders (Id) VALUES (@Id);"
            .into(),
    );
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe2_06_control_the_same_exec_in_two_parts_is_followed() {
    let mut c = one_part_callee(true);
    object_mut(&mut c, "ops.Fix").definition =
        Some("CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS EXEC ops.Step;".into());
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe2_07_control_running_the_switching_callee_directly_is_followed() {
    let mut c = recursion_through_a_switch(true);
    // etl may run work.Back alone, so no path through ops.Load names it.
    c.permissions
        .retain(|p| p.grantee != "etl" || p.permission != "EXECUTE");
    c.permissions.push(grant("etl", "EXECUTE", object("work", "Back")));
    reached(&c, "etl", WRITE, &["EXECUTE on work.Back"]);
}
