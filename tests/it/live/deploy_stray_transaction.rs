//! Live tests: a migration batch that commits or rolls back on its own, or
//! calls a procedure that does, commits nothing of the migration, under
//! `migrate` and under the rendered `script` alike.

use crate::support;

use fencepost::deploy::{DeployError, Sources};
use support::TestDatabase;
use support::deploy::{exists, history, run_carrying_on, shipped, shipped_versions_and};

const FILE: &str = "migrations/V102__stray.sql";

fn with_stray(text: &str) -> Sources {
    shipped().with_migration("V102__stray.sql", text).unwrap()
}

/// The deploy of `text` as migration V102 fails, records nothing, and leaves
/// none of `tables`.
async fn nothing_kept(db: &TestDatabase, text: &str, tables: &[&str]) -> DeployError {
    let error = db.migrate(&with_stray(text)).await.expect_err("the deploy must fail");
    assert_eq!(history(db).await, shipped_versions_and(&[]), "recorded: {error}");
    for table in tables {
        assert!(!exists(db, table).await, "{table} was committed: {error}");
    }
    error
}

fn assert_misuse(error: &DeployError, expected_batch: usize, problem_part: &str) {
    match error {
        DeployError::TransactionMisuse {
            file, batch, problem, ..
        } => {
            assert_eq!(file, FILE);
            assert_eq!(*batch, expected_batch, "{error}");
            assert!(problem.contains(problem_part), "{error}");
        }
        other => panic!("expected a transaction misuse, got {other:?}: {other}"),
    }
}

#[tokio::test]
async fn a_stray_commit_commits_nothing_of_the_migration() {
    let test = "a_stray_commit_commits_nothing_of_the_migration";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let error = nothing_kept(
        &db,
        "CREATE TABLE dbo.ProbeCommitA (Id int NOT NULL);\nGO\nCOMMIT;\nGO\nCREATE TABLE dbo.ProbeCommitB (Id int NOT NULL);\n",
        &["dbo.ProbeCommitA", "dbo.ProbeCommitB"],
    )
    .await;
    assert_misuse(&error, 2, "nothing of it is kept");
    db.drop().await;
}

#[tokio::test]
async fn a_stray_rollback_commits_nothing_that_runs_after_it_in_its_batch() {
    let test = "a_stray_rollback_commits_nothing_that_runs_after_it_in_its_batch";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let error = nothing_kept(
        &db,
        "CREATE TABLE dbo.ProbeRollbackA (Id int NOT NULL);\nGO\nROLLBACK;\nCREATE TABLE dbo.ProbeRollbackB (Id int NOT NULL);\nGO\nCREATE TABLE dbo.ProbeRollbackC (Id int NOT NULL);\n",
        &["dbo.ProbeRollbackA", "dbo.ProbeRollbackB", "dbo.ProbeRollbackC"],
    )
    .await;
    assert_misuse(&error, 2, "nothing of it is kept");
    db.drop().await;
}

#[tokio::test]
async fn a_commit_inside_a_procedure_the_migration_calls_commits_nothing() {
    let test = "a_commit_inside_a_procedure_the_migration_calls_commits_nothing";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let error = nothing_kept(
        &db,
        "CREATE TABLE dbo.ProbeProcA (Id int NOT NULL);\nGO\nCREATE PROCEDURE dbo.ProbeStrayCommit AS\nBEGIN\n    INSERT INTO dbo.ProbeProcA (Id) VALUES (1);\n    COMMIT;\nEND;\nGO\nEXEC dbo.ProbeStrayCommit;\nGO\n",
        &["dbo.ProbeProcA", "dbo.ProbeStrayCommit"],
    )
    .await;
    match &error {
        // SQL Server ends the EXEC with error 266 ("Transaction count after
        // EXECUTE indicates a mismatching number of BEGIN and COMMIT
        // statements"); Babelfish raises nothing, and the runner's check after
        // the batch sees the count it lowered.
        DeployError::BatchFailed {
            file,
            batch: 3,
            message,
            ..
        } if file == FILE => {
            assert!(message.starts_with("error 266:"), "{error}");
        }
        _ => assert_misuse(&error, 3, "nothing of it is kept"),
    }
    db.drop().await;
}

#[tokio::test]
async fn a_batch_that_commits_every_level_is_reported_as_having_committed() {
    let test = "a_batch_that_commits_every_level_is_reported_as_having_committed";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let error = db
        .migrate(&with_stray(
            "CREATE TABLE dbo.ProbeAllLevels (Id int NOT NULL);\nGO\nWHILE @@TRANCOUNT > 0 COMMIT;\nGO\n",
        ))
        .await
        .expect_err("the deploy must fail");
    // No runner can undo a commit: it says so rather than claim a rollback.
    assert_misuse(&error, 2, "committed what the migration ran before it");
    assert_eq!(history(&db).await, shipped_versions_and(&[]));
    db.drop().await;
}

#[tokio::test]
async fn a_stray_commit_or_rollback_commits_nothing_in_the_rendered_script() {
    let test = "a_stray_commit_or_rollback_commits_nothing_in_the_rendered_script";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let cases = [
        (
            "CREATE TABLE dbo.ScriptCommitA (Id int NOT NULL);\nGO\nCOMMIT;\nGO\nCREATE TABLE dbo.ScriptCommitB (Id int NOT NULL);\n",
            ["dbo.ScriptCommitA", "dbo.ScriptCommitB"],
        ),
        (
            "CREATE TABLE dbo.ScriptRollbackA (Id int NOT NULL);\nGO\nROLLBACK;\nCREATE TABLE dbo.ScriptRollbackB (Id int NOT NULL);\n",
            ["dbo.ScriptRollbackA", "dbo.ScriptRollbackB"],
        ),
    ];
    for (text, tables) in cases {
        let script = fencepost::deploy::render_script(&with_stray(text));
        let errors = run_carrying_on(&db, &script).await;
        assert!(
            errors
                .iter()
                .any(|e| e.contains("not recording migration V102__stray")
                    || e.contains("Transaction count after EXECUTE")),
            "{errors:?}"
        );
        assert_eq!(history(&db).await, shipped_versions_and(&[]), "{errors:?}");
        for table in tables {
            assert!(!exists(&db, table).await, "{table} was committed: {errors:?}");
        }
        let open = db.query("SELECT CAST(@@TRANCOUNT AS int);").await;
        assert_eq!(open[0].get::<i32, usize>(0), Some(0));
    }
    db.drop().await;
}
