//! Live tests of `fencepost script --target babelfish-postgres`, run with psql
//! on the PostgreSQL side of the Babelfish that FENCEPOST_TEST_MSSQL names
//! (FENCEPOST_TEST_POSTGRES). Each makes its own database.

mod support;

use support::TestDatabase;
use support::babelfish_postgres::{postgres_or_skip, procedures_not_security_definer, run_security_definer_script};

/// Every fence procedure, as PostgreSQL names it.
fn all_fence_procedures() -> Vec<String> {
    let mut names: Vec<String> = fencepost::deploy::Sources::embedded()
        .unwrap()
        .procedures()
        .iter()
        .map(|p| p.qualified_name().to_lowercase())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_script_makes_every_fence_procedure_security_definer_and_a_second_run_changes_nothing() {
    const TEST: &str =
        "the_script_makes_every_fence_procedure_security_definer_and_a_second_run_changes_nothing";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    if !db.is_babelfish().await {
        support::skip(TEST, "the engine is not Babelfish (SQL Server chains ownership)");
        db.drop().await;
        return;
    }
    let Some(postgres) = postgres_or_skip(TEST) else {
        db.drop().await;
        return;
    };
    let shipped = all_fence_procedures();
    assert_eq!(procedures_not_security_definer(&postgres, &db.name), shipped);

    let first = run_security_definer_script(&postgres, &db.name);
    let count = shipped.len();
    assert!(
        first.contains(&format!("{count} procedure(s) made SECURITY DEFINER, 0 already were")),
        "{first}"
    );
    assert_eq!(procedures_not_security_definer(&postgres, &db.name), Vec::<String>::new());

    let second = run_security_definer_script(&postgres, &db.name);
    assert!(
        second.contains(&format!("0 procedure(s) made SECURITY DEFINER, {count} already were")),
        "{second}"
    );
    db.drop().await;
}

#[tokio::test]
async fn the_script_refuses_a_database_without_the_fence_and_changes_nothing() {
    const TEST: &str = "the_script_refuses_a_database_without_the_fence_and_changes_nothing";
    let Some(db) = TestDatabase::new(TEST).await else {
        return;
    };
    if !db.is_babelfish().await {
        support::skip(TEST, "the engine is not Babelfish (SQL Server chains ownership)");
        db.drop().await;
        return;
    }
    let Some(postgres) = postgres_or_skip(TEST) else {
        db.drop().await;
        return;
    };
    let refused = std::panic::catch_unwind(|| run_security_definer_script(&postgres, &db.name))
        .expect_err("the script ran on a database without the fence");
    let message = refused
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_default();
    assert!(message.contains("run fencepost migrate first"), "{message}");
    db.drop().await;
}
