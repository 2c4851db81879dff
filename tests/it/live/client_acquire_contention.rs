//! Contention is never an error. While a holder's fenced transaction keeps
//! the fence row locked past the 5 s `Acquire` waits for it, a plain
//! `acquire` and `run_fenced` answer `Busy` at that bound, and a waiter
//! goes on waiting and takes the lease once the holder commits and
//! releases. So does a client whose database still holds an earlier
//! `Acquire`, which answered such a wait with error 50129 or with a `Busy`
//! whose expiry is NULL.

use crate::support;

use std::convert::Infallible;
use std::time::Duration;

use fencepost::client::{Acquire, BeginFenced, Fenced, Release};
use fencepost::deploy::Sources;
use support::TestDatabase;
use support::lease::{acquired, provisioned, unwarmed, workers};
use tokio::time::Instant;
use uuid::Uuid;

/// The holder's lease: longer than the test, so only its release frees the
/// key.
const HELD: Duration = Duration::from_secs(120);
/// The lease the other callers ask for, and how long the waiter waits.
const LEASE: Duration = Duration::from_secs(30);
/// Acquire's bound on the fence row (5 s), and room for a new session's
/// sign-in and first compiles on a busy engine (a connection whose call
/// ended in Babelfish's lock time-out is not reused), yet well short of the
/// 30 s a caller that retried the time-out would take: a call still running
/// after this was not answered at the bound.
const AT_THE_BOUND: Duration = Duration::from_secs(20);

/// A work that must never run: each of its callers answers before a lease
/// is held.
async fn never_run() -> Result<String, Infallible> {
    panic!("the work ran without the lease")
}

#[tokio::test]
async fn a_holders_long_fenced_transaction_is_busy_to_callers_and_its_waiter_takes_the_lease_after_it() {
    const TEST: &str = "a_holders_long_fenced_transaction_is_busy_to_callers_and_its_waiter_takes_the_lease_after_it";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, waiter, caller] = workers(&db.ado()).await;
    let key = provisioned(&holder, "contended").await;
    let lease = acquired(holder.acquire(&key, HELD).await.unwrap());
    let generation = lease.generation();
    let guard = holder.guard(lease);
    let BeginFenced::Holding(tx) = guard.begin_fenced().await.unwrap() else {
        panic!("a fresh lease's fenced transaction was refused");
    };

    let sent = waiter.requests_sent();
    let waiting = tokio::spawn({
        let (waiter, key) = (waiter.clone(), key.clone());
        async move { waiter.acquire_waiting(&key, LEASE, LEASE).await }
    });

    // The transaction stays open until each call below has answered: they
    // are answered at Acquire's bound on the row, not when it ends.
    let plain = tokio::time::timeout(AT_THE_BOUND, caller.acquire(&key, LEASE))
        .await
        .expect("a plain acquire was not answered while the holder's transaction held the row");
    assert!(matches!(plain, Ok(Acquire::Busy { .. })), "{plain:?}");
    let run = tokio::time::timeout(AT_THE_BOUND, caller.run_fenced(&key, LEASE, |_| never_run()))
        .await
        .expect("run_fenced was not answered while the holder's transaction held the row");
    assert!(matches!(run, Ok(Fenced::Busy { .. })), "{run:?}");
    // The waiter has asked again after its first attempt ended at the
    // bound, and is still waiting.
    let give_up = Instant::now() + AT_THE_BOUND;
    while waiter.requests_sent() < sent + 2 {
        assert!(Instant::now() < give_up, "the waiter never asked twice");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !waiting.is_finished(),
        "the waiter stopped waiting: {:?}",
        waiting.await
    );

    tx.commit().await.unwrap();
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    let taken = acquired(waiting.await.unwrap().unwrap());
    assert_eq!(taken.generation(), generation + 1);
    assert_eq!(waiter.release(&taken).await.unwrap(), Release::Released);
    drop((holder, waiter, caller));
    db.drop().await;
}

/// What an earlier `Acquire` answered after it gave up waiting for the
/// fence row on SQL Server: error 50129 when the committed row could not be
/// read without waiting, and `Busy` with a NULL expiry when the committed
/// row had no holder. The key's prefix picks the answer.
const EARLIER_ACQUIRE: &str = "\
CREATE PROCEDURE fence_api.Acquire
    @ResourceKey  nvarchar(4000),
    @Owner        uniqueidentifier,
    @LeaseSeconds int
AS
BEGIN
    SET NOCOUNT ON;
    IF @ResourceKey LIKE N'unread:%'
        THROW 50129, N'The fence row is held by another session''s open transaction: waited 5 seconds for it.', 1;
    SELECT CAST(N'Busy' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS Generation,
           CAST(NULL AS datetime2(7)) AS LeaseUntilUtc, SYSUTCDATETIME() AS ServerUtc;
END;
";

#[tokio::test]
async fn an_earlier_acquires_50129_and_busy_without_an_expiry_are_busy_with_nothing_left() {
    const TEST: &str = "an_earlier_acquires_50129_and_busy_without_an_expiry_are_busy_with_nothing_left";
    let Some(db) = TestDatabase::new(TEST).await else {
        return;
    };
    let earlier = Sources::embedded()
        .unwrap()
        .with_procedure("fence_api.Acquire.sql", EARLIER_ACQUIRE)
        .unwrap();
    db.migrate(&earlier).await.expect("deploy with the earlier Acquire");
    let client = unwarmed(&db.ado()).await;

    for key in ["unread:a", "no-holder:a"] {
        match client.acquire(key, LEASE).await {
            Ok(Acquire::Busy { remaining, .. }) => assert_eq!(remaining, Duration::ZERO, "{key}"),
            other => panic!("{key}: {other:?}"),
        }
        let once = client.acquire_as(key, Uuid::new_v4(), LEASE).await;
        assert!(matches!(once, Ok(Acquire::Busy { .. })), "{key}: {once:?}");
        let run = client.run_fenced(key, LEASE, |_| never_run()).await;
        assert!(matches!(run, Ok(Fenced::Busy { .. })), "{key}: {run:?}");
    }
    // A waiter keeps waiting to its deadline, then answers the last Busy.
    let wait = Duration::from_secs(2);
    let started = Instant::now();
    let waited = client.acquire_waiting("unread:b", LEASE, wait).await;
    assert!(matches!(waited, Ok(Acquire::Busy { .. })), "{waited:?}");
    assert!(started.elapsed() >= wait, "gave up after {:?}", started.elapsed());
    drop(client);
    db.drop().await;
}
