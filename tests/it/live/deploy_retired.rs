//! Live tests of procedures fencepost no longer ships: the ones it deployed
//! are dropped, a hand-made one in a fence schema stops the deploy. Each
//! makes its own database on the engine named by FENCEPOST_TEST_MSSQL.

use crate::support;

use fencepost::deploy::{Blocker, Change, DeployError};
use support::TestDatabase;
use support::deploy::{exists, history, shipped, shipped_versions_and};

#[tokio::test]
async fn a_procedure_fencepost_deployed_and_no_longer_ships_is_dropped_with_its_journal_row() {
    let test = "a_procedure_fencepost_deployed_and_no_longer_ships_is_dropped_with_its_journal_row";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let with_added = shipped()
        .with_procedure(
            "fence_api.Added.sql",
            "CREATE PROCEDURE fence_api.Added AS SELECT N'Found' AS Outcome;",
        )
        .unwrap()
        .with_permission(
            "025_added.sql",
            "GRANT EXECUTE ON OBJECT::fence_api.Added TO fence_service;\n",
        )
        .unwrap();
    db.migrate(&with_added).await.expect("deploy with the added procedure");
    assert!(exists(&db, "fence_api.Added").await);

    let report = db.migrate(&shipped()).await.expect("deploy without it");
    // Names as the server spells them: Babelfish reports unquoted names in lower case.
    assert!(
        matches!(report.changes.as_slice(), [Change::RetiredProcedure { name }] if name.eq_ignore_ascii_case("fence_api.Added")),
        "{:?}",
        report.changes
    );
    assert!(
        !exists(&db, "fence_api.Added").await,
        "the retired procedure is still there"
    );
    let journal = db
        .query("SELECT COUNT(*) FROM fence.DeployedProcedure WHERE ProcedureName = N'fence_api.Added';")
        .await;
    assert_eq!(journal[0].get::<i32, usize>(0), Some(0));
    let status = fencepost::deploy::status(&mut *db.session().await, &shipped())
        .await
        .unwrap();
    assert!(status.is_current(), "{status:?}");
    db.drop().await;
}

#[tokio::test]
async fn a_hand_made_procedure_in_a_fence_schema_stops_the_deploy_and_is_named() {
    let test = "a_hand_made_procedure_in_a_fence_schema_stops_the_deploy_and_is_named";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    db.exec("EXEC (N'CREATE PROCEDURE fence_admin.Backdoor AS UPDATE fence.Resource SET Owner = NULL;');")
        .await;
    let changed = shipped()
        .with_migration("V102__after.sql", "CREATE TABLE fence.After (Id int NOT NULL);\n")
        .unwrap();
    let error = db.migrate(&changed).await.expect_err("the deploy must stop");
    assert!(
        matches!(&error, DeployError::Blocked(Blocker::HandMadeProcedure { name }) if name.eq_ignore_ascii_case("fence_admin.Backdoor")),
        "{error:?}"
    );
    assert_eq!(
        history(&db).await,
        shipped_versions_and(&[]),
        "the deploy ran before refusing"
    );
    db.drop().await;
}
