//! A guard whose renewal hangs costs no other guard of the same client its
//! lease. Another session's open transaction holds guard A's fence row, so
//! A's renewal and the second attempt its hedge sends beside it both wait on
//! the row's lock until A gives up; guard B, on a key nobody blocks, must
//! keep renewing all that time.

use crate::support;

use std::time::Duration;

use fencepost::client::{FencedOutcome, LostReason, Release};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::caller::Caller;
use support::lease::{acquired, provisioned, state, warm_up, worker};
use support::signal::waiting_for_a_lock;
use tokio::sync::oneshot;
use tokio::time::Instant;
use uuid::Uuid;

/// A's lease: its first renewal is sent a third in (15 s), its hedge a
/// quarter of the time left after that (about 22 s), and it gives up a
/// margin before 45 s. B is watched in between. The hedge signs in a new
/// session and compiles Renew before it waits on the row, which on a busy
/// engine takes seconds: its barrier allows until two thirds in (30 s).
const STUCK: Duration = Duration::from_secs(45);
/// B's lease: renewed every 2 s, and lost if none is confirmed within 4 s.
const FREE: Duration = Duration::from_secs(6);
/// How long B is watched once both of A's attempts are stuck: longer than
/// B's lease, so a B starved of connections is lost by then, and over before
/// A gives up, with room for a slow barrier.
const WATCH: Duration = Duration::from_secs(8);

#[tokio::test]
async fn a_renewal_stuck_on_its_row_lock_leaves_the_other_guards_renewing() {
    const TEST: &str = "a_renewal_stuck_on_its_row_lock_leaves_the_other_guards_renewing";
    stuck_guard_spares_the_other(TEST, false).await;
}

#[tokio::test]
async fn a_renewal_stuck_on_its_row_lock_spares_the_other_guard_of_a_one_connection_client() {
    const TEST: &str = "a_renewal_stuck_on_its_row_lock_spares_the_other_guard_of_a_one_connection_client";
    stuck_guard_spares_the_other(TEST, true).await;
}

/// Guards A and B in one client, A's row held by another session from
/// before A's first renewal. With `one_connection`, the client has one
/// ordinary connection, and the service's own fenced transaction holds it
/// while B is watched.
async fn stuck_guard_spares_the_other(test: &str, one_connection: bool) {
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    // Named, so that the sessions of this client can be told from others.
    let name = format!("fp-hang-{}", Uuid::new_v4().simple());
    let mut config =
        ClientConfig::new(ConnectionString::parse(&format!("{};Application Name={name}", db.ado())).unwrap());
    if one_connection {
        config.max_connections(1);
    }
    let client = Client::connect_with(config).await.unwrap();
    let ado = db.ado();
    let (observer, holder, babelfish) = tokio::join!(worker(&ado), db.connect(), db.is_babelfish());
    let mut holder = Caller::new(holder);
    let (stuck_key, free_key, busy_key) = (
        provisioned(&observer, "stuck").await,
        provisioned(&observer, "free").await,
        provisioned(&observer, "busy").await,
    );
    warm_up(&client).await;
    warm_renewal_connections(&client, &free_key, 3).await;

    // A's row is held from before A's first renewal: every attempt waits.
    let guard_a = client.guard(acquired(client.acquire(&stuck_key, STUCK).await.unwrap()));
    holder
        .batch(&format!(
            "BEGIN TRANSACTION; UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = N'{stuck_key}';"
        ))
        .await
        .unwrap();
    let guard_b = client.guard(acquired(client.acquire(&free_key, FREE).await.unwrap()));

    let (started, work_started) = oneshot::channel();
    let (finish, work_may_finish) = oneshot::channel::<()>();
    let busy = async {
        if !one_connection {
            return None;
        }
        let lease = acquired(client.acquire(&busy_key, Duration::from_secs(120)).await.unwrap());
        Some(
            client
                .fenced_transaction_without_guard(&lease, async move |_tx| {
                    let _ = started.send(());
                    let _ = work_may_finish.await;
                    Ok::<_, ()>(())
                })
                .await,
        )
    };
    let watch = async {
        // Both of A's attempts waiting on the row: from here on they hold
        // two renewal connections until A gives up. By two thirds of A's
        // lease at the latest, so that B's watch ends before A gives up.
        let stuck_by = Instant::now() + STUCK * 2 / 3;
        while waiting_for_a_lock(&db, &name, babelfish).await < 2 {
            assert!(
                Instant::now() < stuck_by,
                "A's renewal and its hedge never both waited on the row"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        if one_connection {
            work_started.await.unwrap();
        }
        let before = guard_b.lease().local_deadline();
        tokio::time::sleep(WATCH).await;
        let seen = (
            guard_b.lost_reason(),
            guard_b.lease().local_deadline(),
            guard_a.lost_reason(),
        );
        let _ = finish.send(());
        (before, seen)
    };
    let (busy, (before, (b_lost, b_deadline, a_lost_early))) = tokio::join!(busy, watch);
    if let Some(busy) = busy {
        assert!(matches!(busy, Ok(FencedOutcome::Committed(()))), "{busy:?}");
    }
    assert_eq!(a_lost_early, None, "A gave up before its lease would end");
    assert_eq!(b_lost, None, "B lost its lease while A's renewal hung");
    assert!(
        b_deadline > before + WATCH / 2,
        "B renewed fewer than twice in {WATCH:?} while A's renewal hung"
    );

    let a_lost = tokio::time::timeout(STUCK, guard_a.lost())
        .await
        .expect("A never gave its stuck lease up");
    assert!(matches!(a_lost, LostReason::Unconfirmed { .. }), "{a_lost:?}");
    holder.rollback().await;
    let (_, held, _, _) = state(&observer, &free_key).await;
    assert!(held, "B's lease ended");
    assert_eq!(guard_b.release().await.unwrap(), Release::Released);
    drop(guard_a);
    drop((client, observer, holder));
    db.drop().await;
}

/// Opens and warms `count` renewal connections at once, each renewing the
/// same lease on `key` (one after another, on the row's lock): later
/// renewals on them pay no sign-in and no first compile of Renew.
async fn warm_renewal_connections(client: &Client, key: &str, count: usize) {
    let lease = acquired(client.acquire(key, Duration::from_secs(30)).await.unwrap());
    let renewals = (0..count).map(|_| {
        let mut lease = lease.clone();
        async move { client.renew(&mut lease).await.unwrap() }
    });
    futures_util::future::join_all(renewals).await;
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
}
