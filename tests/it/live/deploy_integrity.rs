//! Live tests of what a deploy records: never work it did not finish, never
//! success for nothing. Each makes its own database on the engine named by
//! FENCEPOST_TEST_MSSQL and deploys with the real runner.

use crate::support;

use fencepost::deploy::{Blocker, Change, DeployError, ProcedureState, Sources};
use support::TestDatabase;
use support::deploy::{exists, history, shipped, shipped_versions_and, write_sources};

/// Deploys `sources` plus the migration `V102__<name>.sql` holding `text`, and
/// returns the error the deploy must end with.
async fn deploy_failing_migration(db: &TestDatabase, name: &str, text: &str) -> DeployError {
    let sources = shipped().with_migration(&format!("V102__{name}.sql"), text).unwrap();
    db.migrate(&sources).await.expect_err("the deploy must fail")
}

fn assert_transaction_misuse(error: &DeployError, file: &str, expected_batch: usize, problem_part: &str) {
    match error {
        DeployError::TransactionMisuse {
            file: f,
            batch,
            problem,
            ..
        } => {
            assert_eq!(f, file);
            assert_eq!(*batch, expected_batch, "{error}");
            assert!(problem.contains(problem_part), "{error}");
        }
        other => panic!("expected a transaction misuse, got {other:?}: {other}"),
    }
}

#[tokio::test]
async fn a_migration_that_rolls_back_in_a_catch_without_rethrowing_is_not_recorded() {
    let test = "a_migration_that_rolls_back_in_a_catch_without_rethrowing_is_not_recorded";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let error = deploy_failing_migration(
        &db,
        "swallowed",
        "CREATE TABLE fence.BeforeCatch (Id int NOT NULL);
GO
BEGIN TRY
    INSERT INTO fence.BeforeCatch (Id) VALUES (1 / 0);
END TRY
BEGIN CATCH
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
END CATCH;
GO
CREATE TABLE fence.AfterCatch (Id int NOT NULL);
",
    )
    .await;
    assert_transaction_misuse(&error, "migrations/V102__swallowed.sql", 2, "@@TRANCOUNT 0");
    assert_eq!(
        history(&db).await,
        shipped_versions_and(&[]),
        "the half-done migration was recorded"
    );
    assert!(
        !exists(&db, "fence.AfterCatch").await,
        "a batch after the rollback ran outside any transaction"
    );
    assert!(!exists(&db, "fence.BeforeCatch").await);
    db.drop().await;
}

#[tokio::test]
async fn a_migration_that_leaves_a_transaction_open_is_rolled_back_and_not_recorded() {
    let test = "a_migration_that_leaves_a_transaction_open_is_rolled_back_and_not_recorded";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let error = deploy_failing_migration(
        &db,
        "open",
        "BEGIN TRANSACTION;\nCREATE TABLE fence.LeftOpen (Id int NOT NULL);\n",
    )
    .await;
    assert_transaction_misuse(
        &error,
        "migrations/V102__open.sql",
        1,
        "@@TRANCOUNT 3, the runner's is 2",
    );
    assert_eq!(history(&db).await, shipped_versions_and(&[]));
    assert!(!exists(&db, "fence.LeftOpen").await);
    db.drop().await;
}

#[tokio::test]
async fn a_migration_that_turns_off_implicit_transactions_is_not_recorded() {
    let test = "a_migration_that_turns_off_implicit_transactions_is_not_recorded";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    // The runner keeps them on during a migration, so that nothing after a
    // stray ROLLBACK autocommits; a batch that turns them off is refused.
    let error = deploy_failing_migration(
        &db,
        "implicit",
        "SET IMPLICIT_TRANSACTIONS OFF;\nGO\nCREATE TABLE fence.Implicit (Id int NOT NULL);\n",
    )
    .await;
    assert_transaction_misuse(&error, "migrations/V102__implicit.sql", 1, "IMPLICIT_TRANSACTIONS off");
    assert_eq!(history(&db).await, shipped_versions_and(&[]));
    assert!(!exists(&db, "fence.Implicit").await);
    db.drop().await;
}

#[tokio::test]
async fn a_permission_script_that_leaves_a_transaction_open_fails_the_deploy() {
    let test = "a_permission_script_that_leaves_a_transaction_open_fails_the_deploy";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let sources = shipped()
        .with_permission(
            "990_open.sql",
            "BEGIN TRANSACTION;\nCREATE TABLE dbo.InsideOpen (Id int NOT NULL);\n",
        )
        .unwrap();
    let error = db.migrate(&sources).await.expect_err("the deploy must fail");
    assert!(
        matches!(error, DeployError::TransactionLeftOpen { open: 1 }),
        "{error:?}"
    );
    assert!(!exists(&db, "dbo.InsideOpen").await);
    db.drop().await;
}

#[tokio::test]
async fn two_migrations_with_the_same_text_are_each_reported_under_their_own_name() {
    let test = "two_migrations_with_the_same_text_are_each_reported_under_their_own_name";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let same = "SELECT 1 AS Nothing;\n";
    let sources = shipped()
        .with_migration("V102__first.sql", same)
        .unwrap()
        .with_migration("V103__second.sql", same)
        .unwrap();
    let report = db.migrate(&sources).await.expect("deploy");
    assert_eq!(
        report.changes,
        [
            Change::Migration {
                name: "V102__first".into()
            },
            Change::Migration {
                name: "V103__second".into()
            }
        ]
    );
    assert_eq!(history(&db).await, shipped_versions_and(&[102, 103]));
    db.drop().await;
}

#[tokio::test]
async fn a_migration_that_drops_a_shipped_procedure_has_it_deployed_again() {
    let test = "a_migration_that_drops_a_shipped_procedure_has_it_deployed_again";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    // As a migration that changes a type the procedure depends on would.
    let sources = shipped()
        .with_migration("V102__drop_inspect.sql", "DROP PROCEDURE fence_api.Inspect;\n")
        .unwrap();
    let report = db.migrate(&sources).await.expect("deploy");
    assert!(
        report.changes.contains(&Change::Procedure {
            name: "fence_api.Inspect".into(),
            was: ProcedureState::Missing
        }),
        "{:?}",
        report.changes
    );
    assert!(
        exists(&db, "fence_api.Inspect").await,
        "the dropped procedure stayed missing"
    );
    let status = fencepost::deploy::status(&mut *db.session().await, &sources)
        .await
        .unwrap();
    assert!(status.is_current(), "{status:?}");
    db.drop().await;
}

/// A source set that adds a procedure and a permission script that fails.
fn failing_after_a_new_procedure() -> Sources {
    shipped()
        .with_procedure(
            "fence_api.Added.sql",
            "CREATE PROCEDURE fence_api.Added AS SELECT N'Found' AS Outcome;",
        )
        .unwrap()
        .with_permission("990_fails.sql", "THROW 50999, N'the permission script fails', 1;\n")
        .unwrap()
}

#[tokio::test]
async fn a_permission_script_failing_after_procedures_were_deployed_says_what_is_committed() {
    let test = "a_permission_script_failing_after_procedures_were_deployed_says_what_is_committed";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let error = db
        .migrate(&failing_after_a_new_procedure())
        .await
        .expect_err("the deploy must fail");
    let DeployError::Incomplete { committed, cause } = &error else {
        panic!("expected an incomplete deploy, got {error:?}");
    };
    assert_eq!(
        committed.changes,
        [Change::Procedure {
            name: "fence_api.Added".into(),
            was: ProcedureState::Missing
        }]
    );
    assert_eq!(committed.without_grants, ["fence_api.Added"]);
    assert_eq!(committed.permissions_applied.len(), shipped().permissions().len());
    assert!(
        matches!(cause.as_ref(), DeployError::BatchFailed { file, .. } if file == "permissions/990_fails.sql"),
        "{cause:?}"
    );
    assert!(exists(&db, "fence_api.Added").await, "the committed procedure is there");
    let message = format!("{:#}", anyhow::Error::from(error));
    assert!(
        message.contains("committed and kept: procedure fence_api.Added")
            && message.contains("without their grants until the permission scripts run: fence_api.Added")
            && message.contains("the permission script fails"),
        "{message}"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_failed_deploy_with_json_output_reports_what_it_committed() {
    let test = "a_failed_deploy_with_json_output_reports_what_it_committed";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    write_sources(dir.path(), &failing_after_a_new_procedure());
    let output = support::binary::tokio(support::binary::fencepost_on(
        &db.ado(),
        [
            "migrate",
            "--format",
            "json",
            "--source-dir",
            dir.path().to_str().unwrap(),
        ],
    ))
    .output()
    .await
    .expect("run fencepost");
    assert_eq!(output.status.code(), Some(2));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("a JSON report on stdout");
    assert_eq!(report["completed"], false);
    assert_eq!(report["committed"]["changes"][0]["name"], "fence_api.Added");
    assert_eq!(report["committed"]["without_grants"][0], "fence_api.Added");
    assert!(
        report["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the permission script fails"),
        "{report}"
    );
    db.drop().await;
}

#[tokio::test]
async fn an_out_of_order_pending_migration_is_refused_by_name_before_anything_runs() {
    let test = "an_out_of_order_pending_migration_is_refused_by_name_before_anything_runs";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let later = shipped()
        .with_migration("V103__later.sql", "SELECT 3 AS Later;\n")
        .unwrap();
    db.migrate(&later).await.expect("deploy V3");
    let earlier = later
        .with_migration("V102__earlier.sql", "CREATE TABLE fence.Earlier (Id int NOT NULL);\n")
        .unwrap();
    let error = db.migrate(&earlier).await.expect_err("V2 after V3 must be refused");
    assert!(
        matches!(&error, DeployError::Blocked(Blocker::OutOfOrderMigration { name, latest }) if name == "V102__earlier" && latest == "V103__later"),
        "{error:?}"
    );
    assert_eq!(history(&db).await, shipped_versions_and(&[103]));
    assert!(!exists(&db, "fence.Earlier").await);
    db.drop().await;
}
