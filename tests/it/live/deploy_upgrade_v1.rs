//! Live test: a V1 database whose published operations spell a key in
//! another case than its Resource row (V1's Publish recorded the caller's
//! spelling, and V1's case-insensitive foreign key accepted it) upgrades to
//! what ships, and each operation keeps pointing at its row.

use crate::support;

use fencepost::deploy::Sources;
use support::TestDatabase;
use support::deploy::{history, run_carrying_on, shipped, shipped_versions_and};

/// The V1 texts: the first migration as shipped (its text is unchanged since
/// V1 databases applied it; the history's checksum would say otherwise).
fn v1() -> Sources {
    let text = include_str!("../../../migrations/V1__lease_tables.sql");
    Sources::from_files(
        vec![("V1__lease_tables.sql".into(), text.as_bytes().to_vec())],
        vec![],
        vec![],
    )
    .expect("V1 sources")
}

/// A V1 database holding an operation spelled `report:daily` for the row
/// `Report:Daily`, as V1's Provision, Acquire and Publish left it when a
/// caller provisioned one spelling and published with the other: V1's
/// Publish ran `INSERT INTO fence.PublishedOperation (...) VALUES
/// (@OperationId, @ResourceKey, ...)`, the caller's spelling.
async fn v1_database(test: &str) -> Option<TestDatabase> {
    let db = TestDatabase::new(test).await?;
    db.migrate(&v1()).await.expect("deploy V1");
    assert_eq!(history(&db).await, [1]);
    db.exec(
        "INSERT INTO fence.Resource (ResourceKey, Generation, PublishedGeneration, Payload, PublishedAtUtc, ProvisionedAtUtc)
         VALUES (N'Report:Daily', 1, 1, N'total=7', SYSUTCDATETIME(), SYSUTCDATETIME());
         INSERT INTO fence.PublishedOperation (OperationId, ResourceKey, Generation, PublishedAtUtc)
         VALUES ('0f0f0f0f-0000-4000-8000-000000000001', N'report:daily', 1, SYSUTCDATETIME());",
    )
    .await;
    Some(db)
}

/// After the upgrade, the operation names its row in the row's spelling.
async fn assert_operation_names_its_row(db: &TestDatabase) {
    assert_eq!(history(db).await, shipped_versions_and(&[]));
    let rows = db
        .query("SELECT ResourceKey FROM fence.PublishedOperation WHERE OperationId = '0f0f0f0f-0000-4000-8000-000000000001';")
        .await;
    assert_eq!(
        rows[0].get::<&str, usize>(0),
        Some("Report:Daily"),
        "the operation no longer names its row"
    );
    let outcome = db
        .query("EXEC fence_api.GetOutcome @OperationId = '0f0f0f0f-0000-4000-8000-000000000001';")
        .await;
    assert_eq!(outcome[0].get::<&str, usize>(0), Some("Published"));
    assert_eq!(outcome[0].get::<&str, _>("ResourceKey"), Some("Report:Daily"));
}

#[tokio::test]
async fn v2_deploys_on_a_v1_database_whose_operations_spell_a_key_in_another_case() {
    let test = "v2_deploys_on_a_v1_database_whose_operations_spell_a_key_in_another_case";
    let Some(db) = v1_database(test).await else {
        return;
    };
    // On SQL Server, V2's binary foreign key refused the copy of that row
    // (error 547) and every later deploy failed the same way.
    db.migrate(&shipped()).await.expect("upgrade from V1");
    assert_operation_names_its_row(&db).await;
    db.drop().await;
}

#[tokio::test]
async fn the_script_upgrades_a_v1_database_whose_operations_spell_a_key_in_another_case() {
    let test = "the_script_upgrades_a_v1_database_whose_operations_spell_a_key_in_another_case";
    let Some(db) = v1_database(test).await else {
        return;
    };
    let errors = run_carrying_on(&db, &fencepost::deploy::render_script(&shipped())).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_operation_names_its_row(&db).await;
    db.drop().await;
}
