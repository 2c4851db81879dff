//! Probes of the lent calls and writes: layouts written from Microsoft's
//! documentation where SQL Server lets a principal write a fence table or
//! run a fence_admin procedure through a module WITH EXECUTE AS (or signed),
//! or refuses it, each with a control of the same shape. A probe that
//! fails names a hole in what FP027 follows.

use crate::support;

use super::audit_reach_lending_modules::{WRITE, named_for, naming, no_login, reached, table, with_etl, within};
use fencepost::audit::{Catalog, ObjectKind, Schema};
use support::fixtures::*;

const ADMIN: &str = "run fence_admin procedures";

/// `etl` may run `<schema>.<name>` (owned by ops_owner, so no chain reaches
/// dbo's code or tables), whose text is `text`, WITH EXECUTE AS maint.
fn lending_in(schema_name: &str, name: &str, text: &str) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("maint"));
    c.principals.push(no_login("ops_owner"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    let mut m = module(schema_name, name, ObjectKind::Procedure, text);
    m.execute_as = Some("maint".into());
    if schema_name != "ops" {
        m.owner = Some("ops_owner".into());
    }
    c.objects.push(m);
    c.permissions.push(grant("etl", "EXECUTE", object(schema_name, name)));
    c
}

fn lending(name: &str, text: &str) -> Catalog {
    lending_in("ops", name, text)
}

fn set_default_schema(c: &mut Catalog, user: &str, schema_name: &str) {
    let p = c.principals.iter_mut().find(|p| p.name == user).unwrap();
    p.default_schema = Some(schema_name.into());
}

// 1. "Qualifying Names Inside Stored Procedures" (CREATE PROCEDURE / "Execute
// a stored procedure"): the procedure name of an EXECUTE inside a module
// that is not schema-qualified resolves first in the default schema of the
// caller or of the user named in the EXECUTE AS clause, then dbo. maint's
// default schema is fence_admin, so `EXEC ForceRelease` runs
// fence_admin.ForceRelease, which maint may run through fence_operator.

fn one_part_release(default_schema: &str) -> Catalog {
    let mut c = lending(
        "Release",
        "CREATE PROCEDURE ops.Release @Id bigint WITH EXECUTE AS 'maint' AS EXEC ForceRelease @Id;",
    );
    c.memberships.push(member("fence_operator", "maint"));
    set_default_schema(&mut c, "maint", default_schema);
    c
}

#[test]
fn probe_01_one_part_exec_resolves_in_the_execute_as_users_default_schema() {
    let c = one_part_release("fence_admin");
    reached(&c, "etl", ADMIN, &["EXECUTE on ops.Release"]);
}

#[test]
fn probe_01_control_one_part_exec_where_no_such_procedure_resolves_lends_nothing() {
    let mut c = one_part_release("ops");
    object_mut(&mut c, "ops.Release").definition =
        Some("CREATE PROCEDURE ops.Release @Id bigint WITH EXECUTE AS 'maint' AS EXEC Unrelated @Id;".into());
    assert!(!named_for(&c, "etl", ADMIN), "{:#?}", check(&c));
}

// 2. Same page: DDL inside a module resolves a one-part name in the default
// schema of the EXECUTE AS user, then dbo; "TRUNCATE TABLE": needs ALTER
// on the table. maint's default schema is fence and it holds ALTER on
// fence.Resource. docs/operating.md says FP027 reads this.

fn one_part_truncate(alter: bool) -> Catalog {
    let mut c = lending(
        "Purge",
        "CREATE PROCEDURE ops.Purge WITH EXECUTE AS 'maint' AS TRUNCATE TABLE Resource;",
    );
    set_default_schema(&mut c, "maint", "fence");
    if alter {
        c.permissions.push(grant("maint", "ALTER", object("fence", "Resource")));
    }
    c
}

#[test]
fn probe_02_one_part_truncate_resolves_in_the_execute_as_users_default_schema() {
    let c = one_part_truncate(true);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Purge"]);
}

#[test]
fn probe_02_control_one_part_truncate_by_a_user_without_alter_lends_nothing() {
    let c = one_part_truncate(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 3. Same page: a one-part name in a DML statement inside a procedure
// resolves in the procedure's own schema. fence.Fix (owned by ops_owner,
// so no chain) WITH EXECUTE AS maint, in db_datawriter, runs `UPDATE
// Resource`, which is fence.Resource. docs/operating.md says FP027 reads
// one-part names in the module's own schema.

fn one_part_update_in_fence(writer: bool) -> Catalog {
    let mut c = lending_in(
        "fence",
        "Fix",
        "CREATE PROCEDURE fence.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
         UPDATE Resource SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    );
    if writer {
        c.memberships.push(member("db_datawriter", "maint"));
    }
    c
}

#[test]
fn probe_03_one_part_update_in_a_module_of_the_fence_schema_lends_the_write() {
    let c = one_part_update_in_fence(true);
    reached(&c, "etl", WRITE, &["EXECUTE on fence.Fix"]);
}

#[test]
fn probe_03_control_one_part_update_by_a_user_who_may_not_write_lends_nothing() {
    let c = one_part_update_in_fence(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 4. "Synonyms (Database Engine)" and "Ownership Chains": ops.FR, a synonym
// of ops_owner for fence_admin.ForceRelease, is reached from ops.Release
// (also ops_owner's) unchecked; the chain breaks at the dbo procedure, whose
// EXECUTE is checked against maint, who holds it through fence_operator
// (and EXECUTE on the synonym too).

fn release_by_other_owners_synonym(operator: bool) -> Catalog {
    let mut c = lending(
        "Release",
        "CREATE PROCEDURE ops.Release @Id bigint WITH EXECUTE AS 'maint' AS EXEC ops.FR @Id;",
    );
    c.objects
        .push(module("ops", "FR", ObjectKind::Synonym, "[fence_admin].[ForceRelease]"));
    c.permissions.push(grant("maint", "EXECUTE", object("ops", "FR")));
    if operator {
        c.memberships.push(member("fence_operator", "maint"));
    }
    c
}

#[test]
fn probe_04_a_lent_call_by_a_synonym_of_another_owner_runs_the_fence_admin_procedure() {
    let c = release_by_other_owners_synonym(true);
    reached(&c, "etl", ADMIN, &["EXECUTE on ops.Release"]);
}

#[test]
fn probe_04_control_a_lent_call_by_such_a_synonym_for_a_non_operator_lends_nothing() {
    let c = release_by_other_owners_synonym(false);
    assert!(!named_for(&c, "etl", ADMIN), "{:#?}", check(&c));
}

// 5. Same pages for a write: ops.R, a synonym of ops_owner for
// fence.Resource; the chain from ops.Fix skips the synonym and breaks at
// the table, where UPDATE is checked against maint, in db_datawriter.

fn update_by_other_owners_synonym(writer: bool) -> Catalog {
    let mut c = lending(
        "Fix",
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
         UPDATE ops.R SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    );
    c.objects
        .push(module("ops", "R", ObjectKind::Synonym, "[fence].[Resource]"));
    c.permissions.push(grant("maint", "UPDATE", object("ops", "R")));
    if writer {
        c.memberships.push(member("db_datawriter", "maint"));
    }
    c
}

#[test]
fn probe_05_a_lent_write_by_a_synonym_of_another_owner_writes_the_fence() {
    let c = update_by_other_owners_synonym(true);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe_05_control_a_lent_write_by_such_a_synonym_without_a_right_on_the_table_lends_nothing() {
    let c = update_by_other_owners_synonym(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 6. "Modify Data Through a View" and "Ownership Chains": ops.V, a view of
// ops_owner over fence.Resource; ops.Fix's UPDATE of it goes on to the
// table, where the broken chain checks UPDATE against maint, in
// db_datawriter.

fn update_by_other_owners_view(writer: bool) -> Catalog {
    let mut c = lending(
        "Fix",
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
         UPDATE ops.V SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    );
    c.objects.push(module(
        "ops",
        "V",
        ObjectKind::View,
        "CREATE VIEW ops.V AS SELECT ResourceId, Generation FROM fence.Resource;",
    ));
    c.permissions.push(grant("maint", "UPDATE", object("ops", "V")));
    if writer {
        c.memberships.push(member("db_datawriter", "maint"));
    }
    c
}

#[test]
fn probe_06_a_lent_write_through_a_view_of_another_owner_writes_the_fence() {
    let c = update_by_other_owners_view(true);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe_06_control_a_lent_write_through_such_a_view_without_a_right_on_the_table_lends_nothing() {
    let c = update_by_other_owners_view(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 7. "Qualifying Names Inside Stored Procedures": `UPDATE R` inside
// dbo.Fix (owned by ops_owner) is dbo.R, a dbo synonym for fence.Resource,
// on which maint holds UPDATE ("Synonyms": checked on the synonym, the
// chain from dbo skips the table).

fn one_part_synonym(right: &str) -> Catalog {
    let mut c = lending_in(
        "dbo",
        "Fix",
        "CREATE PROCEDURE dbo.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
         UPDATE R SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    );
    c.objects
        .push(module("dbo", "R", ObjectKind::Synonym, "[fence].[Resource]"));
    c.permissions.push(grant("maint", right, object("dbo", "R")));
    c
}

#[test]
fn probe_07_a_lent_write_by_a_one_part_synonym_name_writes_the_fence() {
    let c = one_part_synonym("UPDATE");
    reached(&c, "etl", WRITE, &["EXECUTE on dbo.Fix"]);
}

#[test]
fn probe_07_control_a_one_part_synonym_its_user_may_only_read_lends_nothing() {
    let c = one_part_synonym("SELECT");
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 8. "CREATE TRIGGER" (EXECUTE AS defaults to CALLER) and "EXECUTE AS
// Clause" (the context switched to stays in force for what the module
// runs): ops.Fix, as maint, inserts into ops.Orders, whose AFTER INSERT
// trigger (ops_owner's, no EXECUTE AS) updates fence.Resource; the broken
// chain checks that UPDATE against maint, in db_datawriter.

fn lent_write_fires_a_caller_trigger(writer: bool) -> Catalog {
    let mut c = lending(
        "Fix",
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
         INSERT INTO ops.Orders (Id) VALUES (@Id);",
    );
    c.objects.push(table("ops", "Orders"));
    let mut t = module(
        "ops",
        "OrdersBump",
        ObjectKind::Trigger,
        "CREATE TRIGGER ops.OrdersBump ON ops.Orders AFTER INSERT AS \
         UPDATE fence.Resource SET Generation = Generation + 1;",
    );
    t.parent = Some("ops.Orders".into());
    c.objects.push(t);
    if writer {
        c.memberships.push(member("db_datawriter", "maint"));
    }
    c
}

#[test]
fn probe_08_a_lent_write_that_fires_a_caller_trigger_writes_the_fence_as_the_lender() {
    let c = lent_write_fires_a_caller_trigger(true);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe_08_control_the_same_trigger_for_a_lender_who_may_not_write_lends_nothing() {
    let c = lent_write_fires_a_caller_trigger(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 9. "CREATE TRIGGER": an INSTEAD OF trigger runs instead of the statement,
// overriding it. dbo.ResourceView (dbo's, over fence.Resource) has an
// INSTEAD OF UPDATE trigger that only writes dbo.Orders: ops.Fix's UPDATE
// of the view, as maint who holds UPDATE on it, writes no fence table.

fn view_with_instead_of(trigger_writes_fence: bool) -> Catalog {
    let mut c = lending(
        "Fix",
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
         UPDATE dbo.ResourceView SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    );
    c.objects.push(module(
        "dbo",
        "ResourceView",
        ObjectKind::View,
        "CREATE VIEW dbo.ResourceView AS SELECT ResourceId, Generation FROM fence.Resource;",
    ));
    c.permissions
        .push(grant("maint", "UPDATE", object("dbo", "ResourceView")));
    let body = if trigger_writes_fence {
        "UPDATE fence.Resource SET Generation = Generation + 1;"
    } else {
        "UPDATE dbo.Orders SET Shipped = 1;"
    };
    let mut t = module(
        "dbo",
        "ResourceViewInstead",
        ObjectKind::Trigger,
        &format!("CREATE TRIGGER dbo.ResourceViewInstead ON dbo.ResourceView INSTEAD OF UPDATE AS {body}"),
    );
    t.parent = Some("dbo.ResourceView".into());
    c.objects.push(t);
    c
}

#[test]
fn probe_09_a_lent_update_of_a_view_whose_instead_of_trigger_writes_no_fence_table_lends_nothing() {
    let c = view_with_instead_of(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn probe_09_control_the_same_view_whose_instead_of_trigger_writes_the_fence_lends_the_write() {
    let c = view_with_instead_of(true);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

// 10. "Nesting Stored Procedures": procedures nest up to 32 levels, and
// "EXECUTE AS Clause": the context stays maint's through every call.
// ops.P0 (WITH EXECUTE AS maint) runs P1 ... P<depth>, all ops_owner's (the
// chain skips each EXECUTE check); the last runs fence_admin.ForceRelease,
// checked against maint, a member of fence_operator.

fn call_chain(depth: usize, operator: bool) -> Catalog {
    let mut c = lending("P0", "CREATE PROCEDURE ops.P0 WITH EXECUTE AS 'maint' AS EXEC ops.P1;");
    for i in 1..=depth {
        let next = if i == depth {
            "fence_admin.ForceRelease 1".to_string()
        } else {
            format!("ops.P{}", i + 1)
        };
        c.objects.push(module(
            "ops",
            &format!("P{i}"),
            ObjectKind::Procedure,
            &format!("CREATE PROCEDURE ops.P{i} AS EXEC {next};"),
        ));
    }
    if operator {
        c.memberships.push(member("fence_operator", "maint"));
    }
    c
}

#[test]
fn probe_10_a_lent_fence_admin_call_five_calls_deep_is_followed() {
    let c = call_chain(5, true);
    reached(&c, "etl", ADMIN, &["EXECUTE on ops.P0"]);
}

#[test]
fn probe_10_control_four_calls_deep_is_followed() {
    let c = call_chain(4, true);
    reached(&c, "etl", ADMIN, &["EXECUTE on ops.P0"]);
}

#[test]
fn probe_10_control_five_calls_deep_for_a_non_operator_lends_nothing() {
    let c = call_chain(5, false);
    assert!(!named_for(&c, "etl", ADMIN), "{:#?}", check(&c));
}

// 11. "Synonyms (Database Engine)": a procedure may be run by a synonym.
// ops.Release, as maint, runs ops.StepSyn, ops_owner's synonym for
// work.Step (work_owner's; maint may EXECUTE it), whose EXEC of
// fence_admin.ForceRelease is checked against maint, a fence_operator.

fn callee_by_synonym(operator: bool) -> Catalog {
    let mut c = lending(
        "Release",
        "CREATE PROCEDURE ops.Release @Id bigint WITH EXECUTE AS 'maint' AS EXEC ops.StepSyn @Id;",
    );
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
    c.objects
        .push(module("ops", "StepSyn", ObjectKind::Synonym, "[work].[Step]"));
    c.permissions.push(grant("maint", "EXECUTE", object("work", "Step")));
    c.permissions.push(grant("maint", "EXECUTE", object("ops", "StepSyn")));
    if operator {
        c.memberships.push(member("fence_operator", "maint"));
    }
    c
}

#[test]
fn probe_11_a_lent_call_of_a_callee_by_synonym_is_followed() {
    let c = callee_by_synonym(true);
    reached(&c, "etl", ADMIN, &["EXECUTE on ops.Release"]);
}

#[test]
fn probe_11_control_the_same_synonym_for_a_non_operator_lends_nothing() {
    let c = callee_by_synonym(false);
    assert!(!named_for(&c, "etl", ADMIN), "{:#?}", check(&c));
}

// 12. FP027 names "a fence_admin procedure beyond the fence roles' own
// grants": ops.Release, as maint (a fence_operator), runs
// fence_admin.ForceRelease, and only fence_operator may run ops.Release;
// its members run nothing they could not run themselves.

fn release_for_operators_only() -> Catalog {
    let mut c = lending(
        "Release",
        "CREATE PROCEDURE ops.Release @Id bigint WITH EXECUTE AS 'maint' AS EXEC fence_admin.ForceRelease @Id;",
    );
    c.memberships.push(member("fence_operator", "maint"));
    c.permissions
        .retain(|p| !(p.grantee == "etl" && p.on == object("ops", "Release")));
    c.permissions
        .push(grant("fence_operator", "EXECUTE", object("ops", "Release")));
    c
}

#[test]
fn probe_12_a_lent_fence_admin_call_granted_only_to_fence_operator_names_no_one() {
    let c = release_for_operators_only();
    for p in ["oncall", "fence_operator"] {
        let admin: Vec<_> = naming(&c, p)
            .into_iter()
            .filter(|f| f.permission.as_deref() == Some(ADMIN))
            .collect();
        assert!(admin.is_empty(), "{p}: {admin:#?}");
    }
}

#[test]
fn probe_12_control_the_same_module_granted_to_etl_names_it() {
    let mut c = release_for_operators_only();
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Release")));
    reached(&c, "etl", ADMIN, &["EXECUTE on ops.Release"]);
}

// 13. "EXECUTE AS (Transact-SQL)": EXECUTE AS CALLER inside a module runs
// the statements after it as the module's caller, until REVERT. ops.Fix,
// WITH EXECUTE AS maint (a writer), switches back to its caller before
// its UPDATE: etl, who may not write, makes it and is refused.

fn reverted_to_caller(back_to_caller: bool) -> Catalog {
    let switch = if back_to_caller { "EXECUTE AS CALLER;" } else { "" };
    let mut c = lending(
        "Fix",
        &format!(
            "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS {switch} \
             UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceId = @Id; REVERT;"
        ),
    );
    c.memberships.push(member("db_datawriter", "maint"));
    c
}

#[test]
fn probe_13_a_module_that_executes_as_caller_before_its_write_lends_nothing() {
    let c = reverted_to_caller(true);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn probe_13_control_the_same_module_without_the_switch_lends_the_write() {
    let c = reverted_to_caller(false);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

// 14. Cost: a set of utility procedures that call one another (each names
// every other), all WITH EXECUTE AS maint, as a logging or dispatch layer
// is written. Nothing reaches the fence; the audit must still answer in
// bounded time.

fn mesh(n: usize, lending: bool) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("maint"));
    c.principals.push(no_login("ops_owner"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    let calls: String = (0..n).map(|j| format!("IF @k = {j} EXEC ops.U{j} @k - 1; ")).collect();
    for i in 0..n {
        let mut m = module(
            "ops",
            &format!("U{i}"),
            ObjectKind::Procedure,
            &format!("CREATE PROCEDURE ops.U{i} @k int WITH EXECUTE AS 'maint' AS {calls}"),
        );
        if lending {
            m.execute_as = Some("maint".into());
        } else {
            m.definition = m.definition.map(|d| d.replace(" WITH EXECUTE AS 'maint'", ""));
        }
        c.objects.push(m);
        c.permissions
            .push(grant("etl", "EXECUTE", object("ops", &format!("U{i}"))));
    }
    c
}

#[test]
fn probe_14_mutually_calling_lending_procedures_are_audited_in_bounded_time() {
    let took = within(30, mesh(12, true));
    assert!(
        took.is_some(),
        "12 mutually calling EXECUTE AS procedures: no answer in 30 s"
    );
}

#[test]
fn probe_14_control_the_same_procedures_without_execute_as_are_audited_quickly() {
    let took = within(30, mesh(12, false));
    assert!(took.is_some(), "12 mutually calling procedures: no answer in 30 s");
}

// 15. "Synonyms (Database Engine)": EXECUTE on a synonym is checked on the
// synonym, and "Ownership Chains": ops.FixSyn, ops_owner's synonym for
// ops.Fix (ops_owner's, WITH EXECUTE AS maint, a writer), reaches it
// unchecked. etl holds EXECUTE on the synonym only.

fn lending_by_synonym(writer: bool) -> Catalog {
    let mut c = lending(
        "Fix",
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS \
         UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    );
    c.permissions
        .retain(|p| !(p.grantee == "etl" && p.on == object("ops", "Fix")));
    c.objects
        .push(module("ops", "FixSyn", ObjectKind::Synonym, "[ops].[Fix]"));
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "FixSyn")));
    if writer {
        c.memberships.push(member("db_datawriter", "maint"));
    }
    c
}

#[test]
fn probe_15_execute_on_a_synonym_for_a_lending_procedure_writes_the_fence() {
    let c = lending_by_synonym(true);
    reached(&c, "etl", WRITE, &["ops.FixSyn"]);
}

#[test]
fn probe_15_control_the_same_synonym_for_a_module_whose_user_may_not_write_lends_nothing() {
    let c = lending_by_synonym(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 16. Cost: a database of a few hundred procedures and one generated
// procedure of a few hundred kilobytes WITH EXECUTE AS. Nothing reaches
// the fence; the audit must answer in bounded time.

fn big_module(lending: bool) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("maint"));
    c.principals.push(no_login("ops_owner"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    for i in 0..300 {
        c.objects.push(module(
            "ops",
            &format!("Small{i}"),
            ObjectKind::Procedure,
            &format!("CREATE PROCEDURE ops.Small{i} AS SELECT {i};"),
        ));
    }
    let body: String = (0..6000)
        .map(|i| format!("IF @k = {i} SELECT Col{i} FROM ops.Orders WHERE Id = {i};\n"))
        .collect();
    let mut m = module(
        "ops",
        "Generated",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.Generated @k int AS {body}"),
    );
    if lending {
        m.execute_as = Some("maint".into());
    }
    c.objects.push(m);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Generated")));
    c
}

#[test]
fn probe_16_a_huge_lending_module_is_audited_in_bounded_time() {
    let took = within(30, big_module(true));
    assert!(
        took.is_some(),
        "a 300 KB EXECUTE AS procedure among 300 others: no answer in 30 s"
    );
}

#[test]
fn probe_16_control_the_same_module_without_execute_as() {
    let took = within(30, big_module(false));
    assert!(took.is_some(), "a 300 KB procedure among 300 others: no answer in 30 s");
}
