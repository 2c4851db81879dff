//! Fourth probes of the lent writes: which object a data statement writes
//! (and so which triggers it fires), which statements of a module run as
//! whom by its EXECUTE AS and REVERT, the rights a signature's login
//! lends, and what ownership chaining skips. Layouts written from
//! Microsoft's documentation where SQL Server lets a principal write a
//! fence table and check does not name it (false clean), or refuses it and
//! check names it (false finding); each with a control of the same shape
//! that passes. A probe that fails names a hole in what FP027 follows.

use crate::support;

use super::audit_reach_leaving_roles::on_role;
use super::audit_reach_lending_modules::{WRITE, named_for, no_login, reached, with_etl};
use fencepost::audit::{Catalog, Membership, Object, ObjectKind, Schema, ServerPermission, SigningKey};
use support::fixtures::*;

const BUMP: &str = "UPDATE fence.Resource SET Generation = Generation + 1;";

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

fn table(schema_name: &str, name: &str) -> Object {
    Object {
        definition: None,
        ..module(schema_name, name, ObjectKind::Table, "")
    }
}

/// A trigger `schema.name` (no EXECUTE AS: it runs as its caller) on `on`,
/// `when`, whose statements are `body`.
fn trigger(c: &mut Catalog, schema_name: &str, name: &str, on: &str, when: &str, body: &str) {
    let mut t = module(
        schema_name,
        name,
        ObjectKind::Trigger,
        &format!("CREATE TRIGGER {schema_name}.{name} ON {on} {when} AS {body}"),
    );
    t.parent = Some(on.into());
    c.objects.push(t);
}

fn writer(c: &mut Catalog) {
    c.memberships.push(member("db_datawriter", "maint"));
}

fn clean_for_etl(c: &Catalog) {
    assert!(!named_for(c, "etl", WRITE), "{:#?}", check(c));
}

/// ops.Fix, as maint (in db_datawriter), runs `statements`; ops.Orders has
/// an AFTER `event` trigger (running as its caller, maint) that updates
/// fence.Resource; ops.Log is a table beside it.
fn fires_orders_trigger(statements: &str, event: &str) -> Catalog {
    let mut c = lending(&format!(
        "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS 'maint' AS {statements}"
    ));
    c.objects.push(table("ops", "Orders"));
    c.objects.push(table("ops", "Log"));
    trigger(
        &mut c,
        "ops",
        "OrdersBump",
        "ops.Orders",
        &format!("AFTER {event}"),
        BUMP,
    );
    writer(&mut c);
    c
}

// 1. "Transact-SQL syntax conventions": the semicolon statement terminator
// is optional for most statements ("SET NOCOUNT (Transact-SQL)": SET
// NOCOUNT ON is such a statement). ops.Fix, as maint, runs `SET NOCOUNT ON`
// and, on the next line with no semicolon between, `INSERT INTO ops.Orders`:
// the insert fires ops.OrdersBump, which updates fence.Resource as maint.
// check reads the INSERT after the word ON as `ON INSERT` (a cascade
// action) and misses the write: a false clean. Control: `SET NOCOUNT ON;`.

#[test]
fn probe4_01_an_insert_right_after_set_nocount_on_without_semicolon_fires_its_trigger() {
    reached(
        &fires_orders_trigger("SET NOCOUNT ON\nINSERT INTO ops.Orders (Id) VALUES (@Id);", "INSERT"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

#[test]
fn probe4_01_control_the_same_with_a_semicolon_after_set_nocount_on() {
    reached(
        &fires_orders_trigger("SET NOCOUNT ON;\nINSERT INTO ops.Orders (Id) VALUES (@Id);", "INSERT"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

// 2. "WITH common_table_expression (Transact-SQL)": "expression_name can
// be the same as the name of a base table or view. Any reference to
// expression_name in the query uses the common table expression and not
// the base object"; an UPDATE of a CTE modifies the base table it selects
// from ("Updatable Views" rules apply). ops.Fix, as maint, updates the CTE
// `Log` (named like the table ops.Log, which it does not touch) over
// ops.Orders: ops.Orders is updated, ops.OrdersBump fires. check takes the
// target for ops.Log: a false clean. Control: the CTE named `Pending`, a
// name no object has.

fn cte_named(name: &str) -> Catalog {
    fires_orders_trigger(
        &format!("WITH {name} AS (SELECT Id, Shipped FROM ops.Orders) UPDATE {name} SET Shipped = 1 WHERE Id = @Id;"),
        "UPDATE",
    )
}

#[test]
fn probe4_02_an_update_of_a_cte_named_like_another_table_fires_the_base_tables_trigger() {
    reached(&cte_named("Log"), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe4_02_control_the_same_cte_under_a_name_no_object_has() {
    reached(&cte_named("Pending"), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

// 3. "UPDATE, INSERT or DELETE ... target" (SQL Server error reference,
// "The stored procedure or scalar function <Name> cannot be specified as
// ... a target for an UPDATE, INSERT, or DELETE statement"): "the UPDATE
// clause must target a table, a view, or an inline function", which is
// updatable as a view is ("Modify Data Through a View": the change goes to
// the base table). ops.OrdersOf is an inline function over ops.Orders;
// ops.Fix, as maint, updates ops.OrdersOf(@Id): ops.Orders is updated and
// its AFTER UPDATE trigger ops.OrdersBump fires. check follows views and
// synonyms to a trigger's table, never an inline function: a false clean.
// Control: the same update of ops.OrdersView, a view of the same SELECT.

fn through(object: &str) -> Catalog {
    let call = if object == "ops.OrdersOf" { "(@Id)" } else { "" };
    let mut c = fires_orders_trigger(
        &format!("UPDATE {object}{call} SET Shipped = 1 WHERE Id = @Id;"),
        "UPDATE",
    );
    c.objects.push(module(
        "ops",
        "OrdersOf",
        ObjectKind::Function,
        "CREATE FUNCTION ops.OrdersOf(@Id bigint) RETURNS TABLE AS RETURN SELECT Id, Shipped FROM ops.Orders WHERE Id = @Id;",
    ));
    c.objects.push(module(
        "ops",
        "OrdersView",
        ObjectKind::View,
        "CREATE VIEW ops.OrdersView AS SELECT Id, Shipped FROM ops.Orders;",
    ));
    c
}

#[test]
fn probe4_03_an_update_through_an_inline_function_fires_the_base_tables_trigger() {
    reached(&through("ops.OrdersOf"), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe4_03_control_the_same_update_through_a_view() {
    reached(&through("ops.OrdersView"), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

// 4. "MERGE (Transact-SQL)": the table after MERGE [INTO] is the target;
// the one after USING is the source, only read, and `WHEN MATCHED THEN
// UPDATE SET ...` updates the target. ops.Fix, as maint, merges ops.Orders
// INTO ops.Log: ops.Orders is only read, its AFTER UPDATE trigger
// (ops.OrdersBump) never fires, and nothing else writes the fence. check
// reads `UPDATE SET` as an UPDATE of an alias named `set` and so of every
// table the text names, ops.Orders included: a false finding. Control: the
// same MERGE the other way round (INTO ops.Orders USING ops.Log) fires it.

fn merge(target: &str, source: &str) -> Catalog {
    fires_orders_trigger(
        &format!(
            "MERGE INTO {target} AS t USING {source} AS s ON t.Id = s.Id \
             WHEN MATCHED THEN UPDATE SET t.Shipped = s.Shipped;"
        ),
        "UPDATE",
    )
}

#[test]
fn probe4_04_a_merge_that_only_reads_the_table_fires_none_of_its_triggers() {
    clean_for_etl(&merge("ops.Log", "ops.Orders"));
}

#[test]
fn probe4_04_control_a_merge_into_the_table_fires_its_trigger() {
    reached(
        &merge("ops.Orders", "ops.Log"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

// 5. "Synonyms (Database Engine)": a synonym stands for its base object in
// SELECT and sub-selects, and is refused only in schema-bound expressions
// ("schema-bound views"), so a view that is not schema-bound may select
// from one; "Modify Data Through a View": an UPDATE of the view changes
// the base table. ops.OrdersView selects FROM ops.OrdersSyn, a synonym for
// ops.Orders; ops.Fix, as maint, updates ops.OrdersView: ops.Orders is
// updated and ops.OrdersBump fires. check does not follow views over a
// synonym: a false clean. Control: the view selects FROM ops.Orders.

fn view_over(over: &str) -> Catalog {
    let mut c = fires_orders_trigger("UPDATE ops.OrdersView SET Shipped = 1 WHERE Id = @Id;", "UPDATE");
    c.objects
        .push(module("ops", "OrdersSyn", ObjectKind::Synonym, "[ops].[Orders]"));
    c.objects.push(module(
        "ops",
        "OrdersView",
        ObjectKind::View,
        &format!("CREATE VIEW ops.OrdersView AS SELECT Id, Shipped FROM {over};"),
    ));
    c
}

#[test]
fn probe4_05_an_update_through_a_view_over_a_synonym_fires_the_base_tables_trigger() {
    reached(&view_over("ops.OrdersSyn"), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

#[test]
fn probe4_05_control_the_view_over_the_table_itself() {
    reached(&view_over("ops.Orders"), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

// 6.-8. "EXECUTE AS (Transact-SQL)" / "REVERT (Transact-SQL)": after EXECUTE
// AS USER = 'writer' the statements run as writer until a REVERT that
// runs. ops.Fix, as maint (no right on the fence, but IMPERSONATE on
// writer, in db_datawriter), switches to writer and updates fence.Resource
// unless a REVERT ran before.

fn switch_to_writer(body: &str) -> Catalog {
    let mut c = lending(&format!(
        "CREATE PROCEDURE ops.Fix @x int, @y int, @i int, @n int, @u sysname WITH EXECUTE AS 'maint' AS {body}"
    ));
    c.principals.push(no_login("writer"));
    c.memberships.push(member("db_datawriter", "writer"));
    c.permissions.push(grant("maint", "IMPERSONATE", on_role("writer")));
    c
}

// 6. "IF...ELSE (Transact-SQL)": `IF Boolean_expression sql_statement`, and
// "CASE (Transact-SQL)": a CASE expression (ending in END) may be that
// Boolean expression's last operand. `IF @x = CASE ... END REVERT;` runs
// the REVERT only when the test holds; else the UPDATE after it runs as
// writer. check reads a REVERT right after the word END as a statement
// that surely runs: a false clean. Control: `IF @x = 1 REVERT;`.

#[test]
fn probe4_06_a_revert_under_an_if_whose_test_ends_in_a_case_may_not_run() {
    reached(
        &switch_to_writer(&format!(
            "EXECUTE AS USER = 'writer'; IF @x = CASE WHEN @y = 1 THEN 1 ELSE 0 END REVERT; {BUMP}"
        )),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "writer"],
    );
}

#[test]
fn probe4_06_control_a_revert_under_a_plain_if() {
    reached(
        &switch_to_writer(&format!("EXECUTE AS USER = 'writer'; IF @x = 1 REVERT; {BUMP}")),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "writer"],
    );
}

// 7. "WHILE (Transact-SQL)": the body runs again while the test holds, so
// an UPDATE before an EXECUTE AS USER in the loop's body runs as writer on
// the second turn. A test ending in a CASE expression makes check read the
// loop's BEGIN as a block of its own, not a loop body: a false clean.
// Control: the same loop with `WHILE @i < 2`.

#[test]
fn probe4_07_a_switch_in_a_loop_whose_test_ends_in_a_case_covers_the_loops_earlier_statements() {
    reached(
        &switch_to_writer(&format!(
            "WHILE @i < CASE WHEN @n > 2 THEN 2 ELSE @n END BEGIN {BUMP} EXECUTE AS USER = 'writer'; SET @i += 1; END"
        )),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "writer"],
    );
}

#[test]
fn probe4_07_control_the_same_loop_with_a_plain_test() {
    reached(
        &switch_to_writer(&format!(
            "WHILE @i < 2 BEGIN {BUMP} EXECUTE AS USER = 'writer'; SET @i += 1; END"
        )),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "writer"],
    );
}

// 8. "EXECUTE AS (Transact-SQL)": "name can be specified as a local
// variable". ops.Fix, as maint, switches to the user named by @u (its
// caller passes 'writer') and updates fence.Resource as writer. check reads
// only a literal name: a false clean. Control: the same switch by literal.

#[test]
fn probe4_08_execute_as_user_named_by_a_variable_switches_to_a_user_the_lender_may_impersonate() {
    reached(
        &switch_to_writer(&format!("EXECUTE AS USER = @u; {BUMP} REVERT;")),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

#[test]
fn probe4_08_control_the_same_switch_by_a_literal_name() {
    reached(
        &switch_to_writer(&format!("EXECUTE AS USER = 'writer'; {BUMP} REVERT;")),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

// 9.-10. "Module Signing" / "ADD SIGNATURE": a module signed by a key with a
// login runs with that login's server rights added to its caller's.

/// `etl` may run ops.Fix, signed by CERTIFICATE::Ops (no user, login
/// ops_signer, in the server role operators), which updates fence.Resource.
fn signed() -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("ops_owner"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    c.signing_keys = Some(vec![SigningKey {
        key: "CERTIFICATE".into(),
        name: "Ops".into(),
        owner: Some("dbo".into()),
        user: None,
        login: Some("ops_signer".into()),
        private_key: Some(true),
    }]);
    let mut m = module(
        "ops",
        "Fix",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.Fix AS {BUMP}"),
    );
    m.signed_by = vec!["CERTIFICATE::Ops".into()];
    c.objects.push(m);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    server_facts(&mut c).role_members.push(Membership {
        role: "operators".into(),
        member: "ops_signer".into(),
    });
    c
}

fn server_permission(grantee: &str, permission: &str) -> ServerPermission {
    ServerPermission {
        grantee: grantee.into(),
        permission: permission.into(),
        on_login: None,
    }
}

// 9. "DENY Server Permissions" / "Permissions Hierarchy": a DENY takes
// precedence over a GRANT, also one through a role, for any login not in
// sysadmin. operators holds CONTROL SERVER, but ops_signer is denied
// CONTROL SERVER itself: the signature adds no right on the fence, and
// etl (no right of its own) is refused. check weighs only the grant: a
// false finding. Control: the same without the DENY is named.

#[test]
fn probe4_09_a_signing_login_denied_control_server_lends_nothing() {
    let mut c = signed();
    server_facts(&mut c)
        .permissions
        .push(server_permission("operators", "CONTROL SERVER"));
    server_facts(&mut c)
        .denies
        .push(server_permission("ops_signer", "CONTROL SERVER"));
    clean_for_etl(&c);
}

#[test]
fn probe4_09_control_the_same_grant_without_the_deny_lends_the_write() {
    let mut c = signed();
    server_facts(&mut c)
        .permissions
        .push(server_permission("operators", "CONTROL SERVER"));
    reached(&c, "etl", WRITE, &["holds CONTROL SERVER through operators"]);
}

// 10. "Server-Level Roles": sysadmin "can perform any activity in the
// server", and "DENY Object Permissions": a DENY does not bind sysadmin.
// ops_signer is in sysadmin (through no other role); fence.Resource's
// UPDATE is denied to public. The signed module's write still passes.
// Control: the same without the DENY. (Both pass: check weighs this.)

#[test]
fn probe4_10_a_signing_login_in_sysadmin_passes_a_deny_to_public() {
    let mut c = signed();
    server_facts(&mut c).role_members.push(Membership {
        role: "sysadmin".into(),
        member: "ops_signer".into(),
    });
    c.permissions.push(super::audit_reach_leaving_roles::deny(
        "public",
        "UPDATE",
        object("fence", "Resource"),
    ));
    reached(&c, "etl", WRITE, &["ops_signer is in sysadmin"]);
}

#[test]
fn probe4_10_control_the_same_without_the_deny() {
    let mut c = signed();
    server_facts(&mut c).role_members.push(Membership {
        role: "sysadmin".into(),
        member: "ops_signer".into(),
    });
    reached(&c, "etl", WRITE, &["ops_signer is in sysadmin"]);
}

// 11.-12. "Ownership Chains": when a module and the object it touches have
// one owner, the permission check of a data statement is skipped, never of
// DDL (TRUNCATE TABLE needs ALTER on the table, "TRUNCATE TABLE") nor of
// dynamic SQL ("Ownership Chains": "ownership chaining does not apply to
// dynamic SQL"; "EXECUTE (Transact-SQL)": the string is checked as a batch
// of its own). ops.Fix, as maint (who may run dbo.Wipe and holds nothing
// on the fence), runs dbo.Wipe, owned by dbo as the fence tables are.

fn chained_callee(statements: &str) -> Catalog {
    let mut c = lending("CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS EXEC dbo.Wipe;");
    c.objects.push(table("ops", "Stash"));
    c.objects.push(module(
        "dbo",
        "Wipe",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE dbo.Wipe AS {statements}"),
    ));
    c.permissions.push(grant("maint", "EXECUTE", object("dbo", "Wipe")));
    c.permissions.push(grant("maint", "UPDATE", object("ops", "Stash")));
    c
}

// 11. dbo.Wipe updates ops.Stash (a data statement, on another table) and
// truncates fence.Resource: the TRUNCATE is checked against maint and
// refused. check lets the chain skip the TRUNCATE because the text holds
// some data statement: a false finding. Control: dbo.Wipe deletes from
// fence.Resource instead, which the chain lets through.

#[test]
fn probe4_11_a_chained_callees_truncate_beside_an_update_elsewhere_is_checked_and_names_no_one() {
    clean_for_etl(&chained_callee(
        "UPDATE ops.Stash SET Id = Id; TRUNCATE TABLE fence.Resource;",
    ));
}

#[test]
fn probe4_11_control_a_chained_callees_delete_beside_the_same_update_is_lent() {
    reached(
        &chained_callee("UPDATE ops.Stash SET Id = Id; DELETE FROM fence.Resource;"),
        "etl",
        WRITE,
        &["runs dbo.Wipe"],
    );
}

// 12. dbo.Wipe deletes from fence.Resource by dynamic SQL: the batch is
// checked against maint and refused. check counts the chain for the
// string's DELETE (it does not: both pass, kept as a guard). Control: the
// same DELETE as a statement of dbo.Wipe.

#[test]
fn probe4_12_a_chained_callees_dynamic_delete_is_checked_and_names_no_one() {
    clean_for_etl(&chained_callee("EXEC (N'DELETE FROM fence.Resource;');"));
}

#[test]
fn probe4_12_control_the_same_delete_as_a_statement_is_lent() {
    reached(
        &chained_callee("DELETE FROM fence.Resource;"),
        "etl",
        WRITE,
        &["runs dbo.Wipe"],
    );
}

// 13. "UPDATE STATISTICS (Transact-SQL)": it updates the query optimization
// statistics of a table, no row of it, and "CREATE TRIGGER": a DML trigger
// fires on INSERT, UPDATE or DELETE of rows. ops.Fix, as maint, runs
// UPDATE STATISTICS ops.Orders: ops.OrdersBump never fires. check reads
// `UPDATE STATISTICS` as an UPDATE of an alias named `statistics`, and so
// of every table the text names: a false finding. Control: an UPDATE of
// ops.Orders' rows fires it.

#[test]
fn probe4_13_update_statistics_fires_no_dml_trigger() {
    clean_for_etl(&fires_orders_trigger("UPDATE STATISTICS ops.Orders;", "UPDATE"));
}

#[test]
fn probe4_13_control_an_update_of_the_tables_rows_fires_it() {
    reached(
        &fires_orders_trigger("UPDATE ops.Orders SET Shipped = 1 WHERE Id = @Id;", "UPDATE"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

// 14. "EXECUTE AS Clause": the context a module switches to stays in force
// in the modules it calls, and "EXECUTE (Transact-SQL)": EXEC ('string')
// runs the string as a batch in that context, its permissions checked
// against it. ops.Fix, as maint (in db_datawriter), runs ops.Purge (no
// EXECUTE AS, ops_owner's), which deletes from fence.Resource by dynamic
// SQL: the DELETE runs as maint and passes. check reads a module's own
// writes from its code with strings blanked (`written`), and follows
// dynamic SQL only in a module WITH EXECUTE AS itself: a false clean.
// Control: ops.Purge makes the same DELETE as a statement.

fn lent_callee(statements: &str) -> Catalog {
    let mut c = lending("CREATE PROCEDURE ops.Fix WITH EXECUTE AS 'maint' AS EXEC ops.Purge;");
    c.objects.push(module(
        "ops",
        "Purge",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.Purge AS {statements}"),
    ));
    writer(&mut c);
    c
}

#[test]
fn probe4_14_a_callees_dynamic_delete_runs_as_the_lender() {
    reached(
        &lent_callee("EXEC (N'DELETE FROM fence.Resource;');"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

#[test]
fn probe4_14_control_the_same_delete_as_a_statement() {
    reached(
        &lent_callee("DELETE FROM fence.Resource;"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}
