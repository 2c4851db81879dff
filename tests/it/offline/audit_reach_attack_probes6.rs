//! Sixth probes of the lent writes: the users an EXECUTE AS USER by a
//! variable may name, which check now weighs one for many when their
//! memberships and default schema are alike; the common table expressions
//! a data statement's target may name, and the one table an UPDATE of one
//! over a join changes; a thousand users with logins, and switches by
//! variable among them; and a DENY on a TRUSTWORTHY database's owner.
//! Layouts written from
//! Microsoft's documentation where SQL Server lets a principal write a
//! fence table and check does not name it (false clean), or refuses it and
//! check names it (false finding), or where check takes too long; each with
//! a control of the same shape that passes. A probe that fails names a hole
//! in what FP027 follows.

use crate::support;

use super::audit_reach_attack_probes5::{clean_for_etl, fires_orders_trigger, lending};
use super::audit_reach_leaving_roles::on_role;
use super::audit_reach_lending_modules::{WRITE, no_login, reached, table, with_etl, within};
use fencepost::audit::{Catalog, ObjectKind, OtherDatabase, OtherDatabaseUser, Rule, Securable, ServerPermission};
use support::fixtures::*;

const SWITCH_AND_DELETE: &str = "EXECUTE AS USER = @who; DELETE FROM fence.Resource; REVERT;";

// 1. "EXECUTE AS (Transact-SQL)": the user "can be specified as a local
// variable", and the switch needs IMPERSONATE on that user ("GRANT Database
// Principal Permissions": IMPERSONATE is granted ON USER::name, one user at
// a time). u1 and u2 are users without login, both in db_datawriter, with
// nothing else; maint holds IMPERSONATE on u2 alone. ops.Fix, as maint,
// switches to the user its caller names and deletes from fence.Resource:
// etl names u2 and the DELETE passes. check weighs one user for all users
// of the same memberships, u1 (the first), before asking whether maint may
// impersonate it: maint may not, and u2 is never weighed: a false clean.
// Control: maint holds IMPERSONATE on u1.

fn two_alike_users(impersonable: &str) -> Catalog {
    let mut c = lending(SWITCH_AND_DELETE);
    for u in ["u1", "u2"] {
        c.principals.push(no_login(u));
        c.memberships.push(member("db_datawriter", u));
    }
    c.permissions.push(grant("maint", "IMPERSONATE", on_role(impersonable)));
    c
}

#[test]
fn probe6_01_a_switch_by_variable_to_the_one_alike_user_the_lender_may_impersonate() {
    reached(&two_alike_users("u2"), "etl", WRITE, &["EXECUTE on ops.Fix", "u2"]);
}

#[test]
fn probe6_01_control_the_lender_may_impersonate_the_first_alike_user() {
    reached(&two_alike_users("u1"), "etl", WRITE, &["EXECUTE on ops.Fix", "u1"]);
}

// 2. Same pages: EXECUTE AS "cannot be a group, role, certificate, key, or
// built-in account", so a role is never switched to. The role helpers is
// in db_datawriter, as the user u2 is (without login, nothing else); maint
// holds IMPERSONATE on u2. etl names u2 and the DELETE passes. check takes
// helpers (listed first) as the one that stands for every principal of
// those memberships, finds it no user, and never weighs u2: a false clean.
// Control: helpers is not in db_datawriter.

fn role_then_user(role_writes: bool) -> Catalog {
    let mut c = lending(SWITCH_AND_DELETE);
    c.principals.push(role("helpers"));
    if role_writes {
        c.memberships.push(member("db_datawriter", "helpers"));
    }
    c.principals.push(no_login("u2"));
    c.memberships.push(member("db_datawriter", "u2"));
    c.permissions.push(grant("maint", "IMPERSONATE", on_role("u2")));
    c
}

#[test]
fn probe6_02_a_role_of_the_same_memberships_does_not_stand_for_a_user() {
    reached(&role_then_user(true), "etl", WRITE, &["EXECUTE on ops.Fix", "u2"]);
}

#[test]
fn probe6_02_control_a_role_of_other_memberships() {
    reached(&role_then_user(false), "etl", WRITE, &["EXECUTE on ops.Fix", "u2"]);
}

// 3. "CREATE USER (Transact-SQL)" / "GRANT Database Permissions": a user
// made FOR LOGIN is granted CONNECT, so in a database its people log in to
// each user has a login and a CONNECT grant. A database of 1,000 such users
// and nothing else: check answered 250 in about 1 s, 500 in about 5 s and
// 1,000 in 34 s (debug build, alone), its time growing with the square of
// the users; it must answer within 60 s however loaded the machine, so a
// search that grows faster fails. Control: the same users without their
// CONNECT grants.

fn users_with_logins(connect: bool) -> Catalog {
    let mut c = with_etl();
    for i in 0..1000 {
        let name = format!("u{i}");
        c.principals.push(user(&name, Some(&name)));
        if connect {
            c.permissions.push(grant(&name, "CONNECT", Securable::Database));
        }
    }
    c
}

#[test]
fn probe6_03_a_thousand_users_each_granted_connect_answer_in_time() {
    let took = within(60, users_with_logins(true));
    assert!(took.is_some(), "check took over 60 s");
}

#[test]
fn probe6_03_control_the_same_users_without_connect_answer_in_time() {
    let took = within(30, users_with_logins(false));
    assert!(took.is_some(), "check took over 30 s");
}

// 8. "EXECUTE AS (Transact-SQL)": the user "can be specified as a local
// variable", so check weighs every principal as the user switched to, one
// for many only among those nothing names apart; a user with a login is
// named apart. 1,000 users with logins (no CONNECT grant, see 3); 10
// procedures run as maint (in db_owner, who may impersonate every user),
// each switching to the user its caller names and running the next. check
// must answer within 30 s. Control: the same switches by a literal name.

fn many_switches(by_variable: bool) -> Catalog {
    let (users, modules) = (1000, 10);
    let mut c = lending("EXEC ops.Step0 @u = N'u1';");
    c.memberships.push(member("db_owner", "maint"));
    for i in 0..users {
        let name = format!("u{i}");
        c.principals.push(user(&name, Some(&name)));
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
fn probe6_08_switches_by_variable_among_a_thousand_users_with_logins_answer_in_time() {
    let took = within(30, many_switches(true));
    assert!(took.is_some(), "check took over 30 s");
}

#[test]
fn probe6_08_control_the_same_switches_by_literal_answer_in_time() {
    let took = within(30, many_switches(false));
    assert!(took.is_some(), "check took over 30 s");
}

// 4. "WITH common_table_expression (Transact-SQL)": a common table
// expression is "derived from a simple query and defined within the
// execution scope of a single SELECT, INSERT, UPDATE, MERGE, or DELETE
// statement". ops.Fix reads a CTE named Orders in one statement, then
// updates Orders in the next: that UPDATE names the table ops.Orders (the
// module's schema) and fires ops.OrdersBump, whose UPDATE of
// fence.Resource maint may make. check takes every target of the module
// named as some CTE is for that CTE: a false clean. Control: the CTE
// named Pending.

fn cte_then_update(cte: &str) -> Catalog {
    fires_orders_trigger(&format!(
        "WITH {cte} AS (SELECT 1 AS Shipped) SELECT Shipped FROM {cte}; UPDATE Orders SET Shipped = 1;"
    ))
}

#[test]
fn probe6_04_a_cte_ends_with_its_statement_and_the_next_update_names_the_table() {
    reached(
        &cte_then_update("Orders"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

#[test]
fn probe6_04_control_a_cte_of_another_name() {
    reached(
        &cte_then_update("Pending"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

// 5. "CREATE VIEW (Transact-SQL)", Updatable Views (which "WITH
// common_table_expression" applies to a CTE an UPDATE names): "Any
// modifications ... must reference columns from only one base table". The
// CTE Log joins ops.Log to ops.Orders and the UPDATE sets a column of
// ops.Log: only ops.Log is modified, ops.Orders only read, and
// ops.OrdersBump never fires. check takes any table the CTE's query names
// for the one written: a false finding. Control: the same join whose
// column set is ops.Orders'.

fn cte_join(written: &str, read: &str) -> Catalog {
    fires_orders_trigger(&format!(
        "WITH Log AS (SELECT w.Id, w.Shipped FROM {written} AS w JOIN {read} AS r ON r.Id = w.Id) \
         UPDATE Log SET Shipped = 1;"
    ))
}

#[test]
fn probe6_05_an_update_of_a_joining_cte_writes_only_the_table_of_its_columns() {
    clean_for_etl(&cte_join("ops.Log", "ops.Orders"));
}

#[test]
fn probe6_05_control_the_join_whose_columns_are_the_triggers_table() {
    reached(
        &cte_join("ops.Orders", "ops.Log"),
        "etl",
        WRITE,
        &["which fires ops.OrdersBump"],
    );
}

// 7. "Extending Database Impersonation by Using EXECUTE AS": a context
// made in a TRUSTWORTHY database is trusted at server level only when the
// database's owner (the authenticator) holds AUTHENTICATE SERVER; "DENY
// Server Permissions": a DENY binds every login but sysadmin. The owner
// reports_owner is in the server role trusted (granted AUTHENTICATE
// SERVER), is denied AUTHENTICATE SERVER itself, and is in securityadmin.
// analyst, db_owner in reports, makes a context there: its authenticator
// is refused, so the context stays in reports. That securityadmin may
// revoke a DENY in a session of reports_owner's does not lend it to a
// context whose trust is what the DENY refuses. check skips the DENY for a
// securityadmin member and names analyst: a false finding. Control: the
// same owner outside securityadmin.

fn denied_authenticator(in_securityadmin: bool) -> Catalog {
    let mut c = clean();
    let server = server_facts(&mut c);
    server.role_members.push(fencepost::audit::Membership {
        role: "trusted".into(),
        member: "reports_owner".into(),
    });
    if in_securityadmin {
        server.role_members.push(fencepost::audit::Membership {
            role: "securityadmin".into(),
            member: "reports_owner".into(),
        });
    }
    server.permissions.push(server_grant("trusted", "AUTHENTICATE SERVER"));
    server.denies.push(ServerPermission {
        grantee: "reports_owner".into(),
        permission: "AUTHENTICATE SERVER".into(),
        on_login: None,
    });
    c.trustworthy_databases.as_mut().unwrap().push(OtherDatabase {
        name: "reports".into(),
        owner: Some("reports_owner".into()),
        db_owners: Some(vec![OtherDatabaseUser {
            user: "analyst".into(),
            login: Some("analyst".into()),
            via: "analyst".into(),
            right: "db_owner".into(),
        }]),
    });
    c
}

fn analyst_named(c: &Catalog) -> bool {
    check(c)
        .findings
        .iter()
        .any(|f| f.rule == Rule::ReachesFence && f.principal.as_deref() == Some("login analyst"))
}

#[test]
fn probe6_07_a_denied_authenticator_in_securityadmin_trusts_no_context() {
    let c = denied_authenticator(true);
    assert!(!analyst_named(&c), "{:#?}", check(&c));
}

#[test]
fn probe6_07_control_a_denied_authenticator_outside_securityadmin() {
    let c = denied_authenticator(false);
    assert!(!analyst_named(&c), "{:#?}", check(&c));
}
