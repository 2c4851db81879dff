//! `fencepost bench` against a real engine: the real binary, a short run,
//! every scenario in its JSON, and nothing of the bench's left behind.

use crate::support;

use std::process::Output;

use support::TestDatabase;

fn bench(ado: &str, args: &[&str]) -> Output {
    support::binary::fencepost_on(ado, ["bench"].iter().chain(args))
        .output()
        .expect("run fencepost bench")
}

/// Each of `scenario`'s `ratio_to` entries is its median latency over that
/// baseline's, to the two decimals printed (the medians are printed to three).
fn assert_ratios(scenarios: &[serde_json::Value], scenario: &serde_json::Value) {
    let p50 = scenario["p50_ms"].as_f64().unwrap();
    let ratios = scenario["ratio_to"].as_object().expect("ratio_to");
    for (baseline, ratio) in ratios {
        let other = scenarios
            .iter()
            .find(|s| s["name"] == baseline.as_str())
            .unwrap_or_else(|| panic!("a ratio to {baseline}, which is not measured: {scenario}"));
        let expected = p50 / other["p50_ms"].as_f64().unwrap();
        let ratio = ratio.as_f64().unwrap();
        assert!(
            (ratio - expected).abs() <= 0.01 + expected * 0.02,
            "ratio_to.{baseline} is {ratio}, the medians give {expected}: {scenario}"
        );
    }
}

fn count(rows: Vec<tiberius::Row>) -> i32 {
    rows[0].get::<i32, usize>(0).expect("a count")
}

/// How many rows of `fence.<table>` belong to a bench key.
async fn bench_rows(db: &TestDatabase, table: &str) -> i32 {
    let sql = format!("SELECT COUNT(*) FROM fence.{table} WHERE ResourceKey LIKE N'fencepost-bench:%';");
    count(db.query(&sql).await)
}

/// The names of the report's scenarios, in order.
fn scenario_names(scenarios: &[serde_json::Value]) -> Vec<&str> {
    scenarios.iter().map(|s| s["name"].as_str().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_short_run_reports_every_scenario_and_leaves_nothing_behind() {
    let Some(db) = TestDatabase::deployed("bench_live").await else {
        return;
    };
    let output = bench(
        &db.ado(),
        &[
            "--workers",
            "2",
            "--duration",
            "1s",
            "--warmup",
            "1",
            "--format",
            "json",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document on stdout");
    assert_eq!(report["workers"], 2);
    assert!(
        report["client_peak_memory_kib"].as_u64().is_some_and(|kib| kib > 0),
        "{report}"
    );
    assert!(report["engine"].as_str().is_some_and(|e| !e.is_empty()), "{report}");
    let scenarios = report["scenarios"].as_array().expect("scenarios");
    let find = |name: &str| {
        scenarios
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no scenario {name} in {report}"))
    };
    let expected = [
        ("select1", 1.0),
        ("raw_update", 1.0),
        ("applock_cycle", 3.0),
        ("acquire", 1.0),
        ("publish", 1.0),
        ("release", 1.0),
        ("fenced_cycle", 2.0),
        ("renew", 1.0),
    ];
    for (name, round_trips) in expected {
        let scenario = find(name);
        assert_eq!(scenario["round_trips_per_op"], round_trips, "{name}: {scenario}");
        assert!(scenario["operations"].as_u64().unwrap() > 0, "{name}: {scenario}");
        for field in [
            "ops_per_s",
            "p50_ms",
            "p95_ms",
            "p99_ms",
            "max_ms",
            "client_cpu_us_per_op",
        ] {
            assert!(scenario[field].as_f64().unwrap() > 0.0, "{name}.{field}: {scenario}");
        }
        if name != "select1" {
            assert!(scenario["ratio_to"]["select1"].as_f64().is_some(), "{name}: {scenario}");
        }
        assert_ratios(scenarios, scenario);
    }
    // A handover's requests are the waiter's, which may ask more than once.
    for name in ["applock_handover", "handover", "handover_polling"] {
        let scenario = find(name);
        assert!(scenario["operations"].as_u64().unwrap() > 0, "{name}: {scenario}");
        assert!(
            scenario["round_trips_per_op"].as_f64().unwrap() >= 1.0,
            "{name}: {scenario}"
        );
        assert!(scenario["p50_ms"].as_f64().unwrap() >= 0.0, "{name}: {scenario}");
    }
    // A waiting acquire may try more than once: at least a whole cycle.
    let contended = find("contended");
    assert!(contended["round_trips_per_op"].as_f64().unwrap() >= 3.0, "{contended}");
    // Acquire, then a publish that releases: at least two calls, and each
    // cycle holds the key for its work.
    let guarded = find("contended_guarded");
    assert!(guarded["round_trips_per_op"].as_f64().unwrap() >= 2.0, "{guarded}");
    assert!(guarded["p50_ms"].as_f64().unwrap() >= 20.0, "{guarded}");

    let keys = bench_rows(&db, "Resource").await;
    assert_eq!(keys, 0, "the bench's keys are left behind");
    let operations = bench_rows(&db, "PublishedOperation").await;
    assert_eq!(operations, 0, "the bench's publish records are left behind");
    let tenures = bench_rows(&db, "Tenure").await;
    assert_eq!(tenures, 0, "the bench's tenure history is left behind");
    let tables = db
        .query("SELECT COUNT(*) FROM sys.tables WHERE name LIKE N'fencepost[_]bench[_]%';")
        .await;
    assert_eq!(count(tables), 0, "the scratch table is left behind");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn held_reports_each_size_renewing_together_and_one_by_one_and_leaves_nothing_behind() {
    let Some(db) = TestDatabase::deployed("bench_live").await else {
        return;
    };
    let output = bench(
        &db.ado(),
        &[
            "--workers",
            "2",
            "--duration",
            "1s",
            "--workload",
            "held",
            "--held-guards",
            "3,40",
            "--format",
            "json",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document on stdout");
    let held = report["held"].as_array().expect("held");
    let rows: Vec<(u64, &str)> = held
        .iter()
        .map(|row| (row["guards"].as_u64().unwrap(), row["renewals"].as_str().unwrap()))
        .collect();
    assert_eq!(
        rows,
        [(3, "together"), (3, "one_by_one"), (40, "together"), (40, "one_by_one")],
        "{report}"
    );
    for row in held {
        // At least a renewal period of a 30 s lease, whatever --duration.
        assert!(row["window_s"].as_f64().unwrap() >= 10.0, "{row}");
        assert_eq!(row["lost"], 0, "{row}");
        assert!(row["server_sessions"].as_u64().unwrap() >= 1, "{row}");
        assert!(row["calls_per_s"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["signal_requests_per_s"].as_f64().unwrap() > 0.0, "{row}");
    }
    // 40 leases renewed once in the window: 40 calls one by one, a few together.
    let calls = |i: usize| held[i]["calls_per_s"].as_f64().unwrap() * held[i]["window_s"].as_f64().unwrap();
    assert!(calls(3) >= 30.0, "{report}");
    assert!(calls(2) <= 10.0, "{report}");
    assert_eq!(bench_rows(&db, "Resource").await, 0, "the bench's keys are left behind");
    assert_eq!(
        bench_rows(&db, "Tenure").await,
        0,
        "the bench's tenure history is left behind"
    );
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_empty_database_is_refused_with_the_command_that_deploys_it() {
    let Some(db) = TestDatabase::new("bench_live").await else {
        return;
    };
    let output = bench(&db.ado(), &["--workers", "1", "--operations", "5"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("fencepost migrate"), "{stderr}");
    assert!(output.stdout.is_empty(), "nothing measured, nothing printed");
    let output = bench(&db.ado(), &["--workers", "1", "--operations", "5", "--format", "json"]);
    assert_eq!(output.status.code(), Some(2));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("a JSON document");
    assert_eq!(document["error"]["kind"], "not_deployed", "{document}");
    assert!(
        document["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("fencepost migrate")),
        "{document}"
    );
    let tables = db
        .query("SELECT COUNT(*) FROM sys.tables WHERE name LIKE N'fencepost[_]bench[_]%';")
        .await;
    assert_eq!(count(tables), 0, "a refused run creates nothing");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn ctrl_c_stops_the_run_and_still_cleans_up() {
    let Some(db) = TestDatabase::deployed("bench_live").await else {
        return;
    };
    let child = support::binary::tokio(support::binary::fencepost_on(
        &db.ado(),
        ["bench", "--workers", "2", "--duration", "120s", "--format", "json"],
    ))
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .expect("run fencepost bench");
    // The scratch table exists from setup until clean-up: once it is there,
    // the run is under way.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let tables = db
            .query("SELECT COUNT(*) FROM sys.tables WHERE name LIKE N'fencepost[_]bench[_]%';")
            .await;
        if count(tables) > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < give_up,
            "the bench never created its scratch table"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // SAFETY: signals the child process this test started.
    let sent = unsafe { libc::kill(child.id().expect("the bench is running") as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0);
    let output = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("the interrupted bench still ran after 60 s")
        .unwrap();

    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("a JSON document");
    assert_eq!(document["error"]["kind"], "interrupted", "{document}");
    let tables = db
        .query("SELECT COUNT(*) FROM sys.tables WHERE name LIKE N'fencepost[_]bench[_]%';")
        .await;
    assert_eq!(count(tables), 0, "the scratch table is left behind");
    let keys = bench_rows(&db, "Resource").await;
    assert_eq!(keys, 0, "the bench's keys are left behind");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cycle_run_of_five_operations_that_cannot_remove_its_keys_exits_1_and_one_whose_calls_fail_is_a_bench_error()
{
    let Some(db) = TestDatabase::deployed("bench_live").await else {
        return;
    };
    let short = [
        "--workers",
        "1",
        "--operations",
        "5",
        "--warmup",
        "0",
        "--workload",
        "cycle",
        "--format",
        "json",
    ];
    // The fence rows cannot be deleted: the run measures, then cannot clean
    // up, says so and exits 1.
    db.exec(
        "CREATE TRIGGER fence.KeepEveryResource ON fence.Resource AFTER DELETE AS \
         BEGIN THROW 50000, N'fence.Resource keeps its rows in this test', 1; END;",
    )
    .await;
    let output = bench(&db.ado(), &short);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("the report on stdout");
    // Measured as asked: the baselines and the cycle workload's scenarios
    // only, five operations each, every ratio to a baseline it measured.
    let scenarios = report["scenarios"].as_array().expect("scenarios");
    let names = scenario_names(scenarios);
    assert_eq!(
        names,
        [
            "select1",
            "raw_update",
            "applock_cycle",
            "acquire",
            "publish",
            "release",
            "fenced_cycle"
        ],
        "{report}"
    );
    for scenario in scenarios {
        assert_eq!(scenario["operations"], 5, "{scenario}");
        assert_ratios(scenarios, scenario);
    }
    for baseline in ["select1", "raw_update", "applock_cycle"] {
        assert!(
            scenarios[3]["ratio_to"][baseline].as_f64().is_some(),
            "acquire has no ratio to {baseline}: {report}"
        );
    }
    assert!(
        stderr.contains("are left in fence.Resource") && stderr.contains("fence.Resource keeps its rows"),
        "{stderr}"
    );
    let keys = bench_rows(&db, "Resource").await;
    assert!(keys > 0, "exit 1 said keys were left, and none are");
    db.exec("DROP TRIGGER fence.KeepEveryResource;").await;

    // A new key cannot be made: the run stops with a bench error.
    db.exec(
        "CREATE TRIGGER fence.NoNewResource ON fence.Resource AFTER INSERT AS \
         BEGIN THROW 50000, N'no new fence.Resource rows in this test', 1; END;",
    )
    .await;
    let output = bench(&db.ado(), &short);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("a JSON document");
    assert_eq!(document["error"]["kind"], "bench", "{document}");
    assert!(
        document["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no new fence.Resource rows")),
        "{document}"
    );
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_with_telemetry_says_so_and_its_layer_and_recorder_saw_every_call() {
    let Some(db) = TestDatabase::deployed("bench_live").await else {
        return;
    };
    let short = [
        "--workers",
        "1",
        "--operations",
        "20",
        "--warmup",
        "0",
        "--workload",
        "cycle",
        "--format",
        "json",
    ];
    let run = |telemetry: bool| {
        let mut args = short.to_vec();
        if telemetry {
            args.push("--telemetry");
        }
        let output = bench(&db.ado(), &args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("the report on stdout");
        (report, stderr)
    };

    let (without, _) = run(false);
    assert_eq!(without["telemetry"], false, "{without}");
    assert!(without["telemetry_recorded"].is_null(), "{without}");

    let (report, stderr) = run(true);
    assert_eq!(report["telemetry"], true, "{report}");
    let scenarios = report["scenarios"].as_array().expect("scenarios");
    for scenario in scenarios {
        assert!(
            scenario["client_cpu_us_per_op"].as_f64().is_some_and(|cpu| cpu > 0.0),
            "{scenario}"
        );
    }
    // Every measured client call, at least, went through the layer (a span
    // closing is a line) and the recorder (a duration sample each).
    let calls: f64 = scenarios
        .iter()
        .filter(|s| ["acquire", "publish", "release", "fenced_cycle"].contains(&s["name"].as_str().unwrap()))
        .map(|s| s["operations"].as_f64().unwrap() * s["round_trips_per_op"].as_f64().unwrap())
        .sum();
    assert_eq!(calls, 100.0, "{report}");
    let recorded = &report["telemetry_recorded"];
    assert!(
        recorded["lines_formatted"].as_f64().is_some_and(|n| n >= calls),
        "{report}"
    );
    assert!(
        recorded["call_durations_recorded"].as_f64().is_some_and(|n| n >= calls),
        "{report}"
    );
    // The recorded lines go nowhere: the log on stderr keeps its level.
    assert!(!stderr.contains("EXECUTE"), "{stderr}");
    db.drop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_login_that_may_not_create_the_scratch_table_skips_the_table_baselines_and_says_so() {
    let Some(mut db) = TestDatabase::deployed("bench_live").await else {
        return;
    };
    // May run the fence and, where the engine does not chain ownership
    // (Babelfish), touch its tables; may not CREATE TABLE.
    let ado = db.login_in_role(None).await;
    let user = support::user_of(&ado);
    db.exec(&format!(
        "GRANT EXECUTE ON SCHEMA::fence_api TO [{user}];\n\
         GRANT SELECT, INSERT, UPDATE, DELETE ON SCHEMA::fence TO [{user}];"
    ))
    .await;
    let output = bench(
        &ado,
        &[
            "--workers",
            "1",
            "--operations",
            "3",
            "--warmup",
            "0",
            "--workload",
            "cycle",
            "--format",
            "json",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("raw_update and applock_cycle skipped: this login may not create the scratch table"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("the report on stdout");
    let scenarios = report["scenarios"].as_array().expect("scenarios");
    let names = scenario_names(scenarios);
    assert_eq!(
        names,
        ["select1", "acquire", "publish", "release", "fenced_cycle"],
        "{report}"
    );
    for scenario in scenarios {
        assert_eq!(scenario["operations"], 3, "{scenario}");
        // Only to the baseline it measured.
        assert_ratios(scenarios, scenario);
        let ratios = scenario["ratio_to"].as_object();
        assert!(ratios.is_none_or(|r| r.keys().all(|k| k == "select1")), "{scenario}");
    }
    let keys = bench_rows(&db, "Resource").await;
    assert_eq!(keys, 0, "the bench's keys are left behind");
    db.drop().await;
}
