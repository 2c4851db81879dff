//! `verify_contract` on a live engine: silent on a deployed database for a
//! service login, naming what is missing or different otherwise, and
//! refusing to start with a login that can write the fence directly.

mod support;

use fencepost::client::Error;
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;

/// A client that may run as the deploy login, which is dbo.
async fn privileged(ado: &str) -> Client {
    let mut config = ClientConfig::new(ConnectionString::parse(ado).unwrap());
    config.allow_privileged_login(true);
    Client::connect_with(config).await.unwrap()
}

fn reasons(result: Result<(), Error>) -> Vec<String> {
    match result {
        Err(Error::PrivilegedLogin { reasons, .. }) => reasons,
        other => panic!("expected PrivilegedLogin, got {other:?}"),
    }
}

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
    let client = privileged(&db.ado()).await;
    client.verify_contract().await.unwrap();
    // Close the pools first: open sessions keep the database in use.
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn verify_contract_refuses_to_start_as_dbo_unless_told_to() {
    let Some(db) = TestDatabase::deployed("verify_contract_refuses_to_start_as_dbo_unless_told_to").await else {
        return;
    };
    // The deploy login created the database: it enters as dbo.
    let client = Client::connect(&db.ado()).await.unwrap();
    let error = client.verify_contract().await.expect_err("dbo is refused");
    assert!(error.to_string().contains("allow_privileged_login"), "{error}");
    let found = reasons(Err(error));
    assert!(
        found.iter().any(|r| r.contains("enters the database as dbo")),
        "{found:?}"
    );
    drop(client);
    privileged(&db.ado()).await.verify_contract().await.unwrap();
    db.drop().await;
}

#[tokio::test]
async fn verify_contract_refuses_a_login_that_may_update_the_fence_table() {
    let test = "verify_contract_refuses_a_login_that_may_update_the_fence_table";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let service = db.login_in_role(Some("fence_service")).await;
    let client = Client::connect(&service).await.unwrap();
    client
        .verify_contract()
        .await
        .expect("a service login holds the contract and no more");
    let user = service
        .split(';')
        .find_map(|kv| kv.strip_prefix("User ID="))
        .expect("the support module names the user");
    db.exec(&format!("GRANT UPDATE ON fence.Resource TO [{user}];")).await;
    let found = reasons(client.verify_contract().await);
    assert_eq!(found, ["it holds UPDATE on fence.Resource (HAS_PERMS_BY_NAME)"]);
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn an_empty_database_is_reported_procedure_by_procedure() {
    let Some(db) = TestDatabase::new("an_empty_database_is_reported_procedure_by_procedure").await else {
        return;
    };
    let client = privileged(&db.ado()).await;
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
    let client = privileged(&db.ado()).await;
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
