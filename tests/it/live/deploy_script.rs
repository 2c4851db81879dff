//! Live tests of the offline script: it refuses what `migrate` refuses, and
//! a failure is never followed by a commit, even in a client that carries on
//! after errors. Each makes its own database on the engine named by
//! FENCEPOST_TEST_MSSQL.

use crate::support;

use fencepost::deploy::{Grant, Sources, render_script, render_script_with_grants};
use support::TestDatabase;
use support::deploy::{definition, exists, history, run_carrying_on, shipped, shipped_versions_and};

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
    let status = fencepost::deploy::status(&mut *db.session().await, &newer())
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
    assert_eq!(
        history(&db).await,
        shipped_versions_and(&[]),
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

#[tokio::test]
async fn the_script_refuses_a_database_whose_copy_of_a_shipped_migration_changed_and_changes_nothing() {
    let test = "the_script_refuses_a_database_whose_copy_of_a_shipped_migration_changed_and_changes_nothing";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    // V1 as the database has it is not V1 as shipped (its file changed), and
    // Inspect was altered since: a script that ran anyway would put it back.
    db.exec("UPDATE fence.SchemaHistory SET checksum = N'1' WHERE version = 1;")
        .await;
    db.exec("ALTER PROCEDURE fence_api.Inspect @ResourceKey nvarchar(4000) AS SELECT N'kept' AS Outcome;")
        .await;
    let deployments = "SELECT COUNT(*) FROM fence.Deployment;";
    let before = db.query(deployments).await[0].get::<i32, usize>(0);

    let errors = run_carrying_on(&db, &render_script(&shipped())).await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("does not ship migration V1__lease_tables as the database has it")),
        "{errors:#?}"
    );
    assert!(
        definition(&db, "fence_api.Inspect").await.contains("N'kept'"),
        "the refused script altered fence_api.Inspect"
    );
    assert_eq!(history(&db).await, shipped_versions_and(&[]));
    assert_eq!(
        db.query(deployments).await[0].get::<i32, usize>(0),
        before,
        "the refused script recorded a deployment"
    );
    db.drop().await;
}

/// Whether `member` is in `role` in `db`.
async fn is_member(db: &TestDatabase, role: &str, member: &str) -> bool {
    let rows = db
        .query(&format!(
            "SELECT COUNT(*) FROM sys.database_role_members
              WHERE role_principal_id = DATABASE_PRINCIPAL_ID(N'{role}')
                AND member_principal_id = DATABASE_PRINCIPAL_ID(N'{member}');"
        ))
        .await;
    rows[0].get::<i32, usize>(0) == Some(1)
}

#[tokio::test]
async fn the_script_adds_each_granted_user_to_its_role_and_a_second_run_changes_nothing() {
    let test = "the_script_adds_each_granted_user_to_its_role_and_a_second_run_changes_nothing";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let service = support::user_of(&db.login_in_role(None).await);
    let grants = [Grant::parse(&format!("fence_service={service}")).unwrap()];
    let script = render_script_with_grants(&shipped(), &grants);
    for run in ["first", "second"] {
        let errors = run_carrying_on(&db, &script).await;
        assert!(errors.is_empty(), "{run} run: {errors:#?}");
        assert!(is_member(&db, "fence_service", &service).await, "{run} run");
    }
    db.drop().await;
}

#[tokio::test]
async fn a_script_granting_a_user_the_database_lacks_adds_no_member() {
    let test = "a_script_granting_a_user_the_database_lacks_adds_no_member";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let service = support::user_of(&db.login_in_role(None).await);
    let grants = [
        Grant::parse(&format!("fence_service={service}")).unwrap(),
        Grant::parse("fence_reader=no_such_user").unwrap(),
    ];
    let errors = run_carrying_on(&db, &render_script_with_grants(&shipped(), &grants)).await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("no user or role [no_such_user] in this database")),
        "{errors:#?}"
    );
    assert!(
        !is_member(&db, "fence_service", &service).await,
        "a member was added before the refusal"
    );
    db.drop().await;
}
