//! Live tests of the deploy history (fence.Deployment) and the database
//! identity (fence.DatabaseIdentity): what `migrate` and the offline script
//! record, and what `status` and `check` say of them. Each makes its own
//! database on the engine named by FENCEPOST_TEST_MSSQL.

use crate::support;

use std::process::Output;

use fencepost::deploy::identity::{self, IdentityState};
use fencepost::deploy::{Sources, render_script};
use support::deploy::{run_carrying_on, shipped};
use support::{TestDatabase, skip};
use uuid::Uuid;

/// One fence.Deployment row.
#[derive(Debug)]
struct Row {
    login: String,
    version: String,
    migrations: i32,
    procedures: i32,
    identity: Option<Uuid>,
}

async fn deployments(db: &TestDatabase) -> Vec<Row> {
    db.query(
        "SELECT LoginName, FencepostVersion, MigrationsApplied, ProceduresApplied, DatabaseIdentity
           FROM fence.Deployment ORDER BY DeploymentId;",
    )
    .await
    .iter()
    .map(|r| Row {
        login: r.get::<&str, usize>(0).unwrap().to_owned(),
        version: r.get::<&str, usize>(1).unwrap().to_owned(),
        migrations: r.get::<i32, usize>(2).unwrap(),
        procedures: r.get::<i32, usize>(3).unwrap(),
        identity: r.get::<Uuid, usize>(4),
    })
    .collect()
}

/// The login the tests connect as, as the server names it.
async fn login(db: &TestDatabase) -> String {
    db.query("SELECT SUSER_SNAME();").await[0]
        .get::<&str, usize>(0)
        .unwrap()
        .to_owned()
}

/// What fence.DatabaseIdentity holds: the fork and who recorded it.
async fn recorded_identity(db: &TestDatabase) -> Option<(Uuid, String)> {
    db.query("SELECT RecoveryForkGuid, RecordedBy FROM fence.DatabaseIdentity;")
        .await
        .first()
        .map(|r| {
            (
                r.get::<Uuid, usize>(0).unwrap(),
                r.get::<&str, usize>(1).unwrap().to_owned(),
            )
        })
}

fn fencepost(db: &TestDatabase, args: &[&str]) -> Output {
    support::binary::fencepost_on(&db.ado(), args)
        .output()
        .expect("run fencepost")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(output)))
}

#[tokio::test]
async fn each_migrate_records_who_when_which_fencepost_and_what_it_applied() {
    let test = "each_migrate_records_who_when_which_fencepost_and_what_it_applied";
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    let sources = shipped();
    let first = db.migrate(&sources).await.expect("first deploy");
    let current = identity::read_current(&mut *db.session().await).await.unwrap();
    let login = login(&db).await;

    let rows = deployments(&db).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].login, login);
    assert_eq!(rows[0].version, env!("CARGO_PKG_VERSION"));
    assert_eq!(rows[0].migrations as usize, sources.migrations().len());
    assert_eq!(rows[0].procedures as usize, sources.procedures().len());
    assert_eq!(rows[0].identity, current);
    assert!(first.deployment_id.is_some(), "{first:?}");

    let second = db.migrate(&sources).await.expect("redeploy");
    let rows = deployments(&db).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!((rows[1].migrations, rows[1].procedures), (0, 0), "{rows:?}");
    assert!(second.deployment_id > first.deployment_id, "{second:?}");

    // The identity: recorded by the first deploy where the engine shows it.
    match current {
        Some(fork) => {
            assert_eq!(recorded_identity(&db).await, Some((fork, "deploy".to_owned())));
            assert_eq!(second.database_identity, Some(IdentityState::Matches));
        }
        None => {
            assert_eq!(recorded_identity(&db).await, None);
            assert_eq!(second.database_identity, Some(IdentityState::CannotVerify));
        }
    }
    assert!(second.warnings.is_empty(), "{:?}", second.warnings);
    db.drop().await;
}

#[tokio::test]
async fn a_deploy_that_fails_records_nothing() {
    let test = "a_deploy_that_fails_records_nothing";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let failing = shipped()
        .with_permission(
            "090_fails.sql",
            "THROW 50999, N'the last permission script fails', 1;\n",
        )
        .unwrap();
    let error = db.migrate(&failing).await.expect_err("the failing deploy");
    assert!(
        format!("{error:?}").contains("the last permission script fails"),
        "{error:?}"
    );
    assert_eq!(deployments(&db).await.len(), 1, "only the first deploy is recorded");
    db.drop().await;
}

#[tokio::test]
async fn status_shows_the_last_deployment_the_history_and_the_identity() {
    let test = "status_shows_the_last_deployment_the_history_and_the_identity";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    db.migrate(&shipped()).await.expect("redeploy");
    let login = login(&db).await;
    let current = identity::read_current(&mut *db.session().await).await.unwrap();

    // (Its exit status is Babelfish's SECURITY DEFINER's business too.)
    let out = stdout(&fencepost(&db, &["status", "--history", "5"]));
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        out.contains("last deployment: #2 at ")
            && out.contains(&format!(
                " by {login} with fencepost {version}: 0 migration(s), 0 procedure(s) applied (2 recorded)"
            )),
        "{out}"
    );
    assert!(
        out.contains("deployments (the last 2 of 2, most recent first)\n  #2 at"),
        "{out}"
    );
    let identity_line = match current {
        Some(_) => "database identity: recorded, matches (recorded by deploy at ",
        None => "database identity: cannot verify: the engine does not show a recovery fork\n",
    };
    assert!(out.contains(identity_line), "{out}");

    let document = json(&fencepost(&db, &["status", "--format", "json"]));
    assert_eq!(document["deployments"]["recorded"], 2, "{document:#}");
    assert_eq!(document["deployments"]["last"]["login"], login.as_str(), "{document:#}");
    assert_eq!(document["deployments"]["last"]["fencepost_version"], version);
    assert_eq!(document["deployments"]["last"]["migrations_applied"], 0);
    let at = document["deployments"]["last"]["deployed_at_utc"]
        .as_str()
        .unwrap_or_default();
    assert!(
        at.len() > 20 && at.as_bytes()[10] == b'T' && at.ends_with('Z'),
        "not RFC 3339: {at}"
    );
    assert!(document["deployments"].get("recent").is_none(), "{document:#}");
    let state = if current.is_some() { "matches" } else { "cannot_verify" };
    assert_eq!(document["database_identity"]["state"], state, "{document:#}");
    db.drop().await;
}

#[tokio::test]
async fn check_says_whether_it_can_verify_the_identity() {
    let test = "check_says_whether_it_can_verify_the_identity";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let current = identity::read_current(&mut *db.session().await).await.unwrap();
    let output = fencepost(&db, &["check", "--format", "json"]);
    let report = json(&output);
    let unverified: Vec<&serde_json::Value> = report["cannot_verify"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["rule"] == "FP019")
        .collect();
    match current {
        None => {
            assert_eq!(unverified.len(), 1, "{report:#}");
            assert_eq!(unverified[0]["reason"], "the engine does not show a recovery fork");
            // A check that cannot verify something never exits 0.
            assert_ne!(output.status.code(), Some(0), "{report:#}");
        }
        Some(_) => assert!(unverified.is_empty(), "{report:#}"),
    }
    let text = stdout(&fencepost(&db, &["check"]));
    let line = text
        .lines()
        .find(|l| l.starts_with("FP019"))
        .unwrap_or_default()
        .to_lowercase();
    let expected = if current.is_some() { "pass" } else { "cannot verify" };
    assert!(line.contains(expected), "{text}");
    db.drop().await;
}

#[tokio::test]
async fn a_changed_identity_is_reported_by_status_check_and_migrate_and_never_overwritten() {
    let test = "a_changed_identity_is_reported_by_status_check_and_migrate_and_never_overwritten";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    if identity::read_current(&mut *db.session().await)
        .await
        .unwrap()
        .is_none()
    {
        // The Changed path is the pure comparison's, covered offline by
        // deploy::identity's unit tests and FP019's rule tests.
        skip(
            test,
            "the engine shows no recovery fork (sys.database_recovery_status has no row), so no identity can differ",
        );
        db.drop().await;
        return;
    }
    let made_up = Uuid::new_v4();
    db.exec(&format!(
        "UPDATE fence.DatabaseIdentity SET RecoveryForkGuid = '{made_up}' WHERE Singleton = 1;"
    ))
    .await;

    let status = fencepost(&db, &["status"]);
    let out = stdout(&status);
    assert_eq!(status.status.code(), Some(1), "{out}");
    assert!(out.contains("database identity: restored or failed over"), "{out}");
    assert!(out.contains("run `fencepost lease recover`"), "{out}");

    let check = fencepost(&db, &["check", "--format", "json"]);
    assert_eq!(check.status.code(), Some(1), "{}", stdout(&check));
    let report = json(&check);
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["rule"] == "FP019"),
        "{report:#}"
    );

    let migrate = fencepost(&db, &["migrate", "--format", "json"]);
    assert_eq!(
        migrate.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&migrate.stderr)
    );
    let report = json(&migrate);
    assert_eq!(report["database_identity"]["state"], "changed", "{report:#}");
    assert_eq!(
        report["warnings"][0],
        "the database was restored or failed over since its identity was recorded: run `fencepost lease recover`"
    );
    assert_eq!(recorded_identity(&db).await.map(|(fork, _)| fork), Some(made_up));
    db.drop().await;
}

#[tokio::test]
async fn the_offline_script_run_twice_deploys_a_fresh_database_records_both_runs_and_migrate_finds_it_current() {
    let test = "the_offline_script_run_twice_deploys_a_fresh_database_records_both_runs_and_migrate_finds_it_current";
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    let sources: Sources = shipped();
    let script = render_script(&sources);
    for pass in 0..2 {
        let errors = run_carrying_on(&db, &script).await;
        assert!(errors.is_empty(), "script pass {pass}: {errors:#?}");
        let plan = fencepost::deploy::status(&mut *db.session().await, &sources)
            .await
            .unwrap();
        assert!(plan.is_current(), "after script pass {pass}: {plan:?}");
    }

    let rows = deployments(&db).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].migrations as usize, sources.migrations().len(), "{rows:?}");
    assert_eq!(rows[1].migrations, 0, "{rows:?}");
    // The script alters every procedure on every run.
    assert_eq!(rows[1].procedures as usize, sources.procedures().len(), "{rows:?}");
    assert_eq!(rows[0].login, login(&db).await);
    assert_eq!(rows[0].version, env!("CARGO_PKG_VERSION"));

    let report = db.migrate(&sources).await.unwrap();
    assert!(report.changes.is_empty(), "{:?}", report.changes);
    db.drop().await;
}
