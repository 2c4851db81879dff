//! Live tests of migrations marked `-- fencepost: no-transaction`: they run
//! batch by batch in autocommit, for statements SQL Server refuses inside a
//! transaction, and are recorded only after their last batch. Each makes its
//! own database on the engine named by FENCEPOST_TEST_MSSQL.

use crate::support;

use fencepost::deploy::{DeployError, Sources, render_script};
use support::TestDatabase;
use support::deploy::{exists, history, run_carrying_on, shipped, shipped_versions_and};

/// A V2 that fails inside a transaction, as ALTER DATABASE does on SQL
/// Server (Babelfish has no ALTER DATABASE to show it with).
fn needs_no_transaction() -> Sources {
    shipped()
        .with_migration(
            "V102__outside.sql",
            "-- fencepost: no-transaction\n\
             IF @@TRANCOUNT <> 0 THROW 50999, N'this migration cannot run inside a transaction', 1;\n\
             CREATE TABLE fence.Outside (Id int NOT NULL);\n",
        )
        .unwrap()
}

#[tokio::test]
async fn a_migration_marked_no_transaction_runs_outside_one_and_is_recorded_after_its_last_batch() {
    let test = "a_migration_marked_no_transaction_runs_outside_one_and_is_recorded_after_its_last_batch";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    db.migrate(&needs_no_transaction()).await.expect("deploy");
    assert_eq!(history(&db).await, shipped_versions_and(&[102]));
    assert!(exists(&db, "fence.Outside").await);
    db.drop().await;
}

#[tokio::test]
async fn a_migration_marked_no_transaction_that_fails_part_way_keeps_its_earlier_batches_and_is_not_recorded() {
    let test = "a_migration_marked_no_transaction_that_fails_part_way_keeps_its_earlier_batches_and_is_not_recorded";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let sources = shipped()
        .with_migration(
            "V102__half.sql",
            "-- fencepost: no-transaction\nCREATE TABLE fence.FirstHalf (Id int NOT NULL);\nGO\n\
             THROW 50999, N'the second batch fails', 1;\n",
        )
        .unwrap();
    let error = db.migrate(&sources).await.expect_err("the second batch fails");
    match &error {
        DeployError::PartlyApplied { name, batch, cause } => {
            assert_eq!((name.as_str(), *batch), ("V102__half", 2));
            assert!(cause.to_string().contains("the second batch fails"), "{cause}");
        }
        other => panic!("expected a partly applied migration, got {other:?}"),
    }
    assert!(
        exists(&db, "fence.FirstHalf").await,
        "the first batch stays, as the error says"
    );
    assert_eq!(
        history(&db).await,
        shipped_versions_and(&[]),
        "a migration that stopped part-way was recorded"
    );
    db.drop().await;
}

#[tokio::test]
async fn the_script_runs_a_migration_marked_no_transaction_outside_one() {
    let test = "the_script_runs_a_migration_marked_no_transaction_outside_one";
    let Some(db) = TestDatabase::new(test).await else {
        return;
    };
    let errors = run_carrying_on(&db, &render_script(&needs_no_transaction())).await;
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(history(&db).await, shipped_versions_and(&[102]));
    assert!(exists(&db, "fence.Outside").await);
    db.drop().await;
}
