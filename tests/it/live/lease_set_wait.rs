//! A lease set acquired with a deadline on a live engine: the waiter is
//! woken by the handover signal of the last busy key let go, polls holders
//! that raise no signal until their leases end, and gives up at once on a
//! key not provisioned. The tests share one database: each works on keys of
//! its own.
//!
//! Each schedule is forced: the waiter is known to be blocked on a signal
//! (its session waits for a lock) before a holder lets go.

use crate::support;

use std::time::Duration;

use fencepost::Client;
use fencepost::client::{AcquireSet, KeyRefusal, LeaseSet, Release};
use support::TestDatabase;
use support::lease::{acquired, provisioned};
use support::signal::{named, signal_held, unique, until_blocked, until_signal_held};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A holder's lease no poll could take before its holder lets go: a set
/// waiter asks at most every second, so one that takes the set within
/// [`PROMPT`] of the last release was woken.
const HELD: Duration = Duration::from_secs(600);
/// Well under the second a poll waits, and well over a round trip on a busy
/// machine.
const PROMPT: Duration = Duration::from_millis(400);
/// The lease of a holder without a guard: short, so the test waits it out.
const SHORT: Duration = Duration::from_secs(3);

fn held(answer: AcquireSet) -> LeaseSet {
    match answer {
        AcquireSet::Acquired(set) => set,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

/// Starts `waiter` waiting up to `wait` for every key of `keys`; answers the
/// acquire and the instant it came back.
fn wait_for_set(
    waiter: &Client,
    keys: &[String],
    length: Duration,
    wait: Duration,
) -> JoinHandle<(AcquireSet, Instant)> {
    let (waiter, keys) = (waiter.clone(), keys.to_vec());
    tokio::spawn(async move {
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let answer = waiter.acquire_set_waiting(&keys, length, wait).await.unwrap();
        (answer, Instant::now())
    })
}

#[tokio::test]
async fn a_set_waiter_is_woken_when_the_last_busy_key_is_let_go() {
    const TEST: &str = "a_set_waiter_is_woken_when_the_last_busy_key_is_let_go";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let waiter_name = unique("set-waiter");
    let (first_name, second_name) = (unique("first-holder"), unique("second-holder"));
    let (first_holder, second_holder, waiter) = tokio::join!(
        named(&db, &first_name, 1),
        named(&db, &second_name, 1),
        named(&db, &waiter_name, 1)
    );
    let mut probe = db.connect().await;
    let keys = [
        provisioned(&first_holder, "set-wait").await,
        provisioned(&first_holder, "set-wait").await,
        provisioned(&first_holder, "set-wait").await,
    ];
    let first = first_holder.guard(acquired(first_holder.acquire(&keys[0], HELD).await.unwrap()));
    let second = second_holder.guard(acquired(second_holder.acquire(&keys[1], HELD).await.unwrap()));
    until_signal_held(&mut probe, &keys[0]).await;
    until_signal_held(&mut probe, &keys[1]).await;

    let waiting = wait_for_set(&waiter, &keys, HELD, Duration::from_secs(30));
    until_blocked(&db, &waiter_name, 1).await;
    assert_eq!(first.release().await.unwrap(), Release::Released);
    // One key is still held: the set cannot be granted, and the waiter
    // goes on waiting, blocked on the other key's signal.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiting.is_finished(),
        "the waiter stopped waiting while a key was held"
    );
    until_blocked(&db, &waiter_name, 1).await;
    assert_eq!(second.release().await.unwrap(), Release::Released);
    let released = Instant::now();

    let (answer, taken) = waiting.await.unwrap();
    let set = held(answer);
    let after = taken.saturating_duration_since(released);
    assert!(
        after < PROMPT,
        "the waiter took the set {after:?} after the last release"
    );
    assert_eq!(set.leases().len(), keys.len());
    let released = waiter.release_set(&set).await.unwrap();
    assert!(released.iter().all(|(_, r)| *r == Release::Released), "{released:?}");
    drop((first_holder, second_holder, waiter));
    db.drop().await;
}

#[tokio::test]
async fn a_set_waiter_behind_holders_without_a_signal_takes_the_set_when_their_leases_end() {
    const TEST: &str = "a_set_waiter_behind_holders_without_a_signal_takes_the_set_when_their_leases_end";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let (holder_name, waiter_name) = (unique("plain-holder"), unique("set-poller"));
    let (holder, waiter) = tokio::join!(named(&db, &holder_name, 1), named(&db, &waiter_name, 1));
    let keys = [
        provisioned(&holder, "set-poll").await,
        provisioned(&holder, "set-poll").await,
    ];
    // Plain leases, no guard: no signal is ever raised for them.
    let first = acquired(holder.acquire(&keys[0], SHORT).await.unwrap());
    let second = acquired(holder.acquire(&keys[1], SHORT).await.unwrap());

    let sent = waiter.requests_sent();
    let keys_ref: Vec<&str> = keys.iter().map(String::as_str).collect();
    let set = held(
        waiter
            .acquire_set_waiting(&keys_ref, SHORT, Duration::from_secs(30))
            .await
            .unwrap(),
    );
    for lease in set.leases() {
        let before = if lease.key() == keys[0] { &first } else { &second };
        assert!(
            lease.generation() > before.generation(),
            "{}: generation {} not above the holder's {}",
            lease.key(),
            lease.generation(),
            before.generation()
        );
        assert!(
            lease.until() - lease.length() >= before.until(),
            "{} was taken before the holder's lease ended",
            lease.key()
        );
    }
    // About one and a half requests a second of the three-second lease (an
    // attempt a second, and a look at the signals every few); a loop would
    // send hundreds.
    let requests = waiter.requests_sent() - sent;
    assert!(requests <= 10, "{requests} requests while the leases ran out");
    let released = waiter.release_set(&set).await.unwrap();
    assert!(released.iter().all(|(_, r)| *r == Release::Released), "{released:?}");
    drop((holder, waiter));
    db.drop().await;
}

#[tokio::test]
async fn a_set_waiter_gives_up_at_once_on_a_key_not_provisioned_and_at_its_deadline_when_busy() {
    const TEST: &str = "a_set_waiter_gives_up_at_once_on_a_key_not_provisioned_and_at_its_deadline_when_busy";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let (holder_name, waiter_name) = (unique("busy-holder"), unique("set-deadline"));
    let (holder, waiter) = tokio::join!(named(&db, &holder_name, 1), named(&db, &waiter_name, 1));
    let busy = provisioned(&holder, "set-deadline").await;
    let missing = unique("never-provisioned");
    let lease = acquired(holder.acquire(&busy, HELD).await.unwrap());

    let started = Instant::now();
    let answer = waiter
        .acquire_set_waiting(&[busy.as_str(), missing.as_str()], HELD, Duration::from_secs(30))
        .await
        .unwrap();
    let AcquireSet::Refused(refusals) = answer else {
        panic!("expected Refused, got {answer:?}");
    };
    assert!(
        refusals.contains(&(missing.clone(), KeyRefusal::NotProvisioned)),
        "{refusals:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited {:?} for a key nobody can provision by waiting",
        started.elapsed()
    );

    let started = Instant::now();
    let answer = waiter
        .acquire_set_waiting(&[busy.as_str()], HELD, Duration::from_millis(1500))
        .await
        .unwrap();
    let waited = started.elapsed();
    let AcquireSet::Refused(refusals) = answer else {
        panic!("expected Refused, got {answer:?}");
    };
    assert!(
        matches!(refusals[..], [(ref key, KeyRefusal::Busy { .. })] if *key == busy),
        "{refusals:?}"
    );
    assert!(
        waited >= Duration::from_millis(1500),
        "gave up after {waited:?}, before its deadline"
    );
    assert!(waited < Duration::from_secs(10), "waited {waited:?} past its deadline");
    assert_eq!(holder.release(&lease).await.unwrap(), Release::Released);
    drop((holder, waiter));
    db.drop().await;
}

/// Many busy keys whose guards hold their signals: each wait on the signals
/// ends by the pause's end however many keys are left (each refused lock
/// request is one Babelfish must clear, and five uncleared on one session
/// end the whole server), the waiter gives up at its deadline, and the
/// engine still answers.
#[tokio::test]
async fn a_set_waiter_behind_many_signalled_keys_gives_up_at_its_deadline_and_the_engine_stays_up() {
    const TEST: &str = "a_set_waiter_behind_many_signalled_keys_gives_up_at_its_deadline_and_the_engine_stays_up";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let (holder_name, waiter_name) = (unique("many-holder"), unique("many-waiter"));
    let (holder, waiter) = tokio::join!(named(&db, &holder_name, 1), named(&db, &waiter_name, 1));
    let mut probe = db.connect().await;
    let mut keys = Vec::new();
    let mut guards = Vec::new();
    for _ in 0..6 {
        let key = provisioned(&holder, "set-many").await;
        guards.push(holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap())));
        keys.push(key);
    }
    for key in &keys {
        until_signal_held(&mut probe, key).await;
    }

    let wait = Duration::from_secs(3);
    let started = Instant::now();
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let answer = waiter.acquire_set_waiting(&refs, HELD, wait).await.unwrap();
    let waited = started.elapsed();
    let AcquireSet::Refused(refusals) = answer else {
        panic!("expected Refused, got {answer:?}");
    };
    assert!(
        refusals.iter().all(|(_, r)| matches!(r, KeyRefusal::Busy { .. })),
        "{refusals:?}"
    );
    assert!(waited >= wait, "gave up after {waited:?}, before its deadline");
    assert!(
        waited < wait + Duration::from_secs(2),
        "the waits on the signals ran {waited:?}, well past the deadline"
    );
    // The engine is still up: a fresh session answers.
    assert!(signal_held(&mut db.connect().await, &keys[0]).await);
    for guard in guards {
        assert_eq!(guard.release().await.unwrap(), Release::Released);
    }
    drop((holder, waiter));
    db.drop().await;
}
