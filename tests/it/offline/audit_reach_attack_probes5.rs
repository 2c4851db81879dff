//! Fifth probes of the lent writes: the SQL a lending module runs from
//! text ("EXECUTE (Transact-SQL)", "sp_executesql (Transact-SQL)"), which
//! may run anything even when it is made of string literals alone; which
//! statement of a module an ownership chain lets through; the
//! common table expressions and aliases a data statement names; EXECUTE AS
//! USER by a variable; and the server rights a signature's login lends.
//! Layouts written from Microsoft's documentation where SQL Server lets a
//! principal write a fence table (or run a fence_admin procedure) and
//! check does not name it (false clean), or refuses it and check names it
//! (false finding), or where check takes too long; each with a control of
//! the same shape that passes. A probe that fails names a hole in what
//! FP027 follows.

use crate::support;

use super::audit_reach_leaving_roles::{deny, on_role};
use super::audit_reach_lending_modules::{WRITE, named_for, no_login, reached, with_etl, within};
use fencepost::audit::{Catalog, Membership, Object, ObjectKind, Schema, ServerPermission, SigningKey};
use support::fixtures::*;

const ADMIN: &str = "run fence_admin procedures";
pub(super) const BUMP: &str = "UPDATE fence.Resource SET Generation = Generation + 1;";

/// `etl` may run ops.Fix (ops_owner's) WITH EXECUTE AS maint, whose
/// statements are `statements`; maint holds nothing on the fence.
pub(super) fn lending(statements: &str) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("maint"));
    c.principals.push(no_login("ops_owner"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    let mut m = module(
        "ops",
        "Fix",
        ObjectKind::Procedure,
        &format!(
            "CREATE PROCEDURE ops.Fix @Id bigint, @sql nvarchar(max), @who sysname WITH EXECUTE AS 'maint' AS \
             {statements}"
        ),
    );
    m.execute_as = Some("maint".into());
    c.objects.push(m);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c
}

/// [`lending`] with maint in db_datawriter.
pub(super) fn lending_writer(statements: &str) -> Catalog {
    let mut c = lending(statements);
    c.memberships.push(member("db_datawriter", "maint"));
    c
}

fn table(schema_name: &str, name: &str) -> Object {
    Object {
        definition: None,
        ..module(schema_name, name, ObjectKind::Table, "")
    }
}

pub(super) fn clean_for_etl(c: &Catalog) {
    assert!(!named_for(c, "etl", WRITE), "{:#?}", check(c));
}

// 1. "sp_executesql (Transact-SQL)": `sp_executesql @stmt, @params,
// @param1 = value`: the statement is compiled and run with the parameters
// bound to the values given, and "EXECUTE (Transact-SQL)": `EXEC
// (@string)` runs the text the variable holds. ops.Fix, as maint (in
// db_datawriter), runs the constant statement N'EXEC (@s)' with @s bound
// to its caller's @sql: the caller's text runs as maint, any write maint
// may make. check reads the constant statement as what runs, finds no
// write in it and so no SQL built at run time: a false clean. Control: the
// same caller's text run by `sp_executesql @sql`.

#[test]
fn probe5_01_a_constant_sp_executesql_statement_that_runs_its_parameter_runs_the_callers_text() {
    reached(
        &lending_writer("EXEC sys.sp_executesql N'EXEC (@s);', N'@s nvarchar(max)', @s = @sql;"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

#[test]
fn probe5_01_control_the_callers_text_run_by_sp_executesql_itself() {
    reached(
        &lending_writer("EXEC sys.sp_executesql @sql;"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

// 2. "Database Identifiers": a name may be delimited in brackets (or
// double quotes), `[sp_executesql]` being the same procedure as
// sp_executesql. ops.Fix, as maint (in db_datawriter), runs its caller's
// @sql by `EXEC sys.[sp_executesql] @sql`. check counts the construct as
// sp_executesql (whose text it reads when constant) but finds no text to
// read past the brackets, so neither a constant text nor one built at run
// time: a false clean. Control: `EXEC sys.sp_executesql @sql`.

#[test]
fn probe5_02_a_bracketed_sp_executesql_runs_the_callers_text() {
    reached(
        &lending_writer("EXEC sys.[sp_executesql] @sql;"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

#[test]
fn probe5_02_control_the_same_call_without_brackets() {
    reached(
        &lending_writer("EXEC sys.sp_executesql @sql;"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

// 3. "EXECUTE (Transact-SQL)": `EXEC ('string')` runs the string as a batch
// in the module's context, and a batch may EXECUTE a procedure; "EXECUTE
// AS Clause": its permissions are checked against maint. ops.Fix, as maint
// (in fence_operator, which may run fence_admin.ForceRelease), runs the
// constant text N'EXEC fence_admin.ForceRelease @Id = 1;'. check reads a
// constant text's data statements only, not the procedures it runs (and
// no longer weighs it as SQL built at run time): a false clean. Control:
// the same EXEC as a statement of ops.Fix.

fn release(statements: &str) -> Catalog {
    let mut c = lending(statements);
    c.memberships.push(member("fence_operator", "maint"));
    c
}

#[test]
fn probe5_03_a_constant_text_that_runs_a_fence_admin_procedure_runs_it_as_the_lender() {
    reached(
        &release("EXEC (N'EXEC fence_admin.ForceRelease @ResourceKey = N''k'';');"),
        "etl",
        ADMIN,
        &["EXECUTE on ops.Fix"],
    );
}

#[test]
fn probe5_03_control_the_same_exec_as_a_statement() {
    reached(
        &release("EXEC fence_admin.ForceRelease @ResourceKey = N'k';"),
        "etl",
        ADMIN,
        &["EXECUTE on ops.Fix"],
    );
}

// 4. Same pages: a constant text that runs another procedure runs it in
// maint's context, the callee's statements checked against maint too.
// ops.Fix, as maint (in db_datawriter, granted EXECUTE on ops.Purge), runs
// N'EXEC ops.Purge;'; ops.Purge (no EXECUTE AS) deletes from
// fence.Resource, which maint may. check follows the procedures ops.Fix
// runs in its code only: a false clean. Control: `EXEC ops.Purge;`.

fn purge(statements: &str) -> Catalog {
    let mut c = lending_writer(statements);
    c.objects.push(module(
        "ops",
        "Purge",
        ObjectKind::Procedure,
        "CREATE PROCEDURE ops.Purge AS DELETE FROM fence.Resource;",
    ));
    c.permissions.push(grant("maint", "EXECUTE", object("ops", "Purge")));
    c
}

#[test]
fn probe5_04_a_constant_text_that_runs_a_writing_procedure_runs_it_as_the_lender() {
    reached(
        &purge("EXEC (N'EXEC ops.Purge;');"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

#[test]
fn probe5_04_control_the_same_exec_as_a_statement() {
    reached(&purge("EXEC ops.Purge;"), "etl", WRITE, &["EXECUTE on ops.Fix"]);
}

// 5. "EXECUTE (Transact-SQL)": the string is a batch, and a batch may
// itself run a string: `EXEC (N'EXEC (N''DELETE ...'')')` runs the inner
// DELETE, in the same context. ops.Fix, as maint (in db_datawriter), runs
// a constant text that runs the constant text N'DELETE FROM
// fence.Resource;'. check reads one level of text, whose own string it
// blanks: a false clean. Control: the DELETE one level down.

#[test]
fn probe5_05_a_constant_text_that_runs_a_constant_text_makes_its_write() {
    reached(
        &lending_writer("EXEC (N'EXEC (N''DELETE FROM fence.Resource;'');');"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

#[test]
fn probe5_05_control_the_same_delete_one_level_down() {
    reached(
        &lending_writer("EXEC (N'DELETE FROM fence.Resource;');"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

// 6. "EXECUTE (Transact-SQL)" / "Qualifying Names Inside Stored
// Procedures": the string runs as a batch of its own, whose one-part names
// resolve in the default schema of the user it runs as, then dbo (not in
// the module's schema). maint (in db_datawriter) has DEFAULT_SCHEMA =
// fence; ops.Fix, as maint, runs N'DELETE FROM Resource;': it deletes
// fence.Resource. check looks for a fence table in a string only by two or
// three parts: a false clean. Control: N'DELETE FROM fence.Resource;'.

fn one_part_in_text(statements: &str) -> Catalog {
    let mut c = lending_writer(statements);
    let p = c.principals.iter_mut().find(|p| p.name == "maint").unwrap();
    p.default_schema = Some("fence".into());
    c
}

#[test]
fn probe5_06_a_one_part_name_in_constant_text_resolves_in_the_lenders_default_schema() {
    reached(
        &one_part_in_text("EXEC (N'DELETE FROM Resource;');"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

#[test]
fn probe5_06_control_the_same_delete_by_two_parts() {
    reached(
        &one_part_in_text("EXEC (N'DELETE FROM fence.Resource;');"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

// 7. "OUTPUT Clause (Transact-SQL)": `OUTPUT ... INTO output_table`
// inserts the rows into that table ("Requires INSERT permissions on any
// tables specified in <output_table>"); the table may have no trigger, no
// CHECK constraint and no foreign key, as fence.Recovery has none.
// "Ownership Chains": the check of a data statement on an object of the
// module's own owner is skipped. ops.Fix, as maint, runs dbo.Wipe (dbo's,
// as the fence tables are; maint may run it and update ops.Stash), which
// updates ops.Stash with OUTPUT ... INTO fence.Recovery: the INSERT into
// fence.Recovery is chained and passes. check lets the chain through only
// for a statement whose target is the fence table: a false clean.
// Control: the same INSERT as a statement of its own.

fn chained_callee(statements: &str) -> Catalog {
    let mut c = lending("EXEC dbo.Wipe;");
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

#[test]
fn probe5_07_a_chained_output_into_a_fence_table_is_let_through() {
    reached(
        &chained_callee(
            "UPDATE ops.Stash SET Id = Id OUTPUT NEWID(), SYSUTCDATETIME(), 0, 0, NULL INTO fence.Recovery;",
        ),
        "etl",
        WRITE,
        &["runs dbo.Wipe"],
    );
}

#[test]
fn probe5_07_control_the_same_insert_as_a_statement_is_let_through() {
    reached(
        &chained_callee(
            "UPDATE ops.Stash SET Id = Id; INSERT INTO fence.Recovery SELECT NEWID(), SYSUTCDATETIME(), 0, 0, NULL;",
        ),
        "etl",
        WRITE,
        &["runs dbo.Wipe"],
    );
}

// 8. Same page, without a chain: ops.Fix, as maint (granted DELETE on
// ops.Stash and INSERT on fence.Recovery, nothing else), deletes from
// ops.Stash with OUTPUT ... INTO fence.Recovery: the INSERT is checked
// against maint and passes. check weighs only the statement's own verb
// (DELETE) on the fence table: a false clean. Control: the same INSERT as
// a statement of its own.

fn output_into(statements: &str) -> Catalog {
    let mut c = lending(statements);
    c.objects.push(table("ops", "Stash"));
    c.permissions.push(grant("maint", "DELETE", object("ops", "Stash")));
    c.permissions
        .push(grant("maint", "INSERT", object("fence", "Recovery")));
    c
}

#[test]
fn probe5_08_output_into_a_fence_table_is_an_insert_there() {
    reached(
        &output_into("DELETE FROM ops.Stash OUTPUT NEWID(), SYSUTCDATETIME(), 0, 0, NULL INTO fence.Recovery;"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

#[test]
fn probe5_08_control_the_same_insert_as_a_statement() {
    reached(
        &output_into("DELETE FROM ops.Stash; INSERT INTO fence.Recovery SELECT NEWID(), SYSUTCDATETIME(), 0, 0, NULL;"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

// 9. "EXECUTE (Transact-SQL)": `EXECUTE ('string') AS USER = 'name'`: "the
// context switch to the specified user is valid only for the execution of
// the string", which needs IMPERSONATE on that user. ops.Fix, as maint (no
// right on the fence, IMPERSONATE on writer, in db_datawriter), runs
// N'DELETE FROM fence.Resource;' AS USER = 'writer': the DELETE passes as
// writer. check weighs the text against maint: a false clean. Control: the
// same text between EXECUTE AS USER = 'writer' and REVERT.

fn as_writer(statements: &str) -> Catalog {
    let mut c = lending(statements);
    c.principals.push(no_login("writer"));
    c.memberships.push(member("db_datawriter", "writer"));
    c.permissions.push(grant("maint", "IMPERSONATE", on_role("writer")));
    c
}

#[test]
fn probe5_09_exec_string_as_user_runs_the_text_as_that_user() {
    reached(
        &as_writer("EXEC (N'DELETE FROM fence.Resource;') AS USER = 'writer';"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

#[test]
fn probe5_09_control_the_same_text_after_execute_as_user() {
    reached(
        &as_writer("EXECUTE AS USER = 'writer'; EXEC (N'DELETE FROM fence.Resource;'); REVERT;"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix"],
    );
}

// 10. "ALTER ROLE (Transact-SQL)": ADD MEMBER needs ALTER on the role;
// maint holds ALTER on ROLE::fence_writers (which holds UPDATE on
// fence.Resource) and nothing on the fence. ops.Fix, as maint, runs the
// constant text N'ALTER ROLE fence_writers ADD MEMBER etl;': etl joins the
// role and writes fence.Resource itself. check reads a constant text's
// data statements only (before, it weighed any text run as maint as
// whatever maint may do): a false clean. Control: the same statement with
// the member's name handed by the caller.

fn adds_member(statements: &str) -> Catalog {
    let mut c = lending(statements);
    c.principals.push(role("fence_writers"));
    c.permissions
        .push(grant("fence_writers", "UPDATE", object("fence", "Resource")));
    c.permissions.push(grant("maint", "ALTER", on_role("fence_writers")));
    c
}

#[test]
fn probe5_10_a_constant_text_that_adds_the_caller_to_a_writing_role() {
    let c = adds_member("EXEC (N'ALTER ROLE fence_writers ADD MEMBER etl;');");
    assert!(named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn probe5_10_control_the_same_statement_with_the_member_handed_by_the_caller() {
    let c = adds_member("EXEC (N'ALTER ROLE fence_writers ADD MEMBER ' + @who);");
    assert!(named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

// 11. "EXECUTE AS (Transact-SQL)": the user "can be specified as a local
// variable", so check weighs every principal as the user switched to.
// 1,000 users; 10 procedures run as maint (in db_owner, who may
// impersonate every user), each switching to the user its caller names
// and running the next. check must answer within 30 s (it answers the
// control in about 2 s, and this in more than 2 minutes). Control: the
// same switches by a literal name.

fn many_switches(by_variable: bool) -> Catalog {
    let (users, modules) = (1000, 10);
    let mut c = lending("EXEC ops.Step0 @u = N'u1';");
    c.memberships.push(member("db_owner", "maint"));
    for i in 0..users {
        c.principals.push(no_login(&format!("u{i}")));
    }
    let to = if by_variable { "@u" } else { "N'u1'" };
    for i in 0..modules {
        let next = if i + 1 < modules {
            format!("EXEC ops.Step{} @u = @u;", i + 1)
        } else {
            "DELETE FROM ops.Stash;".to_string()
        };
        let mut m = module(
            "ops",
            &format!("Step{i}"),
            ObjectKind::Procedure,
            &format!(
                "CREATE PROCEDURE ops.Step{i} @u sysname WITH EXECUTE AS 'maint' AS \
                 EXECUTE AS USER = {to}; {next} REVERT;"
            ),
        );
        m.execute_as = Some("maint".into());
        c.objects.push(m);
    }
    c.objects.push(table("ops", "Stash"));
    c
}

#[test]
fn probe5_11_switches_by_variable_with_a_thousand_users_answer_in_time() {
    let took = within(30, many_switches(true));
    assert!(took.is_some(), "check took over 30 s");
}

#[test]
fn probe5_11_control_the_same_switches_by_literal_answer_in_time() {
    let took = within(30, many_switches(false));
    assert!(took.is_some(), "check took over 30 s");
}

// 12. "CREATE TRIGGER": a DML trigger fires for a statement that
// modifies its table, not one that reads it. ops.Orders has an AFTER
// UPDATE trigger (running as its caller) that updates fence.Resource;
// ops.Fix runs as maint (in db_datawriter) and writes no fence table
// itself.

pub(super) fn fires_orders_trigger(statements: &str) -> Catalog {
    let mut c = lending_writer(statements);
    c.objects.push(table("ops", "Orders"));
    c.objects.push(table("ops", "Log"));
    let mut t = module(
        "ops",
        "OrdersBump",
        ObjectKind::Trigger,
        &format!("CREATE TRIGGER ops.OrdersBump ON ops.Orders AFTER UPDATE AS {BUMP}"),
    );
    t.parent = Some("ops.Orders".into());
    c.objects.push(t);
    c
}

// 12. "WITH common_table_expression (Transact-SQL)": a reference to the
// expression's name uses the expression, whose base is the table it
// selects from. ops.Fix updates the CTE `Log` over ops.Log, for the ids
// ops.Orders holds: ops.Log is updated, ops.Orders only read, and
// ops.OrdersBump never fires. check now takes a CTE named as a table is
// for any table the code names: a false finding. Control: the same CTE
// over ops.Orders, for the ids ops.Log holds, fires it.

fn cte_over(base: &str, other: &str) -> Catalog {
    fires_orders_trigger(&format!(
        "WITH Log AS (SELECT Id, Shipped FROM {base}) UPDATE Log SET Shipped = 1 WHERE Id IN (SELECT Id FROM {other});"
    ))
}

#[test]
fn probe5_12_an_update_of_a_cte_over_another_table_fires_no_trigger_of_a_table_it_reads() {
    clean_for_etl(&cte_over("ops.Log", "ops.Orders"));
}

#[test]
fn probe5_12_control_the_same_cte_over_the_triggers_table_fires_it() {
    reached(
        &cte_over("ops.Orders", "ops.Log"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

// 13. "UPDATE (Transact-SQL)": `UPDATE alias SET ... FROM t AS alias JOIN
// u ...`: the table the alias names in the FROM clause is the one
// updated; the joined table is only read. ops.Fix updates ops.Log (by its
// alias l) joined to ops.Orders: ops.OrdersBump never fires. check takes an
// alias for any table the code names: a false finding. Control: the alias
// names ops.Orders, which is updated and fires it.

fn update_by_alias(updated: &str, joined: &str) -> Catalog {
    fires_orders_trigger(&format!(
        "UPDATE x SET Shipped = 1 FROM {updated} AS x JOIN {joined} AS y ON y.Id = x.Id WHERE x.Id = @Id;"
    ))
}

#[test]
fn probe5_13_an_update_by_alias_fires_no_trigger_of_the_table_it_joins() {
    clean_for_etl(&update_by_alias("ops.Log", "ops.Orders"));
}

#[test]
fn probe5_13_control_the_alias_of_the_triggers_table_fires_it() {
    reached(
        &update_by_alias("ops.Orders", "ops.Log"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

// 14. "DENY Server Permissions" / "DENY (Transact-SQL)": a DENY binds every
// login but a member of sysadmin ("DENY does not apply to object owners or
// members of the sysadmin fixed server role"); a member of securityadmin
// may revoke a DENY, but a signed module runs the text it has, which
// revokes nothing. ops.Fix is signed by CERTIFICATE::Ops, whose login
// ops_signer is in securityadmin and in operators (granted CONTROL
// SERVER) and is denied CONTROL SERVER: the signature lends nothing on the
// fence, and etl is refused. check skips the DENY for a securityadmin
// member: a false finding. Control: the same login not in securityadmin.

fn signed(in_securityadmin: bool) -> Catalog {
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
    let server = server_facts(&mut c);
    server.role_members.push(Membership {
        role: "operators".into(),
        member: "ops_signer".into(),
    });
    if in_securityadmin {
        server.role_members.push(Membership {
            role: "securityadmin".into(),
            member: "ops_signer".into(),
        });
    }
    server.permissions.push(ServerPermission {
        grantee: "operators".into(),
        permission: "CONTROL SERVER".into(),
        on_login: None,
    });
    server.denies.push(ServerPermission {
        grantee: "ops_signer".into(),
        permission: "CONTROL SERVER".into(),
        on_login: None,
    });
    c
}

#[test]
fn probe5_14_a_securityadmin_signing_login_denied_control_server_lends_nothing() {
    clean_for_etl(&signed(true));
}

#[test]
fn probe5_14_control_the_same_login_outside_securityadmin_lends_nothing() {
    clean_for_etl(&signed(false));
}

// 15. "DENY (Transact-SQL)": "DENY takes precedence over all permissions,
// except that DENY does not apply to object owners or members of the
// sysadmin fixed server role"; CONTROL SERVER is a permission, not
// sysadmin. ops.Fix is signed by a key whose login holds CONTROL SERVER
// (through operators); etl, who runs it, is denied UPDATE on
// fence.Resource: the signed module's UPDATE runs with etl's token and the
// login's, and the DENY to etl refuses it. check lends the signature's
// write as dbo's, past any DENY: a false finding. Control: the login in
// sysadmin, which no DENY binds.

fn signed_control_server(sysadmin: bool) -> Catalog {
    let mut c = signed(false);
    let server = server_facts(&mut c);
    server.denies.clear();
    if sysadmin {
        server.role_members.push(Membership {
            role: "sysadmin".into(),
            member: "ops_signer".into(),
        });
    }
    c.permissions.push(deny("etl", "UPDATE", object("fence", "Resource")));
    c
}

#[test]
fn probe5_15_a_control_server_signature_does_not_pass_a_deny_to_its_caller() {
    clean_for_etl(&signed_control_server(false));
}

#[test]
fn probe5_15_control_a_sysadmin_signature_passes_it() {
    reached(
        &signed_control_server(true),
        "etl",
        WRITE,
        &["ops_signer is in sysadmin"],
    );
}
