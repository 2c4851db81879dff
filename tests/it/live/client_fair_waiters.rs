//! Waiters on one key are served in about the order they came: each joins
//! the key's queue (an application lock the engine grants in order) after
//! its first `Busy`, and only the head of the queue waits for the lease. A
//! head that froze leaves the waiters behind it polling, and a wait that
//! ends, however it ends, leaves nobody's queue held.
//!
//! Each schedule is forced: a waiter is started only once the one before it
//! is seen waiting for a lock on the server, and the holder lets go only
//! once every waiter is.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost::Connection;
use fencepost::client::{Acquire, Release};
use support::TestDatabase;
use support::lease::{acquired, provisioned, workers};
use support::signal::{named, queue, unique, until_blocked, until_signal_held, warm_guard, warm_signal_session};
use tokio::time::Instant;

/// A holder's lease long enough that no waiter could take it by its end.
const HELD: Duration = Duration::from_secs(600);
/// How long each waiter keeps the lease it was granted, in a guard: long
/// enough for its guard to raise its signal (10 ms in) and the next head to
/// block on it.
const WORK: Duration = Duration::from_millis(60);

/// Asks for the queue of `key` on `conn` in Exclusive mode, waiting at most
/// `wait`: whether it was granted. The lock is kept when granted.
async fn take_queue(conn: &mut Connection, key: &str, wait: Duration) -> bool {
    let sql = format!(
        "DECLARE @s int; EXEC @s = sp_getapplock @Resource = N'{}', @LockMode = N'Exclusive', \
         @LockOwner = N'Session', @LockTimeout = {}; \
         IF @s < 0 AND SERVERPROPERTY(N'Babelfish') IS NOT NULL \
         BEGIN BEGIN TRY THROW 50000, N'clear', 1; END TRY BEGIN CATCH END CATCH; END; SELECT @s;",
        queue(key),
        wait.as_millis()
    );
    let row = conn.simple_query(sql).await.unwrap().into_row().await.unwrap().unwrap();
    row.get::<i32, usize>(0).unwrap() >= 0
}

#[tokio::test]
async fn waiters_on_one_key_are_granted_it_in_the_order_they_came() {
    const TEST: &str = "waiters_on_one_key_are_granted_it_in_the_order_they_came";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    const WAITERS: usize = 4;
    let [holder] = workers(&db.ado()).await;
    let mut probe = db.connect().await;
    let key = provisioned(&holder, "fair").await;
    let mut waiters = Vec::new();
    for _ in 0..WAITERS {
        let name = unique("fair");
        let client = named(&db, &name, 1).await;
        warm_signal_session(&holder, &client).await;
        // Each waiter holds the key in a guard in turn, so its signal is
        // raised on time.
        warm_guard(&db, &client, &key).await;
        waiters.push((name, client));
    }
    let guard = holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap()));
    until_signal_held(&mut probe, &key).await;

    // Each waiter, once granted, records its turn, works, and releases.
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut waiting = Vec::new();
    for (i, (name, client)) in waiters.iter().enumerate() {
        let (client, key, order) = (client.clone(), key.clone(), order.clone());
        waiting.push(tokio::spawn(async move {
            let lease = acquired(
                client
                    .acquire_waiting(&key, HELD, Duration::from_secs(60))
                    .await
                    .unwrap(),
            );
            order.lock().unwrap().push(i);
            let guard = client.guard(lease);
            tokio::time::sleep(WORK).await;
            assert_eq!(guard.release().await.unwrap(), Release::Released);
        }));
        // The next one comes only once this one waits on the server.
        until_blocked(&db, name, 1).await;
    }
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    for task in waiting {
        tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .expect("every waiter is served")
            .unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(
        order,
        (0..WAITERS).collect::<Vec<_>>(),
        "granted out of the order they came"
    );
    drop((holder, waiters, probe));
    db.drop().await;
}

/// How many hand-overs the releaser-comes-back schedule is run for: one
/// lost race would be luck, the releaser winning a single one is a fault.
const ROUNDS: usize = 5;

#[tokio::test]
async fn a_holder_that_releases_and_waits_again_goes_behind_the_head_of_the_queue() {
    const TEST: &str = "a_holder_that_releases_and_waits_again_goes_behind_the_head_of_the_queue";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder] = workers(&db.ado()).await;
    let name = unique("comes-back");
    let waiter = named(&db, &name, 1).await;
    warm_signal_session(&holder, &waiter).await;
    let key = provisioned(&holder, "comes-back").await;
    let mut probe = db.connect().await;
    let mut lease = acquired(holder.acquire(&key, HELD).await.unwrap());
    for round in 0..ROUNDS {
        let guard = holder.guard(lease);
        until_signal_held(&mut probe, &key).await;
        // The waiter comes while the holder works, and waits at the head.
        let order = Arc::new(Mutex::new(Vec::new()));
        let waiting = {
            let (waiter, key, order) = (waiter.clone(), key.clone(), order.clone());
            tokio::spawn(async move {
                let lease = acquired(
                    waiter
                        .acquire_waiting(&key, HELD, Duration::from_secs(60))
                        .await
                        .unwrap(),
                );
                order.lock().unwrap().push("waiter");
                let guard = waiter.guard(lease);
                tokio::time::sleep(WORK).await;
                assert_eq!(guard.release().await.unwrap(), Release::Released);
            })
        };
        until_blocked(&db, &name, 1).await;
        // A job queue's worker: it releases, and at once waits again.
        assert_eq!(guard.release().await.unwrap(), Release::Released);
        lease = acquired(
            holder
                .acquire_waiting(&key, HELD, Duration::from_secs(60))
                .await
                .unwrap(),
        );
        order.lock().unwrap().push("holder");
        tokio::time::timeout(Duration::from_secs(60), waiting)
            .await
            .expect("the waiter is served")
            .unwrap();
        let order = order.lock().unwrap().clone();
        assert_eq!(
            order,
            ["waiter", "holder"],
            "round {round}: the releaser took the key back ahead of the waiter at the head of its queue"
        );
    }
    assert_eq!(holder.release(&lease).await.unwrap(), Release::Released);
    drop((holder, waiter, probe));
    db.drop().await;
}

#[tokio::test]
async fn a_frozen_head_of_the_queue_leaves_the_waiters_behind_it_polling() {
    const TEST: &str = "a_frozen_head_of_the_queue_leaves_the_waiters_behind_it_polling";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder] = workers(&db.ado()).await;
    let name = unique("frozen-head");
    let waiter = named(&db, &name, 1).await;
    warm_signal_session(&holder, &waiter).await;
    let key = provisioned(&holder, "frozen-head").await;
    // A head whose process froze: it holds the queue and never asks again.
    let mut frozen = db.connect().await;
    assert!(take_queue(&mut frozen, &key, Duration::from_secs(5)).await);
    let guard = holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap()));
    let mut probe = db.connect().await;
    until_signal_held(&mut probe, &key).await;

    let waiting = {
        let (waiter, key) = (waiter.clone(), key.clone());
        tokio::spawn(async move { waiter.acquire_waiting(&key, HELD, Duration::from_secs(20)).await })
    };
    until_blocked(&db, &name, 1).await;
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    let released = Instant::now();
    let lease = acquired(waiting.await.unwrap().unwrap());
    // Within about a pause (a second, plus its jitter and a round trip), as
    // a poll takes a lease, not the lease's end.
    let after = released.elapsed();
    assert!(after < Duration::from_millis(2500), "taken {after:?} after the release");
    assert_eq!(waiter.release(&lease).await.unwrap(), Release::Released);
    drop((holder, waiter, frozen, probe));
    db.drop().await;
}

#[tokio::test]
async fn a_waiting_acquire_dropped_at_the_head_of_the_queue_lets_go_of_it() {
    const TEST: &str = "a_waiting_acquire_dropped_at_the_head_of_the_queue_lets_go_of_it";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder] = workers(&db.ado()).await;
    let name = unique("dropped-head");
    let waiter = named(&db, &name, 1).await;
    warm_signal_session(&holder, &waiter).await;
    let key = provisioned(&holder, "dropped-head").await;
    let guard = holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap()));
    let mut probe = db.connect().await;
    until_signal_held(&mut probe, &key).await;

    let waiting = {
        let (waiter, key) = (waiter.clone(), key.clone());
        tokio::spawn(async move { waiter.acquire_waiting(&key, HELD, Duration::from_secs(60)).await })
    };
    // The head, blocked on the signal while it holds the queue.
    until_blocked(&db, &name, 1).await;
    let mut other = db.connect().await;
    assert!(
        !take_queue(&mut other, &key, Duration::from_millis(50)).await,
        "the waiter at the head did not hold its key's queue while it waited"
    );
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    // Its attempt in flight ends with its pause (a second); the queue must
    // be free then, not held by a session nobody uses.
    let dropped = Instant::now();
    assert!(
        take_queue(&mut other, &key, Duration::from_secs(5)).await,
        "the dropped waiter's queue was left held"
    );
    assert!(dropped.elapsed() < Duration::from_secs(3), "{:?}", dropped.elapsed());
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((holder, waiter, probe, other));
    db.drop().await;
}

#[tokio::test]
async fn a_wait_that_ends_at_its_deadline_lets_go_of_the_queue_at_once() {
    const TEST: &str = "a_wait_that_ends_at_its_deadline_lets_go_of_the_queue_at_once";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder] = workers(&db.ado()).await;
    let name = unique("deadline-head");
    let waiter = named(&db, &name, 1).await;
    warm_signal_session(&holder, &waiter).await;
    let key = provisioned(&holder, "deadline-head").await;
    let guard = holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap()));
    let mut probe = db.connect().await;
    until_signal_held(&mut probe, &key).await;

    let answer = waiter
        .acquire_waiting(&key, HELD, Duration::from_millis(2500))
        .await
        .unwrap();
    assert!(matches!(answer, Acquire::Busy { .. }), "{answer:?}");
    let ended = Instant::now();
    let mut other = db.connect().await;
    assert!(
        take_queue(&mut other, &key, Duration::from_secs(5)).await,
        "the waiter's queue was left held after its wait ended"
    );
    assert!(ended.elapsed() < Duration::from_millis(500), "{:?}", ended.elapsed());
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((holder, waiter, probe, other));
    db.drop().await;
}
