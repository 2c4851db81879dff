//! Live deploy tests: each makes its own database on the engine named by
//! FENCEPOST_TEST_MSSQL and deploys with the real runner.

mod support;

use support::TestDatabase;

#[tokio::test]
async fn a_fresh_deploy_creates_every_object_of_the_contract() {
    let Some(db) = TestDatabase::new("a_fresh_deploy_creates_every_object_of_the_contract").await else {
        return;
    };
    let sources = fencepost::deploy::Sources::embedded().unwrap();
    let report = db.migrate(&sources).await.expect("deploy");
    assert_eq!(
        report.changes.len(),
        sources.migrations().len() + sources.procedures().len()
    );
    db.drop().await;
}
