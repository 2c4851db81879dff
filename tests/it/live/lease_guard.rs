//! The lease guard on a live engine: it keeps a lease past its length, says
//! when a successor took over, releases when dropped, never queues a renewal
//! behind its own holder's fenced transaction, and retries a renewal that
//! hangs on another connection. The tests share one database: each works on
//! keys and tables of its own.

use crate::support;

use std::time::Duration;

use fencepost::client::{Acquire, FencedOutcome, LostReason, Release};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{acquired, provisioned, state, warm_up, worker, workers};
use support::proxy::{Cut, Proxy};
use tokio::time::Instant;
use uuid::Uuid;

/// Long enough to wait past in a test, with room for a renewal on a fresh
/// session (about half a second of compilation on Babelfish).
const LEASE: Duration = Duration::from_secs(3);
/// The lease of a guard whose fenced transaction holds the row for most of
/// it. The transaction's session is not reused after its commit, so the
/// renewal after it goes out on a new session, which on Babelfish pays about
/// half a second of first-call compilation: what is left of the lease after
/// the commit must leave room for that.
const TX_LEASE: Duration = Duration::from_secs(6);

#[tokio::test]
async fn a_guard_keeps_its_lease_past_its_length_and_release_gives_it_back() {
    const TEST: &str = "a_guard_keeps_its_lease_past_its_length_and_release_gives_it_back";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, observer] = workers(&db.ado()).await;
    let key = provisioned(&holder, "report").await;
    let lease = acquired(holder.acquire(&key, LEASE).await.unwrap());
    let first_deadline = lease.local_deadline();
    let guard = holder.guard(lease);
    let token = guard.token();

    tokio::time::sleep_until(first_deadline + LEASE / 2).await;
    assert_eq!(guard.lost_reason(), None);
    assert!(
        !token.is_cancelled(),
        "the token was cancelled while the lease was held"
    );
    assert!(
        guard.lease().local_deadline() > first_deadline,
        "no renewal was recorded"
    );
    let (generation, held, _, _) = state(&observer, &key).await;
    assert!(held, "the lease ended although the guard renews it");
    assert_eq!(generation, guard.lease().generation());

    assert_eq!(guard.release().await.unwrap(), Release::Released);
    assert!(token.is_cancelled(), "release() left the guard's token live");
    let (_, held, _, _) = state(&observer, &key).await;
    assert!(!held, "release left the lease held");
    drop((holder, observer));
    db.drop().await;
}

#[tokio::test]
async fn lost_resolves_when_a_successor_takes_over() {
    const TEST: &str = "lost_resolves_when_a_successor_takes_over";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, successor] = workers(&db.ado()).await;
    let key = provisioned(&holder, "report").await;
    let guard = holder.guard(acquired(holder.acquire(&key, LEASE).await.unwrap()));
    let token = guard.token();

    // An operator fences the holder out and a successor takes the lease.
    db.exec(&format!("EXEC fence_admin.ForceRelease @ResourceKey = N'{key}';"))
        .await;
    let taken_over = acquired(successor.acquire(&key, LEASE).await.unwrap());
    assert!(taken_over.generation() > guard.lease().generation());

    // The next renewal, at most a third of the lease away, answers Lost.
    let reason = tokio::time::timeout(LEASE, guard.lost())
        .await
        .expect("lost() never resolved after a successor took over");
    assert_eq!(reason, LostReason::Renewal);
    assert!(token.is_cancelled(), "the guard's token outlived the lease");
    // Nothing is left to give back, and the successor keeps its lease.
    assert_eq!(guard.release().await.unwrap(), Release::NotHolder);
    let (generation, held, _, _) = state(&successor, &key).await;
    assert!(held);
    assert_eq!(generation, taken_over.generation());
    drop((holder, successor));
    db.drop().await;
}

#[tokio::test]
async fn dropping_the_guard_releases_so_a_successor_acquires_at_once() {
    const TEST: &str = "dropping_the_guard_releases_so_a_successor_acquires_at_once";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, successor] = workers(&db.ado()).await;
    let key = provisioned(&holder, "report").await;
    // A lease far longer than the successor is willing to wait.
    let long = Duration::from_secs(600);
    let guard = holder.guard(acquired(holder.acquire(&key, long).await.unwrap()));
    let token = guard.token();

    drop(guard);
    assert!(token.is_cancelled(), "dropping the guard left its token live");
    // The release runs in the background: the successor asks every 50 ms,
    // and gets the lease long before the old one would have expired.
    let give_up = Instant::now() + Duration::from_secs(5);
    let mut attempts = 0;
    let answer = loop {
        attempts += 1;
        match successor.acquire(&key, LEASE).await.unwrap() {
            Acquire::Busy { .. } if Instant::now() < give_up => tokio::time::sleep(Duration::from_millis(50)).await,
            answer => break answer,
        }
    };
    assert!(
        matches!(answer, Acquire::Acquired(_)),
        "the dropped guard's lease was not released after {attempts} attempts: {answer:?}"
    );
    drop((holder, successor));
    db.drop().await;
}

/// A fenced transaction of the guard holds the fence row across the moment a
/// renewal is due, and for most of the lease: the renewal waits for the
/// commit instead of queueing on the row lock (where it would time out and
/// retry on fresh sessions until the lease was given up), then renews.
async fn a_renewal_waits_for_its_own_fenced_transaction(test: &str, connections: u32) {
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    // A table of this test's own: the database is shared.
    let report = format!("dbo.Report_{}", Uuid::new_v4().simple());
    db.exec(&format!(
        "CREATE TABLE {report} (Id int IDENTITY PRIMARY KEY, Writer nvarchar(20) NOT NULL);"
    ))
    .await;
    let insert = format!("INSERT INTO {report} (Writer) VALUES (N'A')");
    let mut config = ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap());
    config.max_connections(connections).allow_privileged_login(true);
    let holder = Client::connect_with(config).await.unwrap();
    let direct = db.ado();
    let ((), observer) = tokio::join!(warm_up(&holder), worker(&direct));
    let key = provisioned(&holder, "report").await;
    let lease = acquired(holder.acquire(&key, TX_LEASE).await.unwrap());
    let first_deadline = lease.local_deadline();
    let guard = holder.guard(lease);

    // Holds the row from now until 0.6 of the lease: past the first renewal
    // (due at a third) and past half of it.
    let commit_at = first_deadline - TX_LEASE * 2 / 5;
    let written = guard
        .fenced_transaction(async |tx| {
            tx.execute(&insert, &[]).await?;
            tokio::time::sleep_until(commit_at).await;
            Ok::<_, fencepost::client::Error>(())
        })
        .await
        .unwrap();
    assert!(matches!(written, FencedOutcome::Committed(())), "{written:?}");

    tokio::time::sleep_until(first_deadline + TX_LEASE / 2).await;
    assert_eq!(
        guard.lost_reason(),
        None,
        "a renewal behind its own holder was taken for a loss"
    );
    assert!(
        guard.lease().local_deadline() > first_deadline,
        "no renewal after the commit"
    );
    let (_, held, _, _) = state(&observer, &key).await;
    assert!(held, "the lease ended while the guard held it");
    let rows = db.query(&format!("SELECT COUNT(*) FROM {report}")).await;
    assert_eq!(rows[0].get::<i32, usize>(0), Some(1));
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((holder, observer));
    db.drop().await;
}

#[tokio::test]
async fn a_renewal_waits_for_its_own_fenced_transaction_on_a_pool() {
    a_renewal_waits_for_its_own_fenced_transaction("a_renewal_waits_for_its_own_fenced_transaction_on_a_pool", 4).await;
}

#[tokio::test]
async fn a_renewal_waits_for_its_own_fenced_transaction_on_one_connection() {
    a_renewal_waits_for_its_own_fenced_transaction(
        "a_renewal_waits_for_its_own_fenced_transaction_on_one_connection",
        1,
    )
    .await;
}

#[tokio::test]
async fn a_renewal_that_hangs_is_retried_on_another_connection_and_the_lease_is_kept() {
    const TEST: &str = "a_renewal_that_hangs_is_retried_on_another_connection_and_the_lease_is_kept";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    // A call timeout longer than the lease: only the guard's own bound on
    // each attempt can end the hung one in time.
    config.max_connections(2).call_timeout(Duration::from_secs(60));
    let holder = Client::connect_with(config).await.unwrap();
    // Warmed up as a service in steady use is: one connection for its calls
    // and one for renewals.
    let direct = db.ado();
    let ((), observer) = tokio::join!(warm_up(&holder), worker(&direct));
    let key = provisioned(&observer, "report").await;
    let length = Duration::from_secs(6);
    let lease = acquired(holder.acquire(&key, length).await.unwrap());
    let first_deadline = lease.local_deadline();

    // The first renewal goes out on a connection that then goes silent.
    // Only a renewal is cut: the guard's handover signal and its session's
    // idle checks go through the proxy too.
    proxy.cut_next_naming(Cut::Hang, "fence_api.Renew");
    let guard = holder.guard(lease);
    tokio::time::sleep_until(first_deadline + length / 4).await;

    assert_eq!(proxy.cuts(), 1, "the renewal never went out");
    assert_eq!(guard.lost_reason(), None, "one hung connection cost the lease");
    // The hung connection forwards nothing: a renewal confirmed past the
    // first deadline went out on another one.
    assert!(
        guard.lease().local_deadline() > first_deadline,
        "no renewal was confirmed"
    );
    let (_, held, _, _) = state(&observer, &key).await;
    assert!(held, "the lease ended although another connection could renew it");
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((holder, observer));
    db.drop().await;
}

/// A guard's fenced transaction still open when the lease would end: the
/// renewal that waited for its row gives up a margin before the end, so
/// `lost()` says so while the lease is still the holder's on the server,
/// and past the lease's local deadline the commit is refused and nothing
/// the work wrote lands. A successor takes the key once it expires.
#[tokio::test]
async fn a_fenced_transaction_open_at_the_lease_end_is_cut_and_the_guard_reports_the_loss_first() {
    const TEST: &str = "a_fenced_transaction_open_at_the_lease_end_is_cut_and_the_guard_reports_the_loss_first";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let report = format!("dbo.Report_{}", Uuid::new_v4().simple());
    db.exec(&format!(
        "CREATE TABLE {report} (Id int IDENTITY PRIMARY KEY, Writer nvarchar(20) NOT NULL);"
    ))
    .await;
    let [holder, successor] = workers(&db.ado()).await;
    let key = provisioned(&holder, "report").await;
    let lease = acquired(holder.acquire(&key, LEASE).await.unwrap());
    let (deadline, generation) = (lease.local_deadline(), lease.generation());
    let guard = holder.guard(lease);
    let fencepost::client::BeginFenced::Holding(mut tx) = guard.begin_fenced().await.unwrap() else {
        panic!("a fresh lease's fenced transaction was refused");
    };
    tx.execute(&format!("INSERT INTO {report} (Writer) VALUES (N'late')"), &[])
        .await
        .unwrap();

    // The work goes on holding the row; the guard says the lease is lost
    // before it ends.
    let reason = tokio::time::timeout_at(deadline + LEASE, guard.lost())
        .await
        .expect("lost() did not resolve while the transaction held the row");
    assert!(
        Instant::now() < deadline,
        "lost() resolved only after the lease's local deadline"
    );
    assert!(matches!(reason, LostReason::Unconfirmed { .. }), "{reason:?}");

    tokio::time::sleep_until(deadline).await;
    let committed = tx.commit().await;
    assert!(
        matches!(committed, Err(fencepost::client::Error::TransactionAborted { .. })),
        "a commit past the lease's deadline: {committed:?}"
    );
    let rows = db.query(&format!("SELECT COUNT(*) FROM {report}")).await;
    assert_eq!(
        rows[0].get::<i32, usize>(0),
        Some(0),
        "the cut transaction's row landed"
    );
    support::lease::wait_until_expired(&successor, &key).await;
    let taken = acquired(successor.acquire(&key, LEASE).await.unwrap());
    assert_eq!(taken.generation(), generation + 1);
    drop((guard, holder, successor));
    db.drop().await;
}
