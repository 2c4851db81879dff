//! Live deploy tests: each makes its own database on the engine named by
//! FENCEPOST_TEST_MSSQL and deploys with the real runner.

use crate::support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use fencepost::deploy::{Change, DeployError, MigrationState, ProcedureState, Sources};
use support::TestDatabase;
use support::deploy::shipped_versions_and;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Runs the real binary against `ado`, as a pipeline would.
async fn fencepost_cli(args: &[&str], ado: &str) -> std::process::Output {
    support::binary::tokio(support::binary::fencepost_on(ado, args))
        .output()
        .await
        .expect("run fencepost")
}

fn shipped() -> Sources {
    Sources::embedded().expect("embedded sources")
}

/// Names of the objects of a kind ('U' tables, 'P' procedures) in the fence schemas.
async fn objects(db: &TestDatabase, kind: &str) -> Vec<String> {
    let rows = db
        .query(&format!(
            "SELECT s.name + N'.' + o.name FROM sys.objects AS o JOIN sys.schemas AS s ON s.schema_id = o.schema_id
              WHERE o.type = '{kind}' AND s.name IN (N'fence', N'fence_api', N'fence_admin') ORDER BY 1;"
        ))
        .await;
    rows.iter()
        .map(|r| r.get::<&str, usize>(0).unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_fresh_deploy_creates_every_object_and_a_second_deploy_changes_nothing() {
    let Some(db) = TestDatabase::new("a_fresh_deploy_creates_every_object_and_a_second_deploy_changes_nothing").await
    else {
        return;
    };
    let sources = shipped();
    let first = db.migrate(&sources).await.expect("first deploy");
    assert_eq!(
        first.changes.len(),
        sources.migrations().len() + sources.procedures().len(),
        "{:?}",
        first.changes
    );

    let tables = objects(&db, "U").await;
    for table in [
        "fence.Resource",
        "fence.PublishedOperation",
        "fence.DeployedProcedure",
        "fence.SchemaHistory",
    ] {
        assert!(
            tables.iter().any(|t| t.eq_ignore_ascii_case(table)),
            "{table} missing from {tables:?}"
        );
    }
    let procedures = objects(&db, "P").await;
    for p in sources.procedures() {
        assert!(
            procedures.iter().any(|q| q.eq_ignore_ascii_case(&p.qualified_name())),
            "{} missing",
            p.qualified_name()
        );
    }
    let roles = db
        .query(
            "SELECT COUNT(*) FROM sys.database_principals
              WHERE type = 'R' AND name IN (N'fence_service', N'fence_reader', N'fence_operator');",
        )
        .await;
    assert_eq!(roles[0].get::<i32, usize>(0), Some(3));

    let second = db.migrate(&sources).await.expect("second deploy");
    assert!(second.changes.is_empty(), "a redeploy changed {:?}", second.changes);
    assert!(second.plan.is_current());
    db.drop().await;
}

#[tokio::test]
async fn a_changed_procedure_is_altered_alone_and_keeps_its_grants() {
    let Some(mut db) = TestDatabase::deployed("a_changed_procedure_is_altered_alone_and_keeps_its_grants").await else {
        return;
    };
    let service = db.login_in_role(Some("fence_service")).await;
    let inspect = shipped()
        .procedures()
        .iter()
        .find(|p| p.qualified_name() == "fence_api.Inspect")
        .unwrap()
        .clone();
    let changed_text = inspect.text().replacen("SET NOCOUNT ON;", "SET NOCOUNT ON; -- (v2)", 1);
    assert_ne!(changed_text, inspect.text());
    // No permission scripts in this source set: a grant can only survive the ALTER itself.
    let sources = shipped()
        .with_procedure("fence_api.Inspect.sql", &changed_text)
        .unwrap()
        .without_permissions();

    let report = db.migrate(&sources).await.expect("redeploy");
    assert_eq!(
        report.changes,
        vec![Change::Procedure {
            name: "fence_api.Inspect".into(),
            was: ProcedureState::Changed
        }]
    );
    let definition = db
        .query("SELECT OBJECT_DEFINITION(OBJECT_ID(N'fence_api.Inspect'));")
        .await;
    assert!(definition[0].get::<&str, usize>(0).unwrap().contains("(v2)"));

    let can_execute = support::has_execute(&service, "fence_api.Inspect").await;
    assert_eq!(
        can_execute,
        Some(true),
        "fence_service lost EXECUTE on the altered procedure"
    );
    // The same question for a login outside the role, so the check above can fail.
    let outsider = db.login_in_role(None).await;
    assert_eq!(support::has_execute(&outsider, "fence_api.Inspect").await, Some(false));
    db.drop().await;
}

#[tokio::test]
async fn a_migration_whose_second_batch_fails_leaves_nothing_behind() {
    let Some(db) = TestDatabase::deployed("a_migration_whose_second_batch_fails_leaves_nothing_behind").await else {
        return;
    };
    let broken = shipped()
        .with_migration(
            "V90__broken.sql",
            // The result set before the THROW is what a driver that stops
            // reading after the first result would see, missing the error.
            "CREATE TABLE fence.HalfDone (Id int NOT NULL);\nGO\nINSERT INTO fence.HalfDone (Id) VALUES (1);\n\
             SELECT 1 AS FirstResult;\nTHROW 50999, N'the second batch fails', 1;\n",
        )
        .unwrap();
    let error = db.migrate(&broken).await.expect_err("the broken migration must fail");
    match &error {
        DeployError::BatchFailed {
            file,
            batch,
            line,
            message,
        } => {
            assert_eq!(file, "migrations/V90__broken.sql");
            assert_eq!(*batch, 2);
            assert_eq!(*line, 5, "THROW is on line 5 of the file");
            assert!(message.contains("the second batch fails"), "{message}");
        }
        other => panic!("expected a batch failure, got {other:?}"),
    }
    assert!(
        error.to_string().contains("migrations/V90__broken.sql, batch 2"),
        "{error}"
    );

    assert!(
        !objects(&db, "U")
            .await
            .iter()
            .any(|t| t.eq_ignore_ascii_case("fence.HalfDone"))
    );
    let history = db
        .query("SELECT version FROM fence.SchemaHistory ORDER BY version;")
        .await;
    let versions: Vec<i32> = history.iter().map(|r| r.get::<i32, usize>(0).unwrap()).collect();
    assert_eq!(versions, shipped_versions_and(&[]));
    let status = fencepost::deploy::status(&mut *db.session().await, &broken)
        .await
        .unwrap();
    assert_eq!(
        status.migrations.iter().find(|m| m.version == 90).unwrap().state,
        MigrationState::Pending
    );
    db.drop().await;
}

/// How long the concurrent-deploy test watches the deploys wait.
const LOCK_WAIT_OBSERVED: Duration = Duration::from_secs(3);

/// How much of that watch a deploy may spend before its server-side timer
/// starts: the lock wait is timed on the server, around sp_getapplock, after
/// its batch has compiled, and a fresh Babelfish session's first batch took
/// over half a second under a full suite's load.
const BEFORE_THE_LOCK_REQUEST: Duration = Duration::from_secs(2);

/// How long a deploy may take to connect and say it is taking the deploy lock.
const TAKING_THE_LOCK_WITHIN: Duration = Duration::from_secs(60);

#[tokio::test]
async fn two_deploys_started_together_both_succeed_and_apply_each_migration_once() {
    let Some(db) = TestDatabase::new("two_deploys_started_together_both_succeed_and_apply_each_migration_once").await
    else {
        return;
    };
    // Hold the deploy lock so both processes queue behind it; release it
    // only once both have said they are taking it, and have been seen to
    // wait for it.
    let mut holder = db.connect().await;
    support::hold_deploy_lock(&mut holder).await;
    let mut children = Vec::new();
    for _ in 0..2 {
        let mut child = support::binary::tokio(support::binary::fencepost_on(
            &db.ado(),
            ["migrate", "--lock-timeout", "120", "--format", "json"],
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start fencepost migrate");
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let said = tokio::time::timeout(TAKING_THE_LOCK_WITHIN, async {
            while let Some(line) = stderr.next_line().await.unwrap() {
                if line.contains("taking the deploy lock") {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or_else(|_| {
            panic!("a deploy did not say it was taking the deploy lock within {TAKING_THE_LOCK_WITHIN:?}")
        });
        assert!(said, "a deploy ended without saying it was taking the deploy lock");
        children.push((child, stderr, Instant::now()));
    }
    // Long enough for either to have connected, asked for the lock and,
    // had it not waited, created the fence schema and its journal.
    tokio::time::sleep(LOCK_WAIT_OBSERVED).await;
    for (child, _, _) in &mut children {
        assert!(
            child.try_wait().unwrap().is_none(),
            "a deploy finished while another session held the deploy lock"
        );
    }
    let schemas = db
        .query("SELECT COUNT(*) FROM sys.schemas WHERE name LIKE N'fence%';")
        .await;
    assert_eq!(
        schemas[0].get::<i32, usize>(0),
        Some(0),
        "a deploy changed the database while another session held the deploy lock"
    );
    support::release_deploy_lock(&mut holder).await;
    drop(holder);

    let mut applied = 0;
    for (child, mut stderr, said_at) in children {
        let output = child.wait_with_output().await.unwrap();
        let said_to_exit = said_at.elapsed();
        let mut rest = String::new();
        while let Some(line) = stderr.next_line().await.unwrap() {
            rest += &line;
        }
        assert!(output.status.success(), "a deploy failed: {rest}");
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        // What each says it waited agrees with what the test saw.
        let waited = report["lock_wait_seconds"].as_f64().unwrap();
        assert!(
            waited >= (LOCK_WAIT_OBSERVED - BEFORE_THE_LOCK_REQUEST).as_secs_f64(),
            "the deploy says it waited {waited}s for the lock, held {LOCK_WAIT_OBSERVED:?} after it asked"
        );
        assert!(
            waited <= said_to_exit.as_secs_f64(),
            "the deploy says it waited {waited}s for the lock, and ended {said_to_exit:?} after asking"
        );
        applied += report["changes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "migration")
            .count();
    }
    assert_eq!(
        applied,
        shipped().migrations().len(),
        "each migration is applied by exactly one deploy"
    );
    let history = db
        .query("SELECT COUNT(*), COUNT(DISTINCT version) FROM fence.SchemaHistory;")
        .await;
    assert_eq!(
        history[0].get::<i32, usize>(0),
        Some(shipped().migrations().len() as i32)
    );
    assert_eq!(
        history[0].get::<i32, usize>(1),
        Some(shipped().migrations().len() as i32)
    );
    db.drop().await;
}

#[tokio::test]
async fn a_procedure_altered_by_hand_stops_migrate_until_drift_may_be_overwritten() {
    let Some(db) =
        TestDatabase::deployed("a_procedure_altered_by_hand_stops_migrate_until_drift_may_be_overwritten").await
    else {
        return;
    };
    db.exec("ALTER PROCEDURE fence_api.Inspect @ResourceKey nvarchar(4000) AS SELECT N'Found by hand' AS Outcome;")
        .await;

    let output = fencepost_cli(&["status", "--format", "json"], &db.ado()).await;
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut states: Vec<(String, String)> = status["procedures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_string(),
                p["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    states.sort();
    // Every shipped procedure is listed, once, and only Inspect has drifted.
    let mut expected: Vec<(String, String)> = shipped()
        .procedures()
        .iter()
        .map(|p| {
            let name = p.qualified_name();
            let state = if name == "fence_api.Inspect" {
                "drifted"
            } else {
                "current"
            };
            (name, state.to_string())
        })
        .collect();
    expected.sort();
    assert_eq!(states, expected);

    // The diff shows the hand-made line against the shipped text.
    let diff = fencepost_cli(&["status", "--diff"], &db.ado()).await;
    let text = String::from_utf8_lossy(&diff.stdout);
    assert!(text.contains("--- shipped procedures/fence_api.Inspect.sql"), "{text}");
    assert!(text.contains("+++ server fence_api.Inspect"), "{text}");
    assert!(
        text.contains("+ALTER PROCEDURE fence_api.Inspect @ResourceKey nvarchar(4000) AS SELECT N'Found by hand'"),
        "{text}"
    );
    assert!(text.contains("-    SET NOCOUNT ON;"), "{text}");
    // And in JSON, under the procedure's name.
    let diff = fencepost_cli(&["status", "--diff", "--format", "json"], &db.ado()).await;
    let document: serde_json::Value = serde_json::from_slice(&diff.stdout).unwrap();
    let inspect = document["diffs"]["fence_api.Inspect"].as_str().unwrap_or_default();
    assert!(inspect.contains("Found by hand"), "{document}");
    assert_eq!(document["diffs"].as_object().map(|d| d.len()), Some(1), "{document}");

    // A dry run says a deploy would stop (2), and a deploy stops before it
    // changes anything: the migration it has pending is not applied.
    let dir = tempfile::tempdir().unwrap();
    let pending = shipped()
        .with_migration(
            "V102__pending_behind_drift.sql",
            "CREATE TABLE fence.PendingBehindDrift (Id int NOT NULL);\n",
        )
        .unwrap();
    support::deploy::write_sources(dir.path(), &pending);
    let source_dir = dir.path().to_str().unwrap();
    let dry = fencepost_cli(&["migrate", "--dry-run"], &db.ado()).await;
    assert_eq!(dry.status.code(), Some(2), "{}", String::from_utf8_lossy(&dry.stdout));
    let stopped = fencepost_cli(&["migrate", "--source-dir", source_dir], &db.ado()).await;
    assert_eq!(stopped.status.code(), Some(2));
    let err = String::from_utf8_lossy(&stopped.stderr);
    assert!(
        err.contains("fence_api.Inspect") && err.contains("--overwrite-drift"),
        "{err}"
    );
    assert_eq!(
        support::deploy::history(&db).await,
        shipped_versions_and(&[]),
        "the stopped deploy recorded its pending migration: {err}"
    );
    assert!(
        !support::deploy::exists(&db, "fence.PendingBehindDrift").await,
        "the stopped deploy ran its pending migration: {err}"
    );
    // status reads the same folder and shows the migration still pending.
    let status = fencepost_cli(&["status", "--source-dir", source_dir, "--format", "json"], &db.ado()).await;
    assert_eq!(status.status.code(), Some(1));
    let document: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let held_back = document["migrations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m.to_string().contains("pending_behind_drift"))
        .unwrap_or_else(|| panic!("status --source-dir does not list the folder's migration: {document}"));
    assert_eq!(held_back["state"], "pending", "{held_back}");
    let still = fencepost::deploy::status(&mut *db.session().await, &shipped())
        .await
        .unwrap();
    assert!(
        still
            .procedures
            .iter()
            .any(|p| p.name == "fence_api.Inspect" && p.state == ProcedureState::Drifted)
    );

    // Told to overwrite, the deploy restores the shipped text.
    let restored = fencepost_cli(&["migrate", "--overwrite-drift", "--format", "json"], &db.ado()).await;
    assert_eq!(
        restored.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&restored.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&restored.stdout).unwrap();
    assert_eq!(report["changes"][0]["name"], "fence_api.Inspect", "{report}");
    assert!(
        fencepost::deploy::status(&mut *db.session().await, &shipped())
            .await
            .unwrap()
            .is_current()
    );
    // With nothing drifted, the same sources apply the migration the stopped
    // run held back: it was pending, and would have run.
    let applied = fencepost_cli(&["migrate", "--source-dir", source_dir], &db.ado()).await;
    assert_eq!(
        applied.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    assert_eq!(support::deploy::history(&db).await, shipped_versions_and(&[102]));
    assert!(support::deploy::exists(&db, "fence.PendingBehindDrift").await);
    db.drop().await;
}

#[tokio::test]
async fn a_dry_run_shows_the_plan_changes_nothing_and_exits_1_until_migrate_says_what_it_changed_then_0() {
    let test = "a_dry_run_shows_the_plan_changes_nothing_and_exits_1_until_migrate_says_what_it_changed_then_0";
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    let output = fencepost_cli(&["migrate", "--dry-run"], &db.ado()).await;
    let out = String::from_utf8_lossy(&output.stdout);
    // Changes are pending.
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(out.contains("would apply migration V1__lease_tables"), "{out}");
    // What each pending migration costs a live database, by edition.
    assert!(
        out.contains("would apply migration V4__row_lock_counter: adds a NOT NULL column")
            && out.contains("on Standard, Web and Express every row is rewritten"),
        "{out}"
    );
    assert!(out.contains("would deploy procedure fence_api.Publish"), "{out}");
    let pending = fencepost_cli(&["migrate", "--dry-run", "--format", "json"], &db.ado()).await;
    assert_eq!(
        pending.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&pending.stderr)
    );
    let plan: serde_json::Value = serde_json::from_slice(&pending.stdout).unwrap();
    assert_eq!(plan["would_stop"], serde_json::Value::Null, "{plan}");
    let v2 = plan["plan"]["migrations"]
        .as_array()
        .and_then(|all| all.iter().find(|m| m["name"] == "V2__exact_resource_keys"))
        .unwrap_or_else(|| panic!("{plan}"));
    assert!(v2["cost"].as_str().unwrap_or_default().contains("every row"), "{plan}");
    let schemas = db
        .query("SELECT COUNT(*) FROM sys.schemas WHERE name LIKE N'fence%';")
        .await;
    assert_eq!(schemas[0].get::<i32, usize>(0), Some(0), "a dry run created a schema");

    // migrate says what it changed, and a second run that nothing changed.
    let first = fencepost_cli(&["migrate"], &db.ado()).await;
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let out = String::from_utf8_lossy(&first.stdout);
    assert!(out.starts_with("deployed to "), "{out}");
    assert!(out.contains("\n  applied migration V1__lease_tables\n"), "{out}");
    assert!(out.contains("\n  deployed procedure fence_api.Publish (was "), "{out}");
    let second = fencepost_cli(&["migrate"], &db.ado()).await;
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let out = String::from_utf8_lossy(&second.stdout);
    assert!(out.starts_with("nothing changed on "), "{out}");
    assert!(
        out.contains(&format!(
            ": {} migration(s) applied, {} procedure(s) current\n",
            shipped().migrations().len(),
            shipped().procedures().len()
        )),
        "{out}"
    );
    let current = fencepost_cli(&["migrate", "--dry-run"], &db.ado()).await;
    assert_eq!(
        current.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&current.stdout)
    );
    db.drop().await;
}

#[tokio::test]
async fn a_wrong_password_and_a_missing_database_get_one_line_each_and_exit_status_2() {
    let Some(server) =
        support::server_or_skip("a_wrong_password_and_a_missing_database_get_one_line_each_and_exit_status_2")
    else {
        return;
    };
    let wrong_password = support::replace_ado_value(&server, "password", "Not-The-Password#9");
    let missing_db = format!("{};Database=fp_no_such_database", server.trim_end_matches(';'));
    for (ado, expected) in [
        (wrong_password, "login failed for user"),
        (missing_db, "cannot open database 'fp_no_such_database'"),
    ] {
        let output = fencepost_cli(&["status"], &ado).await;
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(expected), "{err}");
        assert!(!err.contains("Not-The-Password#9"), "the password leaked: {err}");
    }
}

#[tokio::test]
async fn a_certificate_that_does_not_match_is_a_one_line_tls_error() {
    let Some(server) = support::server_or_skip("a_certificate_that_does_not_match_is_a_one_line_tls_error") else {
        return;
    };
    // Validate the certificate against a name it cannot carry, whatever the
    // server: the handshake must fail and say it was TLS.
    let strict = support::replace_ado_value(&server, "trustservercertificate", "false");
    let strict = support::replace_ado_value(&strict, "encrypt", "true");
    let mismatched = support::replace_ado_value(&strict, "hostnameincertificate", "no-such-name.invalid");
    let output = fencepost_cli(&["status"], &mismatched).await;
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("TLS with") && err.contains("TrustServerCertificate"),
        "{err}"
    );
}

#[tokio::test]
async fn status_shows_the_deployed_contract_version() {
    let Some(db) = TestDatabase::deployed("status_shows_the_deployed_contract_version").await else {
        return;
    };
    let version = fencepost::client::CONTRACT_VERSION;
    let output = fencepost_cli(&["status", "--format", "json"], &db.ado()).await;
    let status: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        status["contract_version"],
        format!("{}.{}", version.major, version.minor),
        "{status}"
    );
    let output = fencepost_cli(&["status"], &db.ado()).await;
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains(&format!(
            "contract {version} deployed (this fencepost speaks {version})"
        )),
        "{text}"
    );
    // Without the procedure, status says so rather than guessing.
    db.exec("DROP PROCEDURE fence_api.ContractVersion;").await;
    let output = fencepost_cli(&["status", "--format", "json"], &db.ado()).await;
    let status: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(status["contract_version"].is_null(), "{status}");
    db.drop().await;
}

/// What reaches stderr: nothing from a command that went well; `-v`/`-vv`
/// raise only fencepost's own level; `FENCEPOST_LOG` takes any filter, the
/// driver's too, and changes nothing on stdout.
#[tokio::test]
async fn log_levels_and_fencepost_log_choose_what_reaches_stderr() {
    let test = "log_levels_and_fencepost_log_choose_what_reaches_stderr";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    const DRIVER_LINE: &str = "Handshake stage: login complete";
    let plain = fencepost_cli(&["status"], &db.ado()).await;
    assert_eq!(support::binary::stderr(&plain), "", "a status that went well logged");
    let verbose = fencepost_cli(&["-vv", "status"], &db.ado()).await;
    assert!(
        !support::binary::stderr(&verbose).contains(DRIVER_LINE),
        "-vv let the driver's debug lines through"
    );
    let mut filtered = support::binary::fencepost_on(&db.ado(), ["status"]);
    filtered.env("FENCEPOST_LOG", "tiberius=debug");
    let filtered = support::binary::tokio(filtered).output().await.expect("run fencepost");
    let log = support::binary::stderr(&filtered);
    assert!(log.contains(DRIVER_LINE), "FENCEPOST_LOG=tiberius=debug: {log}");
    assert_eq!(filtered.status.code(), plain.status.code());
    assert_eq!(
        support::binary::stdout(&filtered),
        support::binary::stdout(&plain),
        "the log filter changed stdout"
    );
    db.drop().await;
}

/// A deployer that may create roles but not make dbo their owner (in
/// db_ddladmin and db_securityadmin, not db_owner) is stopped before anything
/// runs, told which right it lacks, instead of failing at the permission
/// scripts after the migrations and procedures committed.
#[tokio::test]
async fn a_deployer_that_cannot_give_the_fence_roles_to_dbo_is_told_before_anything_runs() {
    let test = "a_deployer_that_cannot_give_the_fence_roles_to_dbo_is_told_before_anything_runs";
    let Some(mut db) = TestDatabase::new(test).await else {
        return;
    };
    if db.is_babelfish().await {
        // Babelfish refuses CREATE ROLE ... AUTHORIZATION and shows no role
        // owner, so it creates the roles plainly and there is nothing to check.
        support::skip(
            test,
            "Babelfish shows no role owner and creates the fence roles without AUTHORIZATION",
        );
        db.drop().await;
        return;
    }
    let deployer = db.login_in_role(Some("db_ddladmin")).await;
    let user = support::ado_value(&deployer, "user id").expect("a user");
    db.exec(&format!("ALTER ROLE db_securityadmin ADD MEMBER [{user}];"))
        .await;

    let status = fencepost_cli(&["status"], &deployer).await;
    let said = String::from_utf8_lossy(&status.stdout);
    assert!(
        said.contains(&format!("IMPERSONATE ON USER::dbo TO [{user}]")),
        "{said}"
    );
    let migrate = fencepost_cli(&["migrate"], &deployer).await;
    assert_eq!(
        migrate.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&migrate.stdout)
    );
    let schemas = db
        .query("SELECT COUNT(*) FROM sys.schemas WHERE name LIKE N'fence%';")
        .await;
    assert_eq!(
        schemas[0].get::<i32, usize>(0),
        Some(0),
        "the stopped deploy created a schema"
    );
    db.drop().await;
}
