//! `verify_contract` on a live engine: silent on a deployed database, and
//! naming what is missing or different otherwise.

mod support;

use fencepost::Client;
use fencepost::client::Error;
use support::TestDatabase;

fn problems(result: Result<(), Error>) -> Vec<String> {
    match result {
        Err(Error::ContractMismatch { problems, .. }) => problems,
        other => panic!("expected ContractMismatch, got {other:?}"),
    }
}

#[tokio::test]
async fn a_deployed_database_holds_the_contract() {
    let Some(db) = TestDatabase::deployed("a_deployed_database_holds_the_contract").await else {
        return;
    };
    let client = Client::connect(&db.ado()).await.unwrap();
    client.verify_contract().await.unwrap();
    // Close the pools first: open sessions keep the database in use.
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn an_empty_database_is_reported_procedure_by_procedure() {
    let Some(db) = TestDatabase::new("an_empty_database_is_reported_procedure_by_procedure").await else {
        return;
    };
    let client = Client::connect(&db.ado()).await.unwrap();
    let found = problems(client.verify_contract().await);
    // One problem per shipped fence_api procedure, each named.
    let shipped: Vec<String> = fencepost::deploy::Sources::embedded()
        .unwrap()
        .procedures()
        .iter()
        .map(|p| p.qualified_name())
        .filter(|name| name.starts_with("fence_api."))
        .collect();
    assert_eq!(found.len(), shipped.len(), "{found:?}");
    for name in &shipped {
        assert!(found.contains(&format!("{name} is missing")), "{name}: {found:?}");
    }
    assert!(found.contains(&"fence_api.Publish is missing".to_string()), "{found:?}");
    // Close the pools first: open sessions keep the database in use.
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_dropped_or_changed_procedure_is_named() {
    let Some(db) = TestDatabase::deployed("a_dropped_or_changed_procedure_is_named").await else {
        return;
    };
    db.exec("DROP PROCEDURE fence_api.GetOutcome;").await;
    db.exec(
        "ALTER PROCEDURE fence_api.Release @ResourceKey nvarchar(256), @Owner uniqueidentifier, @Generation int \
         AS SELECT CAST(N'NotHolder' AS nvarchar(32)) AS Outcome;",
    )
    .await;
    let client = Client::connect(&db.ado()).await.unwrap();
    let error = client
        .verify_contract()
        .await
        .expect_err("a changed contract is an error");
    let message = error.to_string();
    let expected = [
        "fence_api.Release declares @ResourceKey as nvarchar(256), expected nvarchar wider than 256 characters",
        "fence_api.Release declares @Generation as int, expected bigint",
        "fence_api.GetOutcome is missing",
    ];
    assert_eq!(problems(Err(error)), expected);
    // What a service logs: the message verify_contract returned names every problem.
    let version = format!("contract v{}", fencepost::client::CONTRACT_VERSION);
    for part in expected.iter().copied().chain([version.as_str()]) {
        assert!(message.contains(part), "{part:?} is not in {message}");
    }
    // Close the pools first: open sessions keep the database in use.
    drop(client);
    db.drop().await;
}
