//! `check` against a real engine: each test deploys a fresh database with the
//! real runner, makes one attack with real T-SQL, and expects the rule that
//! names it. Where the engine cannot show that kind of finding, the report
//! says "cannot verify" for the rule, and the test says it skipped and why.

use crate::support;

use std::io::Write;
use std::time::Instant;

use fencepost::ConnectionString;
use fencepost::audit::{Policy, Report, Rule, evaluate, read_catalog, read_catalog_counted};
use support::proxy::Proxy;
use support::refusal::{Refusal, deployed_unless_refused_by_a_user, is_known, run};
use support::{TestDatabase, skip};

/// The rules Babelfish's catalog cannot show, measured on a clean deploy
/// (Babelfish 4.2): `sys.database_permissions` is always empty there, so the
/// rules that read grants cannot verify, and it does not chain ownership
/// (FP009). A test whose attack such a rule should name skips on Babelfish;
/// any other rule left unverified fails it.
const BABELFISH_CANNOT_VERIFY: [Rule; 15] = [
    Rule::WriteAccess,
    Rule::ReadAccess,
    Rule::CodeChange,
    Rule::PrincipalControl,
    Rule::ExecuteBeyondRole,
    Rule::OwnershipChain,
    Rule::GuestConnect,
    // sys.database_recovery_status has no rows there: no recovery fork.
    Rule::DatabaseIdentity,
    // Read from the permission catalog too.
    Rule::SchemaCode,
    Rule::BecomeService,
    // No sys.server_triggers: server triggers cannot be ruled out.
    Rule::IndirectCode,
    // No sys.security_predicates; row-level security and publications live
    // in PostgreSQL's catalog.
    Rule::SideChannel,
    // No SQL Server Agent (msdb.dbo.sysjobsteps); scheduled jobs (pg_cron)
    // live in PostgreSQL's catalog. Linked servers are read (FP025), and
    // Service Broker does not exist there (FP026).
    Rule::AgentJob,
    // Reachability weighs every grant: with the permission catalog empty,
    // no path through a grant can be ruled out.
    Rule::ReachesFence,
    // Foreign servers, extensions and server programs live in PostgreSQL's
    // catalog, outside the T-SQL one.
    Rule::OutsideTsql,
];

/// A report, and whether the engine is Babelfish: the one engine whose gaps
/// these tests may skip over.
struct Checked {
    report: Report,
    babelfish: bool,
}

async fn check(db: &TestDatabase) -> Checked {
    let mut conn = db.connect().await;
    let catalog = read_catalog(&mut conn).await.expect("read the catalog");
    Checked {
        report: evaluate(&catalog, &Policy::default()),
        babelfish: db.is_babelfish().await,
    }
}

fn say(line: &str) {
    // Past the harness's capture: a skip must be seen.
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Asserts `rule` names `object`. Only on Babelfish, and only for a rule it is
/// known not to show, may the rule be "cannot verify" instead: the test then
/// says it skipped. On any other engine, or for any other rule, "cannot
/// verify" fails the test like a missing finding.
fn expect_finding(test: &str, checked: &Checked, rule: Rule, object: &str, principal: Option<&str>) {
    let report = &checked.report;
    let found: Vec<_> = report.findings_of(rule).collect();
    if found.is_empty()
        && let Some(c) = report.cannot_verify_of(rule).next()
    {
        assert!(
            checked.babelfish && BABELFISH_CANNOT_VERIFY.contains(&rule),
            "{} could not be verified where the engine should show it: {}",
            rule.id(),
            c.reason
        );
        skip(
            test,
            &format!("{} cannot be verified on Babelfish: {}", rule.id(), c.reason),
        );
        return;
    }
    assert!(
        found.iter().any(|f| f.object.eq_ignore_ascii_case(object)
            && principal.is_none_or(|p| f.principal.as_deref().is_some_and(|fp| fp.eq_ignore_ascii_case(p)))),
        "{} did not name {object}:\n{report:#?}",
        rule.id()
    );
    // A finding outranks whatever else could not be verified.
    assert_eq!(report.exit_code(), 1, "{report:#?}");
}

#[tokio::test]
async fn a_clean_deploy_passes_or_says_what_it_cannot_verify() {
    let test = "a_clean_deploy_passes_or_says_what_it_cannot_verify";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let (catalog, round_trips) = read_catalog_counted(&mut db.connect().await)
        .await
        .expect("read the catalog");
    let babelfish = db.is_babelfish().await;
    // This database's catalog, then msdb's and master's: on Babelfish a
    // query naming those moves the rest of its batch there.
    assert_eq!(
        round_trips, 2,
        "a catalog batch failed and fell back to one query at a time"
    );
    let visibility = catalog.visibility.expect("the checking login's view is read");
    assert!(
        catalog.trustworthy_databases.is_some(),
        "the TRUSTWORTHY databases are listed"
    );
    assert_eq!(catalog.signatures_unreadable, None);
    // Linked servers are read everywhere; queues are read, or (Babelfish,
    // which has no Service Broker) known to be none.
    assert!(catalog.linked_servers.is_some(), "linked servers are read");
    assert!(catalog.activated_queues.is_some(), "activated queues are read");
    // Server roles are listed as roles, members or not.
    let server = catalog.server.as_ref().expect("the server's roles are read");
    assert!(
        server.roles.iter().any(|r| r.eq_ignore_ascii_case("sysadmin")),
        "{:?}",
        server.roles
    );
    let report = evaluate(&catalog, &Policy::default());
    assert_eq!(report.findings, vec![], "{report:#?}");
    let mut unverified: Vec<Rule> = report.cannot_verify.iter().map(|c| c.rule).collect();
    unverified.dedup();
    if babelfish {
        // The deploy login is sysadmin; the engine has no fn_my_permissions.
        assert!(visibility.sysadmin, "{visibility:?}");
        assert_eq!(unverified, BABELFISH_CANNOT_VERIFY, "{report:#?}");
        assert_eq!(report.exit_code(), 3);
        for c in &report.cannot_verify {
            let known = c
                .reason
                .contains("the permission catalog (sys.database_permissions) shows none of the")
                || c.reason.contains("does not chain ownership")
                || c.reason
                    .contains("(sys.server_triggers) could not be read on Babelfish")
                || c.reason
                    .contains("has no security policy catalog (sys.security_predicates)")
                || c.reason
                    .contains("has no SQL Server Agent catalog (msdb.dbo.sysjobsteps)")
                || c.reason.contains("outside the T-SQL catalog")
                || c.reason == fencepost::deploy::identity::CANNOT_VERIFY_REASON;
            assert!(known, "an unexpected cannot verify on Babelfish: {c:?}");
            say(&format!(
                "{test}: cannot verify {} on Babelfish: {}",
                c.rule.id(),
                c.reason
            ));
        }
    } else {
        assert!(
            visibility.sysadmin || visibility.view_definition == Some(true),
            "{visibility:?}"
        );
        assert_eq!(unverified, [], "{report:#?}");
        assert_eq!(report.exit_code(), 0);
    }
    junit_lists_each_rule_as_the_report_does(&db, &report);
    db.drop().await;
}

/// `check --format junit`, as CI runs it: one test case per rule checked,
/// an error for each rule the report cannot verify, a failure for none (a
/// clean deploy has no finding), and the report's exit code.
fn junit_lists_each_rule_as_the_report_does(db: &TestDatabase, report: &Report) {
    let out = support::binary::fencepost_on(&db.ado(), ["check", "--format", "junit"])
        .output()
        .expect("run fencepost");
    let xml = support::binary::stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(report.exit_code()),
        "{xml}{}",
        support::binary::stderr(&out)
    );
    assert!(xml.starts_with("<?xml"), "{xml}");
    // Each case up to the next: its name, and whether it holds an error.
    let cases: Vec<(&str, bool, bool)> = xml
        .split("<testcase ")
        .skip(1)
        .map(|case| {
            let name = case
                .split_once("name=\"")
                .and_then(|(_, rest)| rest.split_once(' '))
                .map(|(id, _)| id)
                .expect("a test case has a name");
            (name, case.contains("<error"), case.contains("<failure"))
        })
        .collect();
    let ids: Vec<&str> = report.rules_checked.iter().map(|r| r.id()).collect();
    assert_eq!(cases.iter().map(|c| c.0).collect::<Vec<_>>(), ids, "{xml}");
    let mut errored: Vec<&str> = cases.iter().filter(|c| c.1).map(|c| c.0).collect();
    let mut unverified: Vec<&str> = report.cannot_verify.iter().map(|c| c.rule.id()).collect();
    errored.sort_unstable();
    unverified.sort_unstable();
    unverified.dedup();
    assert_eq!(errored, unverified, "{xml}");
    assert!(
        !cases.iter().any(|c| c.2),
        "a clean deploy's report fails a rule:\n{xml}"
    );
}

#[tokio::test]
async fn update_on_the_resource_table_granted_to_fence_service_is_named() {
    let test = "update_on_the_resource_table_granted_to_fence_service_is_named";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    db.exec("GRANT UPDATE ON fence.Resource TO fence_service;").await;
    let checked = check(&db).await;
    expect_finding(
        test,
        &checked,
        Rule::WriteAccess,
        "fence.Resource",
        Some("fence_service"),
    );
    db.drop().await;
}

/// A login with a user in `fence_service`; returns the user's name.
async fn service_user(db: &mut TestDatabase) -> String {
    support::user_of(&db.login_in_role(Some("fence_service")).await)
}

/// Attacks Babelfish 4.2 cannot make because it lacks the feature, as it
/// answers them (its code for errors without a SQL Server number, and the
/// whole message): an attack the engine cannot make needs no check to find
/// it.
const BABELFISH_UNSUPPORTED: [Refusal; 3] = [
    // No db_datawriter role at all.
    (33557097, "role \"db_datawriter\" does not exist"),
    (
        33557097,
        "Adding members to db_owner is not currently supported in Babelfish",
    ),
    // A login with a user in some database cannot be made sysadmin (sysadmin
    // logins act as dbo everywhere instead).
    (
        33557097,
        "'sysadmin' role cannot be granted to login: a user is already created in database '{db}'",
    ),
];

/// Makes an attack. Returns false, after saying the test skipped, only when
/// the engine is Babelfish and the error is one of the features it is known
/// to lack; any other refusal (a permission the test login lacks, a typo)
/// fails the test.
async fn attack(test: &str, db: &TestDatabase, sql: &str) -> bool {
    let Err(e) = run(db, sql).await else {
        return true;
    };
    assert!(
        is_known(&BABELFISH_UNSUPPORTED, db, &e) && db.is_babelfish().await,
        "the attack `{sql}` failed, and not for a feature Babelfish is known to lack: {e}"
    );
    skip(test, &format!("Babelfish refuses the attack `{sql}`: {e}"));
    false
}

async fn a_service_user_in_a_fixed_role_is_named(test: &str, role: &str) {
    let probe = |user: &str| format!("ALTER ROLE [{role}] ADD MEMBER [{user}];");
    let Some(mut db) = deployed_unless_refused_by_a_user(test, &BABELFISH_UNSUPPORTED, probe).await else {
        return;
    };
    let user = service_user(&mut db).await;
    if attack(test, &db, &format!("ALTER ROLE [{role}] ADD MEMBER [{user}];")).await {
        let checked = check(&db).await;
        expect_finding(
            test,
            &checked,
            Rule::PrivilegedRole,
            &format!("ROLE::{role}"),
            Some(&user),
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_service_user_in_db_datawriter_is_named() {
    a_service_user_in_a_fixed_role_is_named("a_service_user_in_db_datawriter_is_named", "db_datawriter").await;
}

#[tokio::test]
async fn a_service_user_in_db_owner_is_named() {
    a_service_user_in_a_fixed_role_is_named("a_service_user_in_db_owner_is_named", "db_owner").await;
}

#[tokio::test]
async fn a_service_login_in_sysadmin_is_named() {
    let test = "a_service_login_in_sysadmin_is_named";
    let probe = |login: &str| format!("ALTER SERVER ROLE [sysadmin] ADD MEMBER [{login}];");
    let Some(mut db) = deployed_unless_refused_by_a_user(test, &BABELFISH_UNSUPPORTED, probe).await else {
        return;
    };
    // The login is the user's namesake (the support module makes both).
    let login = service_user(&mut db).await;
    if attack(
        test,
        &db,
        &format!("ALTER SERVER ROLE [sysadmin] ADD MEMBER [{login}];"),
    )
    .await
    {
        let checked = check(&db).await;
        expect_finding(
            test,
            &checked,
            Rule::ServerControl,
            &format!("LOGIN::{login}"),
            Some(&login),
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_procedure_that_updates_the_fence_unconditionally_is_named() {
    let test = "a_procedure_that_updates_the_fence_unconditionally_is_named";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    db.exec(
        "CREATE PROCEDURE dbo.RepairLease AS
         BEGIN
             UPDATE fence.Resource SET Owner = NULL, LeaseUntilUtc = NULL;
         END;",
    )
    .await;
    let checked = check(&db).await;
    expect_finding(test, &checked, Rule::ForeignModule, "dbo.RepairLease", None);
    db.drop().await;
}

#[tokio::test]
async fn a_shipped_procedure_altered_by_hand_is_named() {
    let test = "a_shipped_procedure_altered_by_hand_is_named";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let shipped = include_str!("../../../procedures/fence_api.Release.sql");
    let edited = shipped
        .replacen("CREATE PROCEDURE", "ALTER PROCEDURE", 1)
        .replace("AND Generation = @Generation", "");
    assert_ne!(
        edited,
        shipped.replacen("CREATE PROCEDURE", "ALTER PROCEDURE", 1),
        "the edit applies"
    );
    db.exec(&edited).await;
    let checked = check(&db).await;
    expect_finding(test, &checked, Rule::Drift, "fence_api.Release", None);
    db.drop().await;
}

#[tokio::test]
async fn force_release_granted_to_fence_service_is_named() {
    let test = "force_release_granted_to_fence_service_is_named";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    db.exec("GRANT EXECUTE ON fence_admin.ForceRelease TO fence_service;")
        .await;
    let checked = check(&db).await;
    expect_finding(
        test,
        &checked,
        Rule::ExecuteBeyondRole,
        "fence_admin.ForceRelease",
        Some("fence_service"),
    );
    db.drop().await;
}

/// Thousands of unrelated objects must not turn the check into one query per
/// object: it is one batch, and should take well under a second locally.
#[tokio::test]
async fn check_stays_one_batch_with_thousands_of_objects() {
    let test = "check_stays_one_batch_with_thousands_of_objects";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let mut conn = db.connect().await;
    let mut made = 0;
    for chunk in 0..30 {
        let mut batch = String::new();
        for i in 0..50 {
            let n = chunk * 50 + i;
            batch += &format!("CREATE TABLE dbo.Extra{n} (Id int NOT NULL PRIMARY KEY, Note nvarchar(100) NULL);\n");
        }
        support::exec(&mut conn, &batch).await;
        // CREATE PROCEDURE must be alone in its batch: each is its own
        // EXEC, fifty to a round trip.
        let mut batch = String::new();
        for i in 0..50 {
            let n = chunk * 50 + i;
            batch += &format!("EXEC (N'CREATE PROCEDURE dbo.ExtraProc{n} AS SELECT Id, Note FROM dbo.Extra{n};');\n");
        }
        support::exec(&mut conn, &batch).await;
        made += 100;
    }
    // A fresh session, as `fencepost check` has: Babelfish plans each
    // catalog view once per session, a cost that does not grow with objects.
    // It goes through a proxy that counts the requests on the wire.
    drop(conn);
    let proxy = Proxy::start(db.connection_string().server()).await;
    // Without a per-request timeout, as `fencepost check` connects: a fresh
    // session's first catalog read may take longer than the library's
    // default on a loaded machine, and its time is reported, not asserted.
    let mut target = ConnectionString::parse(&proxy.ado(&db.ado())).expect("the proxy's connection string");
    target.set_command_timeout(None);
    let mut conn = target.connect().await.expect("connect through the proxy");
    let before = proxy.requests();
    let started = Instant::now();
    let catalog = read_catalog(&mut conn).await.expect("read the catalog");
    let read = started.elapsed();
    let round_trips = proxy.requests() - before;
    let started = Instant::now();
    read_catalog(&mut conn).await.expect("read the catalog again");
    let again = started.elapsed();
    let again_round_trips = proxy.requests() - before - round_trips;
    let started = Instant::now();
    let report = evaluate(&catalog, &Policy::default());
    let evaluated = started.elapsed();
    say(&format!(
        "{test}: {made} extra objects, {} objects in the snapshot: read in {round_trips} request(s) on the wire, \
         {:?} (again in the same session: {again_round_trips}, {:?}), evaluate {:?}",
        catalog.objects.len(),
        read,
        again,
        evaluated
    ));
    for trips in [round_trips, again_round_trips] {
        assert_eq!(
            trips, 2,
            "one catalog read took more than its two requests on the wire (a failed batch falls back to one query at \
             a time)"
        );
    }
    assert!(catalog.objects.len() >= made);
    assert_eq!(
        catalog
            .objects
            .iter()
            .filter(
                |o| o.name.to_lowercase().starts_with("extraproc") && o.kind == fencepost::audit::ObjectKind::Procedure
            )
            .count(),
        made / 2,
        "every batched CREATE PROCEDURE made its procedure"
    );
    assert!(report.findings.is_empty(), "{report:#?}");
    // Time is reported, not asserted: benches/round_trips.rs measures it
    // against a baseline.
    // An open session keeps the database from being dropped.
    drop(conn);
    db.drop().await;
}
