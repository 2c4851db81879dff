//! Failures are errors, sorted for the caller: an unreachable server at
//! connect, and a publish whose reply never came back, which is resolved by
//! asking for its outcome or replaying it.

use crate::support;

use std::time::Duration;

use fencepost::client::{Error, OperationOutcome, Publication, Publish};
use fencepost::{Client, ClientConfig, ConnectError, ConnectionString};
use support::TestDatabase;
use support::lease::{SHORT, acquired, provisioned, worker};
use support::proxy::Proxy;
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
    let Some(db) = TestDatabase::shared("a_publish_whose_reply_is_lost_is_resolved_by_outcome_and_by_replay").await
    else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    config.max_connections(1).call_timeout(Duration::from_secs(3));
    let client = Client::connect_with(config).await.unwrap();
    support::lease::warm_up(&client).await;
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
    assert!(
        !lost.as_ref().unwrap_err().is_transient(),
        "a blind retry could publish anew; only a replay settles it"
    );
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

/// A fatal error (class 20 and above) ends the session, possibly after the
/// procedure's COMMIT and before its row: a publish that meets one is
/// `OutcomeUnknown`, never a server error that reads as "nothing was
/// written". Here the error comes before anything ran, so the replay, once
/// the shipped procedure is back, publishes.
#[tokio::test]
async fn a_fatal_server_error_on_a_publish_is_outcome_unknown() {
    let test = "a_fatal_server_error_on_a_publish_is_outcome_unknown";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    db.exec(
        "ALTER PROCEDURE fence_api.Publish \
           @ResourceKey nvarchar(4000), @Owner uniqueidentifier, @Generation bigint, \
           @OperationId uniqueidentifier, @Payload nvarchar(max), @Release bit = 0, \
           @SourceVersion bigint = NULL \
         AS BEGIN \
           SET NOCOUNT ON; \
           RAISERROR('the session ends here', 20, 1) WITH LOG; \
         END;",
    )
    .await;
    let key = provisioned(&client, "fatal").await;
    let lease = acquired(client.acquire(&key, SHORT * 10).await.unwrap());
    let operation = Uuid::new_v4();
    let error = client.publish(&lease, operation, "payload").await.unwrap_err();
    assert_eq!(error.unknown_operation(), Some(operation), "{error:?}");

    db.exec(&shipped_publish("ALTER PROCEDURE fence_api.Publish")).await;
    assert_eq!(
        client.publish(&lease, operation, "payload").await.unwrap(),
        Publish::Published,
        "nothing had committed, so the replay publishes"
    );
    drop(client);
    db.drop().await;
}

/// The shipped text of `fence_api.Publish`, with its `CREATE PROCEDURE` line
/// replaced by `header`.
fn shipped_publish(header: &str) -> String {
    let sources = fencepost::deploy::Sources::embedded().unwrap();
    let text = sources
        .procedures()
        .iter()
        .find(|p| p.qualified_name() == "fence_api.Publish")
        .unwrap()
        .text()
        .to_string();
    assert!(text.contains("CREATE PROCEDURE fence_api.Publish\n"));
    text.replacen("CREATE PROCEDURE fence_api.Publish\n", &format!("{header}\n"), 1)
}

#[tokio::test]
async fn a_server_error_after_the_published_row_is_outcome_unknown_and_a_replay_resolves_it() {
    let test = "a_server_error_after_the_published_row_is_outcome_unknown_and_a_replay_resolves_it";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    // Warmed up (a publish included) before the procedure changes.
    let proxy = Proxy::start(db.connection_string().server()).await;
    let client = worker(&proxy.ado(&db.ado())).await;
    // The real publish runs, commits and answers its row; then the reply
    // carries an error. Measured on Babelfish 4.2: the reply holds the row's
    // metadata, the row, then the error token (code 50000, class 16), in that
    // order, as on SQL Server, and tiberius yields the row before the error.
    db.exec(&shipped_publish("CREATE PROCEDURE fence_api.PublishInner"))
        .await;
    db.exec(
        "ALTER PROCEDURE fence_api.Publish \
           @ResourceKey nvarchar(4000), @Owner uniqueidentifier, @Generation bigint, \
           @OperationId uniqueidentifier, @Payload nvarchar(max), @Release bit = 0, \
           @SourceVersion bigint = NULL \
         AS BEGIN \
           SET NOCOUNT ON; \
           EXEC fence_api.PublishInner @ResourceKey = @ResourceKey, @Owner = @Owner, @Generation = @Generation, \
                @OperationId = @OperationId, @Payload = @Payload, @Release = @Release, \
                @SourceVersion = @SourceVersion; \
           RAISERROR('after the row', 16, 1); \
         END;",
    )
    .await;
    let key = provisioned(&client, "after-row").await;
    let lease = acquired(client.acquire(&key, SHORT * 10).await.unwrap());
    let operation = Uuid::new_v4();
    let connections = proxy.connections();

    let error = client.publish(&lease, operation, "payload").await.unwrap_err();
    assert_eq!(error.unknown_operation(), Some(operation), "{error:?}");
    assert!(
        matches!(&error, Error::OutcomeUnknown { reason, .. } if reason.contains("after the row")),
        "{error:?}"
    );
    // An error outside the contract may leave session state behind (an
    // open transaction, after 266): the connection is not used again.
    assert!(matches!(
        client.outcome(operation).await.unwrap(),
        OperationOutcome::Published { generation, .. } if generation == lease.generation()
    ));
    assert_eq!(
        proxy.connections(),
        connections + 1,
        "the connection was handed out again"
    );

    // With the shipped procedure back, the replay settles it.
    db.exec(&shipped_publish("ALTER PROCEDURE fence_api.Publish")).await;
    assert_eq!(
        client.publish(&lease, operation, "payload").await.unwrap(),
        Publish::AlreadyPublished
    );
    assert!(matches!(
        client.read_publication(&key).await.unwrap(),
        Publication::Found { generation, ref payload, .. } if generation == lease.generation() && payload == "payload"
    ));
    drop(client);
    db.drop().await;
}
