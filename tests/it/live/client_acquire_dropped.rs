//! Dropping an `acquire_waiting` future (a timeout around it, a `select!`
//! at shutdown) never leaves a grant behind for an owner nobody holds: the
//! attempt in flight, which may be blocked on the holder's handover signal
//! and run its Acquire when the holder lets go, is read to its end and a
//! lease it took is given back.

use crate::support;

use std::time::Duration;

use fencepost::client::{Acquire, Release};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{acquired, provisioned, state, warm_up, worker};
use support::signal::{signal_held, waiting_for_a_lock};
use tokio::time::Instant;
use uuid::Uuid;

#[tokio::test]
async fn a_waiting_acquire_dropped_while_blocked_on_the_signal_leaves_no_lease_behind() {
    let test = "a_waiting_acquire_dropped_while_blocked_on_the_signal_leaves_no_lease_behind";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    // Named, so that the waiter's sessions can be told from others.
    let name = format!("fp-dropped-{}", Uuid::new_v4().simple());
    let config = ClientConfig::new(ConnectionString::parse(&format!("{};Application Name={name}", db.ado())).unwrap());
    let waiter = Client::connect_with(config).await.unwrap();
    let ado = db.ado();
    let (holder, observer, mut probe, babelfish) =
        tokio::join!(worker(&ado), worker(&ado), db.connect(), db.is_babelfish());
    warm_up(&waiter).await;
    let key = provisioned(&observer, "dropped").await;
    let lease = acquired(holder.acquire(&key, Duration::from_secs(60)).await.unwrap());
    let holding = lease.generation();
    let guard = holder.guard(lease);
    let raised = Instant::now() + Duration::from_secs(10);
    while !signal_held(&mut probe, &key).await {
        assert!(Instant::now() < raised, "the guard never raised its signal");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The waiter asks for an hour's lease and blocks on the signal.
    let waiting = {
        let (waiter, key) = (waiter.clone(), key.clone());
        tokio::spawn(async move {
            waiter
                .acquire_waiting(&key, Duration::from_secs(3600), Duration::from_secs(30))
                .await
        })
    };
    let blocked = Instant::now() + Duration::from_secs(20);
    while waiting_for_a_lock(&db, &name, babelfish).await < 1 {
        assert!(Instant::now() < blocked, "the waiter never blocked on the signal");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The caller gives up on it, and then the holder lets go: the wait in
    // flight ends, and its Acquire runs for an owner nobody holds.
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert_eq!(guard.release().await.unwrap(), Release::Released);

    // The abandoned attempt's Acquire takes the next generation once the
    // signal is let go of; it must not keep it.
    let ran = Instant::now() + Duration::from_secs(10);
    while state(&observer, &key).await.0 == holding {
        assert!(Instant::now() < ran, "the dropped attempt's Acquire never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let given_back = Instant::now() + Duration::from_secs(10);
    while state(&observer, &key).await.1 {
        assert!(
            Instant::now() < given_back,
            "the dropped waiter's grant was left behind, held by an owner nobody knows"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let next = observer.acquire(&key, Duration::from_secs(30)).await.unwrap();
    assert!(matches!(next, Acquire::Acquired(_)), "{next:?}");
    drop((waiter, holder, observer, probe));
    db.drop().await;
}

/// The same after the attempt answered but before its caller took the
/// answer: a caller dropped in between (a `select!` whose other branch won
/// in the same tick) gives the grant back too.
#[tokio::test]
async fn an_acquire_dropped_after_its_answer_came_but_before_it_was_taken_leaves_no_lease_behind() {
    let test = "an_acquire_dropped_after_its_answer_came_but_before_it_was_taken_leaves_no_lease_behind";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let ado = db.ado();
    let (client, observer) = tokio::join!(worker(&ado), worker(&ado));
    let key = provisioned(&observer, "unclaimed").await;
    let mut acquiring = Box::pin(client.acquire(&key, Duration::from_secs(3600)));
    assert!(
        futures_util::FutureExt::now_or_never(&mut acquiring).is_none(),
        "an acquire answered without a round trip"
    );
    // Granted on the server; the answer reaches the attempt's task a round
    // trip later, with a wide margin here, and waits there, untaken.
    let granted = Instant::now() + Duration::from_secs(10);
    while !state(&observer, &key).await.1 {
        assert!(Instant::now() < granted, "the acquire was never granted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(acquiring);
    let given_back = Instant::now() + Duration::from_secs(10);
    while state(&observer, &key).await.1 {
        assert!(
            Instant::now() < given_back,
            "the unclaimed grant was left behind, held by an owner nobody knows"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop((client, observer));
    db.drop().await;
}
