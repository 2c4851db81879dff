//! Live tests of the offline script: it refuses what `migrate` refuses, and
//! a failure is never followed by a commit, even in a client that carries on
//! after errors. Each makes its own database on the engine named by
//! FENCEPOST_TEST_MSSQL.

mod deploy_support;
mod support;

use deploy_support::{definition, exists, history, run_carrying_on, shipped};
use fencepost::deploy::{Sources, render_script};
use support::TestDatabase;

/// The shipped sources as a newer fencepost would ship them: one more
/// migration, and fence_api.Inspect changed.
fn newer() -> Sources {
    let inspect = shipped()
        .procedures()
        .iter()
        .find(|p| p.qualified_name() == "fence_api.Inspect")
        .unwrap()
        .text()
        .replacen("SET NOCOUNT ON;", "SET NOCOUNT ON; -- (newer)", 1);
    shipped()
        .with_migration("V102__newer.sql", "CREATE TABLE fence.Newer (Id int NOT NULL);\n")
        .unwrap()
        .with_procedure("fence_api.Inspect.sql", &inspect)
        .unwrap()
}

#[tokio::test]
async fn an_older_script_refuses_a_newer_database_and_rolls_no_procedure_back() {
    let test = "an_older_script_refuses_a_newer_database_and_rolls_no_procedure_back";
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    db.migrate(&newer()).await.expect("deploy the newer version");
    assert!(definition(&db, "fence_api.Inspect").await.contains("(newer)"));

    let errors = run_carrying_on(&db, &render_script(&shipped())).await;
    assert!(
        definition(&db, "fence_api.Inspect").await.contains("(newer)"),
        "the older script rolled fence_api.Inspect back"
    );
    assert!(
        errors.iter().any(|e| e.contains("does not ship migration V102__newer")),
        "{errors:#?}"
    );
    let status = fencepost::deploy::status(&mut db.connect().await, &newer())
        .await
        .unwrap();
    assert!(status.is_current(), "{status:?}");
    db.drop().await;
}

#[tokio::test]
async fn a_script_procedure_that_fails_to_compile_commits_neither_its_stub_nor_its_journal_row() {
    let test = "a_script_procedure_that_fails_to_compile_commits_neither_its_stub_nor_its_journal_row";
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    let broken = shipped()
        .with_procedure(
            "fence_api.Broken.sql",
            "CREATE PROCEDURE fence_api.Broken AS SELECT FROM WHERE;",
        )
        .unwrap();
    let errors = run_carrying_on(&db, &render_script(&broken)).await;
    let journal = db
        .query("SELECT COUNT(*) FROM fence.DeployedProcedure WHERE ProcedureName = N'fence_api.Broken';")
        .await;
    assert_eq!(
        journal[0].get::<i32, usize>(0),
        Some(0),
        "a journal row calls the stub current"
    );
    assert!(!exists(&db, "fence_api.Broken").await, "the stub was committed");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    db.drop().await;
}

#[tokio::test]
async fn a_script_migration_that_fails_part_way_is_not_recorded_and_nothing_after_it_runs() {
    let test = "a_script_migration_that_fails_part_way_is_not_recorded_and_nothing_after_it_runs";
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    let failing = shipped()
        .with_migration(
            "V102__fails.sql",
            "CREATE TABLE fence.Before (Id int NOT NULL);\nGO\nTHROW 50999, N'the migration fails', 1;\n\
             GO\nCREATE TABLE fence.After (Id int NOT NULL);\n",
        )
        .unwrap()
        .with_migration("V103__later.sql", "CREATE TABLE fence.Later (Id int NOT NULL);\n")
        .unwrap();
    let errors = run_carrying_on(&db, &render_script(&failing)).await;
    assert!(
        errors.first().is_some_and(|e| e.contains("the migration fails")),
        "{errors:#?}"
    );
    let shipped_versions: Vec<i32> = shipped().migrations().iter().map(|m| m.version()).collect();
    assert_eq!(
        history(&db).await,
        shipped_versions,
        "a failed migration, or one after it, was recorded"
    );
    for table in ["fence.Before", "fence.After", "fence.Later"] {
        assert!(!exists(&db, table).await, "{table} was committed");
    }
    assert!(
        errors.iter().skip(1).all(|e| e.contains("is not applied")),
        "{errors:#?}"
    );
    db.drop().await;
}
