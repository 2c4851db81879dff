//! An acquire whose reply is lost keeps its owner: the client retries as the
//! same owner and confirms the grant, rather than leaving the key held by an
//! owner nobody knows, also when the caller would not wait at all. A server
//! that cannot be reached at all is not retried for a lease length. The tests
//! share one database: each works on keys of its own.

use crate::support;

use std::convert::Infallible;
use std::time::Duration;

use fencepost::client::{Error, Release};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{acquired, provisioned, state, warm_up, worker};
use support::proxy::{Cut, Proxy};
use tokio::time::Instant;

#[tokio::test]
async fn an_acquire_whose_reply_was_lost_answers_acquired_as_the_same_owner() {
    const TEST: &str = "an_acquire_whose_reply_was_lost_answers_acquired_as_the_same_owner";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let (through, direct) = (proxy.ado(&db.ado()), db.ado());
    let (client, observer) = tokio::join!(worker(&through), worker(&direct));
    let key = provisioned(&client, "lost-grant").await;

    // The server grants the lease; the client never hears it.
    proxy.cut_next(Cut::BeforeReply);
    let lease = acquired(client.acquire(&key, Duration::from_secs(30)).await.unwrap());
    assert_eq!(proxy.cuts(), 1, "the cut never happened");
    let (generation, held, _, _) = state(&observer, &key).await;
    assert!(held);
    assert_eq!(lease.generation(), generation, "the retry took a generation of its own");
    assert_eq!(generation, 1);
    // The lease is the caller's: its owner releases it.
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    drop((client, observer));
    db.drop().await;
}

/// A wait of zero ("try once") bounds the waiting, not the confirmation: the
/// grant whose reply was lost is confirmed as the same owner all the same.
#[tokio::test]
async fn a_zero_wait_acquire_whose_reply_was_lost_answers_acquired_as_the_same_owner() {
    const TEST: &str = "a_zero_wait_acquire_whose_reply_was_lost_answers_acquired_as_the_same_owner";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let (through, direct) = (proxy.ado(&db.ado()), db.ado());
    let (client, observer) = tokio::join!(worker(&through), worker(&direct));
    let key = provisioned(&client, "lost-grant-no-wait").await;

    proxy.cut_next(Cut::BeforeReply);
    let answer = client
        .acquire_waiting(&key, Duration::from_secs(30), Duration::ZERO)
        .await;
    assert_eq!(proxy.cuts(), 1, "the cut never happened");
    let lease = acquired(answer.unwrap());
    let (generation, held, _, _) = state(&observer, &key).await;
    assert!(held);
    assert_eq!(lease.generation(), generation, "the retry took a generation of its own");
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    drop((client, observer));
    db.drop().await;
}

#[tokio::test]
async fn a_server_that_cannot_be_reached_ends_an_hour_long_run_within_seconds() {
    const TEST: &str = "a_server_that_cannot_be_reached_ends_an_hour_long_run_within_seconds";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    config
        .max_connections(1)
        .call_timeout(Duration::from_secs(3))
        .checkout_timeout(Duration::from_millis(500))
        // Every checkout pings, so the held connection is found dead before
        // any acquire is sent on it.
        .idle_check_after(Duration::ZERO);
    let client = Client::connect_with(config).await.unwrap();
    warm_up(&client).await;
    let key = provisioned(&client, "unreachable").await;

    // Nothing the client sends reaches the server any more, new sign-ins
    // included.
    proxy.hold_requests(true);
    let started = Instant::now();
    let run = client.run_fenced(&key, Duration::from_secs(3600), |_| async {
        Ok::<_, Infallible>("never".to_string())
    });
    let ended = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("run_fenced kept retrying a server nothing reached");
    let took = started.elapsed();
    match ended {
        Err(Error::Unavailable { .. } | Error::Connect(_)) => {}
        other => panic!("{other:?}"),
    }
    // A ping (the call timeout) and a checkout, not an hour.
    assert!(took < Duration::from_secs(10), "{took:?}");
    proxy.hold_requests(false);
    drop(client);
    db.drop().await;
}
