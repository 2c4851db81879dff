//! Live tests of procedures fencepost no longer ships: the ones it deployed
//! are dropped, a hand-made one in a fence schema stops the deploy. Each
//! makes its own database on the engine named by FENCEPOST_TEST_MSSQL.

use crate::support;

use fencepost::deploy::{Blocker, Change, DeployError};
use support::TestDatabase;
use support::deploy::{exists, history, shipped, shipped_versions_and};

/// `fencepost status`'s text, which must exit 1, and its line for
/// `procedure` (lower case: Babelfish reports unquoted names so).
fn status_line(db: &TestDatabase, procedure: &str) -> (String, String) {
    let status = support::binary::fencepost_on(&db.ado(), ["status"])
        .output()
        .expect("run fencepost");
    let text = support::binary::stdout(&status);
    assert_eq!(status.status.code(), Some(1), "{text}");
    let line = text
        .lines()
        .find(|l| l.trim_start().to_lowercase().starts_with(procedure))
        .unwrap_or_else(|| panic!("status does not list {procedure}:\n{text}"))
        .to_string();
    (text, line)
}

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

    // Before the deploy that drops it, status says what that deploy will do.
    let (text, line) = status_line(&db, "fence_api.added");
    assert!(
        line.ends_with("pending: retired (fencepost deployed it and no longer ships it; migrate drops it)"),
        "{text}"
    );
    assert!(
        text.contains("1 item(s) need attention: run `fencepost migrate` to deploy what ships"),
        "{text}"
    );

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
    // status names it, and says migrate stops on it rather than advising a
    // run that would be refused.
    let (text, line) = status_line(&db, "fence_admin.backdoor");
    assert!(
        line.ends_with(
            "UNKNOWN: not deployed by fencepost; migrate refuses to run until it is dropped or moved out of the fence schemas"
        ),
        "{text}"
    );
    assert!(
        text.contains("`fencepost migrate` stops until this is resolved: procedure ")
            && text.contains("is in a fence schema but was not deployed by fencepost"),
        "{text}"
    );
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
