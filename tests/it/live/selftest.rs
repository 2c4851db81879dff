//! `fencepost selftest` on a fresh deploy: every check held, or skipped for
//! a reason this engine is known for, through the library and through the
//! binary; a second run leaves the fence's rows as they were.

use crate::support;

use fencepost::selftest::{self, Report, SelftestOptions, Status};
use support::TestDatabase;
use support::binary;

/// The checks that cannot run here, and why, on Babelfish. Every other
/// check must run and hold.
const SKIPPED_ON_BABELFISH: &[(&str, &str)] = &[
    (
        "attention_stops_waiting_publish",
        "acknowledges a TDS Attention only after",
    ),
    ("service_login_rights", "no --service-connection given"),
    ("recovery_fork_visible", "shows no recovery fork"),
    ("recover_behind_open_transaction", "never runs them on your data"),
    ("provision_beside_recover", "never runs them on your data"),
    ("prune_below_lock_escalation", "never runs them on your data"),
];

/// Anywhere: these skip whatever the engine, for want of what the run was not given.
const SKIPPED_EVERYWHERE: &[&str] = &[
    "service_login_rights",
    "recover_behind_open_transaction",
    "provision_beside_recover",
    "prune_below_lock_escalation",
];

/// Each check's status as (name, status, seen), in run order.
fn statuses(report: &Report) -> Vec<(String, Status, String)> {
    report
        .checks
        .iter()
        .map(|c| (c.name.clone(), c.status, c.seen.clone()))
        .collect()
}

/// Asserts each check of `checks` held, or skipped as this engine is known to.
fn assert_expected(babelfish: bool, checks: &[(String, Status, String)]) {
    assert_eq!(
        checks.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        selftest::check_names(),
        "every check is reported, in order"
    );
    for (name, status, seen) in checks {
        let skip = if babelfish {
            SKIPPED_ON_BABELFISH
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, why)| *why)
        } else {
            SKIPPED_EVERYWHERE.contains(&name.as_str()).then_some("")
        };
        match skip {
            Some(why) => {
                assert_eq!(*status, Status::Skipped, "{name}: {seen}");
                assert!(seen.contains(why), "{name} skipped for another reason: {seen}");
            }
            None => assert_eq!(*status, Status::Passed, "{name}: {seen}"),
        }
    }
}

async fn fence_rows(db: &TestDatabase) -> (i32, i32) {
    let rows = db
        .query(
            "SELECT (SELECT COUNT(*) FROM fence.Resource), \
                    (SELECT COUNT(*) FROM fence.Tenure) + (SELECT COUNT(*) FROM fence.PublishedOperation);",
        )
        .await;
    (rows[0].get::<i32, _>(0).unwrap(), rows[0].get::<i32, _>(1).unwrap())
}

#[tokio::test]
async fn every_check_holds_or_is_skipped_for_a_known_reason_and_a_run_leaves_nothing() {
    let Some(db) =
        TestDatabase::deployed("every_check_holds_or_is_skipped_for_a_known_reason_and_a_run_leaves_nothing").await
    else {
        return;
    };
    let babelfish = db.is_babelfish().await;
    let before = fence_rows(&db).await;
    let mut events = 0;
    let report = selftest::run(&db.connection_string(), &SelftestOptions::default(), &mut |_| {
        events += 1
    })
    .await
    .expect("the selftest runs");
    assert_eq!(
        events,
        2 * selftest::check_names().len(),
        "a start and an end per check"
    );
    assert_expected(babelfish, &statuses(&report));
    assert!(report.all_held());
    assert_eq!(report.engine.babelfish, babelfish);
    assert_eq!(report.engine.database, db.name);
    assert!(report.key_root.starts_with(selftest::KEY_ROOT));
    assert_eq!(report.left_behind, "deleted at the end of the run");
    assert_eq!(fence_rows(&db).await, before, "the run's rows are gone");

    // The binary, as a pipeline runs it: the same checks in one JSON document.
    let output = binary::tokio(binary::fencepost_on(&db.ado(), ["selftest", "--format", "json"]))
        .output()
        .await
        .expect("run fencepost");
    let stderr = binary::stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("selftest: [1/"), "a progress line per check: {stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    let checks: Vec<(String, Status, String)> = json["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| {
            let status = match c["status"].as_str() {
                Some("passed") => Status::Passed,
                Some("failed") => Status::Failed,
                Some("skipped") => Status::Skipped,
                other => panic!("status {other:?}"),
            };
            for field in ["behaviour", "document", "expected", "seen"] {
                assert!(!c[field].as_str().unwrap_or("").is_empty(), "{c}: {field}");
            }
            (
                c["name"].as_str().unwrap().to_string(),
                status,
                c["seen"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_expected(babelfish, &checks);
    assert_eq!(json["engine"]["babelfish"], serde_json::Value::Bool(babelfish));
    assert_eq!(
        fence_rows(&db).await,
        before,
        "a second run leaves the fence's rows as they were"
    );
    db.drop().await;
}

/// Runs the service check alone with `service_ado` as --service-connection.
async fn service_check(db: &TestDatabase, service_ado: &str) -> (Status, String) {
    let mut options = SelftestOptions::default();
    options
        .only(&["service_login_rights".to_string()])
        .service(fencepost::ConnectionString::parse(service_ado).unwrap());
    let report = selftest::run(&db.connection_string(), &options, &mut |_| {})
        .await
        .expect("the selftest runs");
    let check = &report.checks[0];
    (check.status, check.seen.clone())
}

#[tokio::test]
async fn a_service_only_login_holds_the_service_check_once_the_procedures_may_write_for_it() {
    const TEST: &str = "a_service_only_login_holds_the_service_check_once_the_procedures_may_write_for_it";
    let Some(mut db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let service = db.login_in_role(Some("fence_service")).await;
    if db.is_babelfish().await {
        let Some(postgres) = support::babelfish_postgres::postgres_or_skip(TEST) else {
            db.drop().await;
            return;
        };
        // Without ownership chaining the service's calls are refused
        // until the procedures run as their owner: the check says so.
        let (status, seen) = service_check(&db, &service).await;
        assert_eq!(status, Status::Failed, "{seen}");
        assert!(seen.contains("Babelfish does not chain ownership"), "{seen}");
        support::babelfish_postgres::run_security_definer_script(&postgres, &db.name);
    }
    let (status, seen) = service_check(&db, &service).await;
    assert_eq!(status, Status::Passed, "{seen}");
    assert!(seen.contains("direct read refused"), "{seen}");
    db.drop().await;
}

#[tokio::test]
async fn a_run_in_which_no_check_held_fails_saying_nothing_was_proven() {
    let Some(db) = TestDatabase::deployed("a_run_in_which_no_check_held_fails_saying_nothing_was_proven").await else {
        return;
    };
    // Without --service-connection the one check asked for is skipped.
    let output = binary::tokio(binary::fencepost_on(
        &db.ado(),
        ["selftest", "-q", "--check", "service_login_rights"],
    ))
    .output()
    .await
    .expect("run fencepost");
    let stderr = binary::stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no check held: nothing was proven"), "{stderr}");
    db.drop().await;
}

#[cfg(unix)]
#[tokio::test]
async fn an_interrupted_run_exits_130_and_its_report_names_the_checks_not_run() {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let Some(db) = TestDatabase::deployed("an_interrupted_run_exits_130_and_its_report_names_the_checks_not_run").await
    else {
        return;
    };
    let mut child = binary::tokio(binary::fencepost_on(&db.ado(), ["selftest", "--format", "json"]))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run fencepost");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stderr = String::new();
    // The first check is under way: Ctrl-C now abandons it and stops the run.
    while let Some(line) = lines.next_line().await.unwrap() {
        stderr.push_str(&line);
        stderr.push('\n');
        if line.contains("selftest: [1/") {
            break;
        }
    }
    let pid = child.id().expect("running").to_string();
    let sent = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    while let Some(line) = lines.next_line().await.unwrap() {
        stderr.push_str(&line);
        stderr.push('\n');
    }
    let output = child.wait_with_output().await.unwrap();
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("selftest: interrupted;"), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(json["interrupted"], serde_json::Value::Bool(true), "{json}");
    assert_eq!(
        json["checks"],
        serde_json::json!([]),
        "the check under way is abandoned: {json}"
    );
    assert_eq!(json["not_run"], serde_json::json!(selftest::check_names()), "{json}");
    db.drop().await;
}

#[tokio::test]
async fn a_service_connection_to_another_database_fails_the_service_check_saying_so() {
    const TEST: &str = "a_service_connection_to_another_database_fails_the_service_check_saying_so";
    let Some(mut db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let service = db.login_in_role(Some("fence_service")).await;
    let elsewhere = service.replace(&format!("Database={};", db.name), "Database=master;");
    assert_ne!(elsewhere, service);
    let (status, seen) = service_check(&db, &elsewhere).await;
    assert_eq!(status, Status::Failed, "{seen}");
    assert!(seen.contains("not in the database under test"), "{seen}");
    db.drop().await;
}

/// The checks that act on every key of a database, by name.
const DATABASE_WIDE: [&str; 3] = [
    "recover_behind_open_transaction",
    "provision_beside_recover",
    "prune_below_lock_escalation",
];

/// How many databases of `name` the server of `db` has.
async fn databases_named(db: &TestDatabase, name: &str) -> i32 {
    let rows = db
        .query(&format!("SELECT COUNT(*) FROM sys.databases WHERE name = N'{name}';"))
        .await;
    rows[0].get::<i32, _>(0).unwrap()
}

/// `--scratch-database`: the checks that act on every key run, and hold,
/// in a database the run creates and drops; none is left behind, and the
/// database under test is not touched by them.
#[tokio::test]
async fn a_run_with_a_scratch_database_runs_the_database_wide_checks_there_and_leaves_no_database() {
    const TEST: &str = "a_run_with_a_scratch_database_runs_the_database_wide_checks_there_and_leaves_no_database";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let before = fence_rows(&db).await;
    let output = binary::tokio(binary::fencepost_on(
        &db.ado(),
        [
            "selftest",
            "--scratch-database",
            "--format",
            "json",
            "--check",
            &DATABASE_WIDE.join(","),
        ],
    ))
    .output()
    .await
    .expect("run fencepost");
    let stderr = binary::stderr(&output);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    for check in json["checks"].as_array().expect("checks") {
        assert_eq!(check["status"], "passed", "{check}");
    }
    assert_eq!(json["checks"].as_array().unwrap().len(), DATABASE_WIDE.len());
    let scratch = &json["scratch_database"];
    let name = scratch["name"].as_str().expect("the scratch database is named");
    assert!(name.starts_with(selftest::SCRATCH_PREFIX), "{name}");
    assert_eq!(scratch["dropped"], serde_json::Value::Bool(true), "{scratch}");
    assert_eq!(scratch["engine"]["database"], name, "{scratch}");
    assert!(
        stderr.contains(&format!("created the scratch database {name}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("dropped the scratch database {name}")),
        "{stderr}"
    );
    assert_eq!(databases_named(&db, name).await, 0, "{name} was left behind");
    assert_eq!(fence_rows(&db).await, before, "the database under test is as it was");
    db.drop().await;
}

/// A login that may not create a database: each check that needs the
/// scratch database is skipped, naming the right it lacks; the others run.
#[tokio::test]
async fn a_login_that_may_not_create_a_database_skips_the_database_wide_checks_saying_which_right_it_lacks() {
    const TEST: &str =
        "a_login_that_may_not_create_a_database_skips_the_database_wide_checks_saying_which_right_it_lacks";
    let Some(mut db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let service = db.login_in_role(Some("fence_service")).await;
    let mut options = SelftestOptions::default();
    let mut checks: Vec<String> = DATABASE_WIDE.iter().map(|c| c.to_string()).collect();
    checks.insert(0, "handover".to_string());
    options
        .only(&checks)
        .scratch_database(fencepost::deploy::Sources::embedded().unwrap());
    let report = selftest::run(
        &fencepost::ConnectionString::parse(&service).unwrap(),
        &options,
        &mut |_| {},
    )
    .await
    .expect("the selftest runs");
    assert!(report.scratch_database.is_none(), "{:?}", report.scratch_database);
    for (name, status, seen) in statuses(&report) {
        if name == "handover" {
            continue;
        }
        assert_eq!(status, Status::Skipped, "{name}: {seen}");
        assert!(seen.contains("may not create the scratch database"), "{name}: {seen}");
        assert!(seen.contains("CREATE DATABASE"), "{name}: {seen}");
        eprintln!("{name} skipped, as it should: {seen}");
    }
    db.drop().await;
}

/// Runs the two checks that need the scratch database, sends `signal`
/// (`INT`, `TERM`) once the database exists, and answers the process's
/// output, the database's name and its stderr.
#[cfg(unix)]
async fn stopped_in_the_scratch_database(db: &TestDatabase, signal: &str) -> (std::process::Output, String, String) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut child = binary::tokio(binary::fencepost_on(
        &db.ado(),
        [
            "selftest",
            "--scratch-database",
            "--format",
            "json",
            "--check",
            "provision_beside_recover,prune_below_lock_escalation",
        ],
    ))
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("run fencepost");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stderr = String::new();
    // The scratch database exists and the first check is about to start.
    let mut name = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        stderr.push_str(&line);
        stderr.push('\n');
        if let Some(created) = line.split("created the scratch database ").nth(1) {
            name = created.split_whitespace().next().unwrap_or_default().to_string();
            break;
        }
    }
    assert!(name.starts_with(selftest::SCRATCH_PREFIX), "{stderr}");
    let pid = child.id().expect("running").to_string();
    let sent = std::process::Command::new("kill")
        .args([format!("-{signal}").as_str(), &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    while let Some(line) = lines.next_line().await.unwrap() {
        stderr.push_str(&line);
        stderr.push('\n');
    }
    let output = child.wait_with_output().await.unwrap();
    let left = databases_named(db, &name).await;
    if left > 0 {
        // Not the test's to leave: dropped before the test fails on it.
        db.exec(&format!("DROP DATABASE [{name}];")).await;
    }
    assert_eq!(left, 0, "{name} was left behind: {stderr}");
    (output, name, stderr)
}

/// Ctrl-C once the scratch database is made: the first check is not
/// started (or is abandoned), the next is not run, and the database is dropped before the process exits.
#[cfg(unix)]
#[tokio::test]
async fn an_interrupted_run_still_drops_its_scratch_database() {
    const TEST: &str = "an_interrupted_run_still_drops_its_scratch_database";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let (output, name, stderr) = stopped_in_the_scratch_database(&db, "INT").await;
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(
        json["not_run"],
        serde_json::json!(["provision_beside_recover", "prune_below_lock_escalation"]),
        "the check about to start, or under way, and the next are not run: {json}"
    );
    let scratch = &json["scratch_database"];
    assert_eq!(scratch["name"], name.as_str(), "{scratch}");
    assert_eq!(scratch["dropped"], serde_json::Value::Bool(true), "{scratch}");
    db.drop().await;
}

/// Rows under `prefix` in each fence table a run writes: Resource,
/// PublishedOperation, OperatorOperation, Tenure.
async fn rows_under(db: &TestDatabase, prefix: &str) -> [i32; 4] {
    let like = format!(
        "{}%",
        prefix.replace('[', "[[]").replace('_', "[_]").replace('%', "[%]")
    );
    let rows = db
        .query(&format!(
            "SELECT (SELECT COUNT(*) FROM fence.Resource WHERE ResourceKey LIKE N'{like}'), \
                    (SELECT COUNT(*) FROM fence.PublishedOperation WHERE ResourceKey LIKE N'{like}'), \
                    (SELECT COUNT(*) FROM fence.OperatorOperation WHERE ResourceKey LIKE N'{like}'), \
                    (SELECT COUNT(*) FROM fence.Tenure WHERE ResourceKey LIKE N'{like}');"
        ))
        .await;
    [0, 1, 2, 3].map(|i| rows[0].get::<i32, _>(i).unwrap())
}

/// A login that may not delete from the fence tables keeps the run's keys:
/// a second run reuses them, so it adds no fence row, and its report says
/// what stays and that the next run reuses it.
#[tokio::test]
async fn a_second_run_by_a_login_that_may_not_delete_adds_no_fence_row() {
    const TEST: &str = "a_second_run_by_a_login_that_may_not_delete_adds_no_fence_row";
    let Some(mut db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let service = db.login_in_role(Some("fence_service")).await;
    if db.is_babelfish().await {
        let Some(postgres) = support::babelfish_postgres::postgres_or_skip(TEST) else {
            db.drop().await;
            return;
        };
        support::babelfish_postgres::run_security_definer_script(&postgres, &db.name);
    }
    let target = fencepost::ConnectionString::parse(&service).unwrap();
    let mut options = SelftestOptions::default();
    // Every check that writes in this database, as this login may run them.
    let checks: Vec<String> = selftest::check_names()
        .into_iter()
        .filter(|c| !DATABASE_WIDE.contains(c))
        .map(str::to_string)
        .collect();
    options.only(&checks);
    let first = selftest::run(&target, &options, &mut |_| {})
        .await
        .expect("the selftest runs");
    assert!(first.all_held(), "{}", first.to_text());
    let after_one = rows_under(&db, selftest::KEY_ROOT).await;
    assert!(after_one[0] > 0, "the run's keys stay for this login: {after_one:?}");
    let second = selftest::run(&target, &options, &mut |_| {})
        .await
        .expect("the selftest runs");
    assert!(second.all_held(), "{}", second.to_text());
    let after_two = rows_under(&db, selftest::KEY_ROOT).await;
    assert_eq!(
        after_two[0], after_one[0],
        "a second run adds no fence.Resource row: {after_one:?} → {after_two:?}"
    );
    // Kept on purpose, not left by a failed delete: the run exits as it
    // held, and the header says the keys stay for the next run.
    for run in [&first, &second] {
        assert!(!run.rows_left, "{}", run.left_behind);
        assert!(
            run.left_behind_by_the_run().is_empty(),
            "{:?}",
            run.left_behind_by_the_run()
        );
        assert!(
            run.left_behind.starts_with("kept:") && run.left_behind.contains("may not delete"),
            "{}",
            run.left_behind
        );
    }
    db.drop().await;
}

/// The scratch database is named on stderr before it is created, so a run
/// stopped at once while it is made still says what may remain.
#[tokio::test]
async fn the_scratch_database_is_named_before_it_is_created() {
    const TEST: &str = "the_scratch_database_is_named_before_it_is_created";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let output = binary::tokio(binary::fencepost_on(
        &db.ado(),
        [
            "selftest",
            "--scratch-database",
            "--check",
            "prune_below_lock_escalation",
        ],
    ))
    .output()
    .await
    .expect("run fencepost");
    let stderr = binary::stderr(&output);
    let creating = stderr.find("creating the scratch database fencepost_selftest_");
    let started = stderr.find("selftest: [1/1]");
    assert!(
        matches!((creating, started), (Some(c), Some(s)) if c < s),
        "named before it is created: {stderr}"
    );
    db.drop().await;
}

/// SIGTERM (a service manager's stop, a CI job cancelled) is taken as a
/// Ctrl-C: the check under way ends, the scratch database is dropped, and
/// the process exits 143.
#[cfg(unix)]
#[tokio::test]
async fn sigterm_stops_the_run_as_ctrl_c_does_and_drops_the_scratch_database() {
    const TEST: &str = "sigterm_stops_the_run_as_ctrl_c_does_and_drops_the_scratch_database";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let (output, _, stderr) = stopped_in_the_scratch_database(&db, "TERM").await;
    assert_eq!(output.status.code(), Some(143), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(json["interrupted"], serde_json::Value::Bool(true), "{json}");
    db.drop().await;
}

/// A user's key: provisioned, acquired, published and released, as a
/// service would; answers the lease it was published under.
async fn users_key(db: &TestDatabase, key: &str, payload: &str) -> fencepost::client::Lease {
    let mut config = fencepost::ClientConfig::new(db.connection_string());
    config.max_connections(1).allow_privileged_login(true);
    let client = fencepost::Client::connect_with(config).await.unwrap();
    let _ = client.provision(key).await.unwrap();
    let lease = match client.acquire(key, std::time::Duration::from_secs(30)).await.unwrap() {
        fencepost::client::Acquire::Acquired(lease) => lease,
        other => panic!("{other:?}"),
    };
    let published = client.publish(&lease, uuid::Uuid::new_v4(), payload).await.unwrap();
    assert_eq!(published, fencepost::client::Publish::Published);
    let _ = client.release(&lease).await.unwrap();
    lease
}

/// The generation, published generation and payload of `key`'s row, if any.
async fn key_row(db: &TestDatabase, key: &str) -> Option<(i64, Option<i64>, Option<String>)> {
    let rows = db
        .query(&format!(
            "SELECT Generation, PublishedGeneration, Payload FROM fence.Resource WHERE ResourceKey = N'{}';",
            key.replace('\'', "''")
        ))
        .await;
    rows.first().map(|r| {
        (
            r.get::<i64, _>(0).unwrap(),
            r.get::<i64, _>(1),
            r.get::<&str, _>(2).map(str::to_string),
        )
    })
}

/// `--key-prefix orders:` never makes the selftest's keys the user's own
/// `orders:<check>`: the user's key keeps its generation, its payload and
/// its row (a deleted row would restart at generation 1 and make a fencing
/// token already issued valid again).
#[tokio::test]
async fn a_key_prefix_never_reaches_a_users_own_key() {
    const TEST: &str = "a_key_prefix_never_reaches_a_users_own_key";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let lease = users_key(&db, "orders:handover", "the user's order").await;
    let before = key_row(&db, "orders:handover").await;
    assert_eq!(
        before,
        Some((
            lease.generation(),
            Some(lease.generation()),
            Some("the user's order".to_string())
        ))
    );
    let mut options = SelftestOptions::default();
    options.key_prefix("orders:").only(&["handover".to_string()]);
    let report = selftest::run(&db.connection_string(), &options, &mut |_| {})
        .await
        .expect("the selftest runs");
    assert_eq!(
        key_row(&db, "orders:handover").await,
        before,
        "the user's key is untouched"
    );
    assert_eq!(report.checks[0].status, Status::Passed, "{}", report.to_text());
    assert_eq!(
        report.key_root, "fencepost-selftest:orders:",
        "the run's keys stay under the reserved root"
    );
    db.drop().await;
}

/// A key under the reserved root whose publication the selftest did not
/// write is refused, named, and left as it was, also by the clean-up.
#[tokio::test]
async fn a_key_under_the_selftest_root_that_holds_someone_elses_publication_is_refused_and_kept() {
    const TEST: &str = "a_key_under_the_selftest_root_that_holds_someone_elses_publication_is_refused_and_kept";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let key = "fencepost-selftest:handover";
    users_key(&db, key, "not the selftest's").await;
    let before = key_row(&db, key).await;
    let mut options = SelftestOptions::default();
    options.only(&["handover".to_string()]);
    let report = selftest::run(&db.connection_string(), &options, &mut |_| {})
        .await
        .expect("the selftest runs");
    let check = &report.checks[0];
    assert_eq!(check.status, Status::Failed, "{}", report.to_text());
    assert!(
        check.seen.contains(key) && check.seen.contains("not the selftest's"),
        "the refusal names the key and why: {}",
        check.seen
    );
    assert_eq!(key_row(&db, key).await, before, "the key is untouched, its row kept");
    db.drop().await;
}

/// Starts `fencepost selftest` with `args`, reads stderr until a line holds
/// `until`, sends `signal`, and answers the output, stderr, the line seen
/// and how long the process took to end after the signal.
#[cfg(unix)]
async fn signalled_at(
    db: &TestDatabase,
    args: &[&str],
    until: &str,
    signal: &str,
) -> (std::process::Output, String, String, std::time::Duration) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut child = binary::tokio(binary::fencepost_on(&db.ado(), args.iter().copied()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run fencepost");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut stderr = String::new();
    let mut seen = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        stderr.push_str(&line);
        stderr.push('\n');
        if line.contains(until) {
            seen = line;
            break;
        }
    }
    assert!(!seen.is_empty(), "never saw {until:?}: {stderr}");
    let pid = child.id().expect("running").to_string();
    let sent = std::process::Command::new("kill")
        .args([format!("-{signal}").as_str(), &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let signalled = std::time::Instant::now();
    while let Some(line) = lines.next_line().await.unwrap() {
        stderr.push_str(&line);
        stderr.push('\n');
    }
    let output = child.wait_with_output().await.unwrap();
    (output, stderr, seen, signalled.elapsed())
}

/// SIGTERM while a check waits (here for a 30 s lease a stopped run would
/// leave on its key, held by the test): the check is abandoned, not waited
/// out, and the run ends well within the 7.5 s a cancelled CI job leaves
/// before SIGKILL, its rows deleted.
#[cfg(unix)]
#[tokio::test]
async fn sigterm_abandons_the_check_under_way_and_the_run_ends_within_seconds() {
    const TEST: &str = "sigterm_abandons_the_check_under_way_and_the_run_ends_within_seconds";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let key = "fencepost-selftest:handover";
    let mut config = fencepost::ClientConfig::new(db.connection_string());
    config.max_connections(1).allow_privileged_login(true);
    let holder = fencepost::Client::connect_with(config).await.unwrap();
    let _ = holder.provision(key).await.unwrap();
    let held = holder.acquire(key, std::time::Duration::from_secs(30)).await.unwrap();
    assert!(matches!(held, fencepost::client::Acquire::Acquired(_)), "{held:?}");
    let (output, stderr, _, took) = signalled_at(
        &db,
        &["selftest", "--format", "json", "--check", "handover"],
        "selftest: [1/1] handover",
        "TERM",
    )
    .await;
    assert_eq!(output.status.code(), Some(143), "{stderr}");
    assert!(
        took < std::time::Duration::from_secs(7),
        "took {took:?} after SIGTERM: {stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(json["not_run"], serde_json::json!(["handover"]), "{json}");
    assert_eq!(json["rows_left"], serde_json::Value::Bool(false), "{json}");
    db.drop().await;
}

/// Ctrl-C while the scratch database is made: no check starts, the making
/// is abandoned and the database is gone when the process ends, within
/// seconds.
#[cfg(unix)]
#[tokio::test]
async fn a_stop_while_the_scratch_database_is_made_starts_no_check_and_leaves_no_database() {
    const TEST: &str = "a_stop_while_the_scratch_database_is_made_starts_no_check_and_leaves_no_database";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let (output, stderr, seen, took) = signalled_at(
        &db,
        &[
            "selftest",
            "--scratch-database",
            "--format",
            "json",
            "--check",
            "provision_beside_recover,prune_below_lock_escalation",
        ],
        "creating the scratch database ",
        "INT",
    )
    .await;
    let name = seen
        .split("creating the scratch database ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    let left = databases_named(&db, &name).await;
    if left > 0 {
        // Not the test's to leave: dropped before the test fails on it.
        db.exec(&format!("DROP DATABASE [{name}];")).await;
    }
    assert_eq!(left, 0, "{name} was left behind: {stderr}");
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(!stderr.contains("selftest: [1/"), "no check starts: {stderr}");
    assert!(
        took < std::time::Duration::from_secs(7),
        "took {took:?} after Ctrl-C: {stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(json["checks"], serde_json::json!([]), "{json}");
    assert_eq!(
        json["not_run"],
        serde_json::json!(["provision_beside_recover", "prune_below_lock_escalation"]),
        "{json}"
    );
    db.drop().await;
}
