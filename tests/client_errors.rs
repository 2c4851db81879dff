//! Failures are errors, sorted for the caller: an unreachable server at
//! connect, and a publish whose reply never came back, which is resolved by
//! asking for its outcome or replaying it.

mod client_support;
mod lease_support;
mod support;

use std::time::Duration;

use client_support::Proxy;
use fencepost::client::{Error, OperationOutcome, Publication, Publish};
use fencepost::{Client, ClientConfig, ConnectError, ConnectionString};
use lease_support::{SHORT, acquired, provisioned, worker};
use support::TestDatabase;
use uuid::Uuid;

#[tokio::test]
async fn an_unreachable_server_is_a_transient_connect_error() {
    // Bind and drop a listener for a port that is certainly closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ado = format!("Server=tcp:127.0.0.1,{port};User ID=svc;Password=x;Encrypt=DANGER_PLAINTEXT");
    match Client::connect(&ado).await {
        Err(error @ Error::Connect(ConnectError::Unreachable { .. })) => assert!(error.is_transient()),
        other => panic!("expected an unreachable server, got {other:?}"),
    }
}

#[tokio::test]
async fn a_publish_whose_reply_is_lost_is_resolved_by_outcome_and_by_replay() {
    let Some(db) = TestDatabase::deployed("a_publish_whose_reply_is_lost_is_resolved_by_outcome_and_by_replay").await
    else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    config.max_connections(1).call_timeout(Duration::from_secs(3));
    let client = Client::connect_with(config).await.unwrap();
    lease_support::warm_up(&client).await;
    let other = worker(&db.ado()).await;
    let key = provisioned(&other, "report").await;
    let lease = acquired(client.acquire(&key, SHORT * 10).await.unwrap());
    let operation = Uuid::new_v4();

    // The request reaches the server; its answer does not come back.
    proxy.hold_replies(true);
    let lost = client.publish(&lease, operation, "once").await;
    proxy.hold_replies(false);

    match &lost {
        Err(Error::OutcomeUnknown { operation_id, .. }) => assert_eq!(*operation_id, operation),
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    assert!(lost.as_ref().unwrap_err().is_transient());
    assert!(matches!(
        other.outcome(operation).await.unwrap(),
        OperationOutcome::Published { generation, .. } if generation == lease.generation()
    ));
    // The pool dropped the connection whose reply was lost; the replay opens
    // a fresh one and is answered, not written again.
    assert_eq!(
        client.publish(&lease, operation, "once").await.unwrap(),
        Publish::AlreadyPublished
    );
    assert!(matches!(
        other.read_publication(&key).await.unwrap(),
        Publication::Found { payload, .. } if payload == "once"
    ));
    // Close the pools first: open sessions keep the database in use.
    drop((client, other));
    db.drop().await;
}
