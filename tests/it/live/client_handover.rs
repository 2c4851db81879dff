//! The handover signal on a live engine: a waiter blocked behind a guard is
//! woken by the guard's release at once, one behind a holder whose session
//! died or who is frozen takes the lease only when it ends and without a busy
//! loop, and one behind a holder without a guard still takes it by polling.
//! The tests share one database: each works on keys of its own.
//!
//! Each schedule is forced: the waiter is known to be blocked (it has sent
//! its signalled attempt, and the signal is known held) before the holder
//! lets go.

use crate::support;

use std::time::Duration;

use fencepost::client::{Acquire, Lease, Release};
use fencepost::{Client, Connection};
use support::TestDatabase;
use support::lease::{acquired, provisioned, workers};
use support::signal::{signal, signal_held, until_signal_held};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A holder's lease long enough that no poll could take it before the
/// holder lets go: a waiter polls at most every second, so one that takes it
/// within [`PROMPT`] of the release was woken.
const HELD: Duration = Duration::from_secs(600);
/// Well under the second a poll waits, and well over a round trip on a busy
/// machine.
const PROMPT: Duration = Duration::from_millis(400);
/// The lease of a holder that dies or freezes: short, so the test waits it out.
const SHORT: Duration = Duration::from_secs(3);

/// Takes the signal of `key` on `conn` as a guard would, for a holder
/// simulated by hand.
async fn raise_by_hand(conn: &mut Connection, key: &str) {
    let sql = format!(
        "DECLARE @s int; EXEC @s = sp_getapplock @Resource = N'{}', @LockMode = N'Exclusive', \
         @LockOwner = N'Session', @LockTimeout = 5000; SELECT @s;",
        signal(key)
    );
    let row = conn.simple_query(sql).await.unwrap().into_row().await.unwrap().unwrap();
    assert!(
        matches!(row.get::<i32, usize>(0), Some(0 | 1)),
        "the signal was not granted"
    );
}

/// Starts `waiter` waiting up to `wait` for `key`; answers the acquire and
/// the instant it came back.
fn wait_for(waiter: &Client, key: &str, length: Duration, wait: Duration) -> JoinHandle<(Acquire, Instant)> {
    let (waiter, key) = (waiter.clone(), key.to_string());
    tokio::spawn(async move {
        let answer = waiter.acquire_waiting(&key, length, wait).await.unwrap();
        (answer, Instant::now())
    })
}

/// Waits until `client` has sent `count` more requests than `since`.
async fn until_sent(client: &Client, since: u64, count: u64) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while client.requests_sent() < since + count {
        assert!(Instant::now() < give_up, "the waiter never sent {count} requests");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One waiting attempt that blocks on a signal, so the waiter's signal
/// session has compiled `Acquire` (about half a second on a new Babelfish
/// session) before a timed step needs it.
async fn warm_signal_session(holder: &Client, waiter: &Client) {
    let key = provisioned(holder, "warm-signal").await;
    let lease = acquired(holder.acquire(&key, HELD).await.unwrap());
    let answer = waiter
        .acquire_waiting(&key, HELD, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(matches!(answer, Acquire::Busy { .. }), "{answer:?}");
    assert_eq!(holder.release(&lease).await.unwrap(), Release::Released);
}

/// The server-clock instant `lease` began at: its expiry less its length.
fn began(lease: &Lease) -> time::OffsetDateTime {
    lease.until() - lease.length()
}

#[tokio::test]
async fn a_waiter_behind_a_guard_that_releases_early_is_woken_by_its_signal() {
    const TEST: &str = "a_waiter_behind_a_guard_that_releases_early_is_woken_by_its_signal";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, waiter] = workers(&db.ado()).await;
    let mut probe = db.connect().await;
    warm_signal_session(&holder, &waiter).await;
    let key = provisioned(&holder, "report").await;
    let guard = holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap()));
    until_signal_held(&mut probe, &key).await;

    let sent = waiter.requests_sent();
    let waiting = wait_for(&waiter, &key, HELD, Duration::from_secs(20));
    // A Busy, then the attempt that blocks on the signal (counted as it
    // starts).
    until_sent(&waiter, sent, 2).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "the waiter stopped waiting for a held lease");
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    let released = Instant::now();

    let (answer, taken) = waiting.await.unwrap();
    let lease = acquired(answer);
    let after = taken.saturating_duration_since(released);
    assert!(
        after < PROMPT,
        "the waiter took the released lease {after:?} after the release"
    );
    let requests = waiter.requests_sent() - sent;
    assert_eq!(requests, 2, "a Busy and the signalled attempt that took it");
    assert_eq!(waiter.release(&lease).await.unwrap(), Release::Released);
    drop((holder, waiter));
    db.drop().await;
}

#[tokio::test]
async fn a_waiter_woken_by_a_dead_holders_session_takes_the_lease_only_at_its_end_without_a_busy_loop() {
    const TEST: &str = "a_waiter_woken_by_a_dead_holders_session_takes_the_lease_only_at_its_end_without_a_busy_loop";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, waiter] = workers(&db.ado()).await;
    warm_signal_session(&holder, &waiter).await;
    let key = provisioned(&holder, "report").await;
    // A guard's holder as the server sees it: the lease, and the signal on a
    // session of its own, which then dies with its process.
    let lease = acquired(holder.acquire(&key, SHORT).await.unwrap());
    let mut holders_session = db.connect().await;
    raise_by_hand(&mut holders_session, &key).await;

    let sent = waiter.requests_sent();
    let waiting = wait_for(&waiter, &key, SHORT, Duration::from_secs(20));
    until_sent(&waiter, sent, 2).await;
    drop(holders_session);

    let (answer, _) = waiting.await.unwrap();
    let taken = acquired(answer);
    assert!(
        began(&taken) >= lease.until(),
        "taken at {} before the dead holder's lease ended at {}",
        began(&taken),
        lease.until()
    );
    // The wake and up to three settling steps of 14 ms for a signal that
    // never comes, then one poll a second of the three-second lease, as
    // polling sends, and a few shorter ones as its end nears (the server's
    // clock and this one's): about a dozen. A loop on the freed signal
    // would send hundreds.
    let requests = waiter.requests_sent() - sent;
    assert!(requests <= 12, "{requests} requests while the lease ran out");
    assert_eq!(waiter.release(&taken).await.unwrap(), Release::Released);
    drop((holder, waiter));
    db.drop().await;
}

#[tokio::test]
async fn a_frozen_holders_signal_never_lets_a_waiter_in_before_its_lease_ends() {
    const TEST: &str = "a_frozen_holders_signal_never_lets_a_waiter_in_before_its_lease_ends";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, waiter] = workers(&db.ado()).await;
    warm_signal_session(&holder, &waiter).await;
    let key = provisioned(&holder, "report").await;
    // Frozen: its signal stays raised, and nothing renews its lease.
    let lease = acquired(holder.acquire(&key, SHORT).await.unwrap());
    let mut holders_session = db.connect().await;
    raise_by_hand(&mut holders_session, &key).await;

    let sent = waiter.requests_sent();
    let (answer, _) = wait_for(&waiter, &key, SHORT, Duration::from_secs(20)).await.unwrap();
    let taken = acquired(answer);
    assert!(
        began(&taken) >= lease.until(),
        "taken at {} before the frozen holder's lease ended at {}",
        began(&taken),
        lease.until()
    );
    // No later than polling would: the waits on the signal end with the
    // pauses a poll would have slept.
    let late = began(&taken) - lease.until();
    assert!(
        late < time::Duration::milliseconds(1500),
        "taken {late} after the lease ended"
    );
    let requests = waiter.requests_sent() - sent;
    assert!(requests <= 8, "{requests} requests while the lease ran out");
    assert!(
        signal_held(&mut db.connect().await, &key).await,
        "the frozen holder's signal is gone"
    );
    assert_eq!(waiter.release(&taken).await.unwrap(), Release::Released);
    drop((holder, waiter, holders_session));
    db.drop().await;
}

#[tokio::test]
async fn a_waiter_behind_a_holder_without_a_guard_still_takes_the_lease_by_polling() {
    const TEST: &str = "a_waiter_behind_a_holder_without_a_guard_still_takes_the_lease_by_polling";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, waiter] = workers(&db.ado()).await;
    let mut probe = db.connect().await;
    let key = provisioned(&holder, "report").await;
    let lease = acquired(holder.acquire(&key, HELD).await.unwrap());
    assert!(!signal_held(&mut probe, &key).await, "a plain acquire raises no signal");

    let sent = waiter.requests_sent();
    let waiting = wait_for(&waiter, &key, HELD, Duration::from_secs(20));
    // A Busy, and the attempt that found no signal to wait on.
    until_sent(&waiter, sent, 2).await;
    let asked = Instant::now();
    assert_eq!(holder.release(&lease).await.unwrap(), Release::Released);

    let (answer, taken) = waiting.await.unwrap();
    let lease = acquired(answer);
    let after = taken.saturating_duration_since(asked);
    assert!(after < Duration::from_millis(2500), "taken {after:?} after the release");
    let requests = waiter.requests_sent() - sent;
    assert!(requests <= 4, "{requests} requests for one second of polling");
    assert_eq!(waiter.release(&lease).await.unwrap(), Release::Released);
    drop((holder, waiter));
    db.drop().await;
}

#[tokio::test]
async fn a_waiter_refused_by_the_signal_pause_after_pause_leaves_the_engine_up() {
    const TEST: &str = "a_waiter_refused_by_the_signal_pause_after_pause_leaves_the_engine_up";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, waiter] = workers(&db.ado()).await;
    // Opened before the waits: a server that ended and restarted would have
    // closed it.
    let mut probe = db.connect().await;
    warm_signal_session(&holder, &waiter).await;
    let key = provisioned(&holder, "long-tenure").await;
    let guard = holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap()));
    until_signal_held(&mut probe, &key).await;

    // Each pause (at most a second) is one wait on the signal that the
    // engine refuses at its end; Babelfish 4.2 ended the whole server at a
    // session's fifth refused application lock request.
    let sent = waiter.requests_sent();
    let answer = waiter
        .acquire_waiting(&key, HELD, Duration::from_secs(9))
        .await
        .expect("a waiter behind a held lease waits, whatever the engine refused");
    assert!(matches!(answer, Acquire::Busy { .. }), "{answer:?}");
    let attempts = waiter.requests_sent() - sent;
    assert!(
        attempts >= 7,
        "the waiter made only {attempts} attempts: fewer than six refused waits on one session prove nothing"
    );
    let alive = probe
        .simple_query("SELECT 1;")
        .await
        .expect("a connection opened before the waits still answers")
        .into_row()
        .await
        .expect("a connection opened before the waits still answers");
    assert_eq!(alive.and_then(|row| row.get::<i32, usize>(0)), Some(1));
    assert_eq!(
        guard.lost_reason(),
        None,
        "the holder lost its lease while the waiter waited"
    );
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((holder, waiter));
    db.drop().await;
}

/// How long the holder's process stays frozen right after its last call
/// answered: far longer than a poll's pause.
const FROZEN: Duration = Duration::from_secs(3);

/// How a guard gives its lease back.
#[derive(Clone, Copy, Debug)]
enum LastCall {
    Release,
    PublishAndRelease,
}

#[tokio::test]
async fn a_guards_release_lets_go_of_its_signal_before_it_answers_so_a_holder_frozen_right_after_still_hands_over() {
    handover_from_a_holder_frozen_after(
        "a_guards_release_lets_go_of_its_signal_before_it_answers_so_a_holder_frozen_right_after_still_hands_over",
        LastCall::Release,
    )
    .await;
}

#[tokio::test]
async fn a_guards_publish_and_release_lets_go_of_its_signal_before_it_answers_so_a_holder_frozen_right_after_still_hands_over()
 {
    handover_from_a_holder_frozen_after(
        "a_guards_publish_and_release_lets_go_of_its_signal_before_it_answers_so_a_holder_frozen_right_after_still_hands_over",
        LastCall::PublishAndRelease,
    )
    .await;
}

/// A waiter blocked on a guard's signal, and the guard's `last` call: once it
/// answered, nothing of the holder's client runs any more, as in a process
/// paused right after it. The waiter must still take the lease at once.
async fn handover_from_a_holder_frozen_after(test: &str, last: LastCall) {
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let [waiter] = workers(&db.ado()).await;
    let mut probe = db.connect().await;
    let key = provisioned(&waiter, "report").await;
    let (held_tx, held_rx) = tokio::sync::oneshot::channel();
    let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
    let (ended_tx, ended_rx) = tokio::sync::oneshot::channel();
    // The holder on a runtime of its own, on a thread of its own, which
    // sleeps once the last call answered: no background task of its client,
    // and no further request, runs after it.
    let ado = db.ado();
    let holder_key = key.clone();
    let holder = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = runtime.block_on(async move {
            let [holder] = workers(&ado).await;
            let guard = holder.guard(acquired(holder.acquire(&holder_key, HELD).await.unwrap()));
            held_tx.send(()).unwrap();
            go_rx.await.unwrap();
            let ended = match last {
                LastCall::Release => format!("{:?}", guard.release().await.unwrap()),
                LastCall::PublishAndRelease => format!(
                    "{:?}",
                    guard.publish_and_release(uuid::Uuid::new_v4(), "report").await.unwrap()
                ),
            };
            ended_tx.send((ended, Instant::now())).unwrap();
            holder
        });
        std::thread::sleep(FROZEN);
        drop((client, runtime));
    });
    held_rx.await.unwrap();
    until_signal_held(&mut probe, &key).await;
    let sent = waiter.requests_sent();
    let waiting = wait_for(&waiter, &key, HELD, Duration::from_secs(20));
    until_sent(&waiter, sent, 2).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "the waiter stopped waiting for a held lease");
    go_tx.send(()).unwrap();
    let (ended, ended_at) = ended_rx.await.unwrap();
    let expected = match last {
        LastCall::Release => "Released",
        LastCall::PublishAndRelease => "Published",
    };
    assert_eq!(ended, expected);

    let (answer, taken) = waiting.await.unwrap();
    let lease = acquired(answer);
    let after = taken.saturating_duration_since(ended_at);
    assert!(
        after < PROMPT,
        "after {last:?}, the waiter took the lease {after:?} later, while its holder was frozen: \
         the signal was let go of only by a request after the last call"
    );
    assert_eq!(waiter.release(&lease).await.unwrap(), Release::Released);
    tokio::task::spawn_blocking(move || holder.join().unwrap())
        .await
        .unwrap();
    drop(waiter);
    db.drop().await;
}
