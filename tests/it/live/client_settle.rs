//! A publish whose every reply is lost: `run_fenced` answers `Unknown` with
//! what it takes to settle it, never an error that reads "nothing was sent",
//! and settling it later gives the one outcome the server decided.

use crate::support;

use std::time::Duration;

use fencepost::client::{Fenced, OperationOutcome, Publication, Publish, Unsettled};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{provisioned, warm_up, worker};
use support::proxy::{Cut, Proxy};
use tokio::time::Instant;

#[tokio::test]
async fn a_publish_that_committed_while_every_reply_was_lost_is_unknown_and_settles_as_published() {
    const TEST: &str = "a_publish_that_committed_while_every_reply_was_lost_is_unknown_and_settles_as_published";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    config
        .max_connections(1)
        // Longer than a new session's first call on a busy engine, which
        // the warm-up pays through this client.
        .call_timeout(Duration::from_secs(6))
        .checkout_timeout(Duration::from_millis(500))
        .release_timeout(Duration::from_millis(500));
    let client = Client::connect_with(config).await.unwrap();
    let direct = db.ado();
    let ((), observer) = tokio::join!(warm_up(&client), worker(&direct));
    let key = provisioned(&client, "unsettled").await;

    let fenced = client
        .run_fenced(&key, Duration::from_secs(10), |_| async {
            // The publish reaches the server, which commits it; its reply is
            // cut, and no new connection can sign in for a replay.
            proxy.cut_next(Cut::BeforeReply);
            proxy.hold_replies(true);
            Ok::<_, std::convert::Infallible>("the result".to_string())
        })
        .await;
    assert!(!proxy.cut_pending(), "the cut never happened");
    let fenced = fenced.expect("a publish that may have committed was reported as an error");
    let Fenced::Unknown(unsettled) = fenced else {
        panic!("every reply was lost, yet the outcome reads as known: {fenced:?}");
    };
    assert_eq!(unsettled.payload(), "the result");
    assert_eq!(unsettled.lease().key(), key);

    // The server comes back; the replay answers for good.
    proxy.hold_replies(false);
    let settled = settle(&client, &unsettled).await;
    assert_eq!(settled, Publish::AlreadyPublished, "the first send committed");
    assert_eq!(settle(&client, &unsettled).await, Publish::AlreadyPublished, "final");
    match observer.read_publication(&key).await.unwrap() {
        Publication::Found {
            generation, payload, ..
        } => {
            assert_eq!(payload, "the result");
            assert_eq!(generation, unsettled.lease().generation());
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        observer.outcome(unsettled.operation_id()).await.unwrap(),
        OperationOutcome::Published { generation, .. } if generation == unsettled.lease().generation()
    ));
    let recorded = db
        .query(&format!(
            "SELECT COUNT(*) FROM fence.PublishedOperation WHERE ResourceKey = N'{key}'"
        ))
        .await;
    assert_eq!(recorded[0].get::<i32, _>(0), Some(1), "written once");
    drop((client, observer));
    db.drop().await;
}

/// Settles, trying again while the client is still reconnecting: an error
/// settles nothing, and a replay is always safe.
async fn settle(client: &Client, unsettled: &Unsettled) -> Publish {
    let give_up = Instant::now() + Duration::from_secs(30);
    loop {
        match client.settle(unsettled).await {
            Ok(answer) => return answer,
            Err(error) => {
                assert!(Instant::now() < give_up, "never settled: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}
