//! Every guard's handover signal on a few sessions its client shares: a
//! client holding more leases than it once had signal sessions raises every
//! signal and wakes every waiter, on the server it has a few sessions
//! however many leases it holds, a killed signal session leaves its waiters
//! to poll (never to a grant before the holder let go) and its signals are
//! raised again, and a signal a predecessor still holds is asked for again,
//! without waiting on the session, until it is free.
//!
//! Each schedule is forced: a waiter is known to be blocked on its signal
//! (the server lists it waiting for a lock) before its holder lets go.

use crate::support;

use std::time::Duration;

use fencepost::Client;
use fencepost::client::{Acquire, Release};
use support::TestDatabase;
use support::lease::{acquired, provisioned};
use support::signal::{named, sessions_of, signal, signal_holders, unique, until_blocked, until_signal_held};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A lease no poll could take before its holder lets go: a waiter polls at
/// most every second, so one that takes it within [`PROMPT`] was woken.
const HELD: Duration = Duration::from_secs(600);
/// Well under the second a poll waits, and well over a round trip on a busy
/// machine.
const PROMPT: Duration = Duration::from_millis(400);
/// More guards than a client of one connection had signal sessions before
/// they were shared (`max(max_connections, 4)`, one per guard).
const GUARDS: usize = 12;

/// Starts `waiter` waiting for `key`; answers the acquire and when it came.
fn wait_for(waiter: &Client, key: &str) -> JoinHandle<(Acquire, Instant)> {
    let (waiter, key) = (waiter.clone(), key.to_string());
    tokio::spawn(async move {
        let answer = waiter
            .acquire_waiting(&key, HELD, Duration::from_secs(60))
            .await
            .unwrap();
        (answer, Instant::now())
    })
}

#[tokio::test]
async fn a_client_holding_more_leases_than_it_had_signal_sessions_signals_each_on_two_sessions_and_wakes_every_waiter()
{
    const TEST: &str =
        "a_client_holding_more_leases_than_it_had_signal_sessions_signals_each_on_two_sessions_and_wakes_every_waiter";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let (holder_name, waiter_name) = (unique("holder"), unique("waiter"));
    let holder = named(&db, &holder_name, 1).await;
    let waiter = named(&db, &waiter_name, GUARDS as u32).await;
    let mut probe = db.connect().await;
    let mut guards = Vec::new();
    for _ in 0..GUARDS {
        let key = provisioned(&holder, "held").await;
        let guard = holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap()));
        guards.push((key, guard));
    }
    for (key, _) in &guards {
        until_signal_held(&mut probe, key).await;
    }
    // The ordinary connection, the renewals' one (the warm-up renewed once)
    // and the two sessions every signal is held on.
    let babelfish = db.is_babelfish().await;
    let sessions = sessions_of(&db, &holder_name, babelfish).await;
    assert!(
        sessions <= 1 + 1 + 2,
        "a client of one connection holding {GUARDS} leases has {sessions} sessions"
    );
    let holders = signal_holders(&db, &holder_name, babelfish).await;
    assert!(
        !holders.is_empty() && holders.len() <= 2,
        "the signals are held on {holders:?}"
    );

    let waiting: Vec<_> = guards.iter().map(|(key, _)| wait_for(&waiter, key)).collect();
    until_blocked(&db, &waiter_name, GUARDS as i32).await;
    let mut released = Vec::new();
    for (_, guard) in guards {
        let generation = guard.lease().generation();
        assert_eq!(guard.release().await.unwrap(), Release::Released);
        released.push((Instant::now(), generation));
    }
    for (waiting, (released, generation)) in waiting.into_iter().zip(released) {
        let (answer, taken) = waiting.await.unwrap();
        let lease = acquired(answer);
        assert_eq!(lease.generation(), generation + 1);
        let after = taken.saturating_duration_since(released);
        assert!(after < PROMPT, "a waiter took its lease {after:?} after the release");
        assert_eq!(waiter.release(&lease).await.unwrap(), Release::Released);
    }
    drop((holder, waiter));
    db.drop().await;
}

#[tokio::test]
async fn a_client_holding_three_hundred_leases_keeps_every_signal_on_a_few_sessions() {
    const TEST: &str = "a_client_holding_three_hundred_leases_keeps_every_signal_on_a_few_sessions";
    const MANY: usize = 300;
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let name = unique("many");
    let holder = named(&db, &name, 2).await;
    let mut probe = db.connect().await;
    let mut guards = Vec::new();
    for _ in 0..MANY {
        let key = provisioned(&holder, "many").await;
        guards.push((
            key.clone(),
            holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap())),
        ));
    }
    for (key, _) in &guards {
        until_signal_held(&mut probe, key).await;
    }
    let sessions = sessions_of(&db, &name, db.is_babelfish().await).await;
    assert!(
        sessions <= 2 + 1 + 2,
        "a client of two connections holding {MANY} leases has {sessions} sessions"
    );
    // One at a time: three hundred releases at once would queue on the
    // client's two connections past its checkout timeout on a busy machine.
    for (_, guard) in guards {
        assert_eq!(guard.release().await.unwrap(), Release::Released);
    }
    drop(holder);
    db.drop().await;
}

#[tokio::test]
async fn a_signal_session_killed_mid_tenure_leaves_the_waiter_polling_grants_nothing_early_and_is_raised_again() {
    const TEST: &str =
        "a_signal_session_killed_mid_tenure_leaves_the_waiter_polling_grants_nothing_early_and_is_raised_again";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let babelfish = db.is_babelfish().await;
    let (holder_name, waiter_name) = (unique("victim"), unique("waiter"));
    let holder = named(&db, &holder_name, 1).await;
    let waiter = named(&db, &waiter_name, 1).await;
    let mut probe = db.connect().await;
    let key = provisioned(&holder, "killed").await;
    let guard = holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap()));
    until_signal_held(&mut probe, &key).await;
    let waiting = wait_for(&waiter, &key);
    until_blocked(&db, &waiter_name, 1).await;

    let [victim] = signal_holders(&db, &holder_name, babelfish).await[..] else {
        panic!("not one session holds the signal");
    };
    let sent = waiter.requests_sent();
    let mut admin = db.connect().await;
    admin
        .simple_query(format!("KILL {victim};"))
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    // Woken by the kill, the waiter's Acquire found the lease busy, and it
    // asked again.
    let give_up = Instant::now() + Duration::from_secs(20);
    while waiter.requests_sent() == sent {
        assert!(Instant::now() < give_up, "the waiter never asked again after the kill");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        !waiting.is_finished(),
        "the waiter got an answer while the guard held the lease"
    );
    until_signal_held(&mut probe, &key).await;
    let holders = signal_holders(&db, &holder_name, babelfish).await;
    assert!(
        !holders.is_empty() && !holders.contains(&victim),
        "the signal is held on {holders:?}, the killed session was {victim}"
    );
    assert_eq!(guard.lost_reason(), None, "the guard lost its lease with its signal");

    // Raised again, the signal wakes the waiter at the release.
    until_blocked(&db, &waiter_name, 1).await;
    assert!(
        !waiting.is_finished(),
        "the waiter got an answer while the guard held the lease"
    );
    let generation = guard.lease().generation();
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    let released = Instant::now();
    let (answer, taken) = waiting.await.unwrap();
    let lease = acquired(answer);
    assert_eq!(lease.generation(), generation + 1);
    let after = taken.saturating_duration_since(released);
    assert!(after < PROMPT, "the waiter took the lease {after:?} after the release");
    assert_eq!(waiter.release(&lease).await.unwrap(), Release::Released);
    drop((holder, waiter));
    db.drop().await;
}

#[tokio::test]
async fn a_signal_its_predecessor_still_holds_is_asked_for_again_and_raised_once_free_with_the_engine_up() {
    const TEST: &str =
        "a_signal_its_predecessor_still_holds_is_asked_for_again_and_raised_once_free_with_the_engine_up";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let babelfish = db.is_babelfish().await;
    let name = unique("successor");
    let holder = named(&db, &name, 1).await;
    let mut probe = db.connect().await;
    let key = provisioned(&holder, "predecessor").await;
    // The predecessor's session still holds the signal (it has not let go
    // yet), while the fence grants the lease.
    let mut predecessor = db.connect().await;
    let resource = signal(&key);
    let taken = predecessor
        .simple_query(format!(
            "DECLARE @s int; EXEC @s = sp_getapplock @Resource = N'{resource}', @LockMode = N'Exclusive', \
             @LockOwner = N'Session', @LockTimeout = 5000; SELECT @s;"
        ))
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .and_then(|row| row.get::<i32, usize>(0));
    assert!(matches!(taken, Some(0 | 1)), "{taken:?}");
    let guard = holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap()));
    // The guard's session is refused again and again meanwhile (each
    // refusal left an error behind on Babelfish 4.2 until cleared: the fifth
    // ended the server). How many does not matter; the engine must be up.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        signal_holders(&db, &name, babelfish).await.is_empty(),
        "the signal was granted while the predecessor held it"
    );
    predecessor
        .simple_query(format!(
            "EXEC sp_releaseapplock @Resource = N'{resource}', @LockOwner = N'Session';"
        ))
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    until_signal_held(&mut probe, &key).await;
    let give_up = Instant::now() + Duration::from_secs(10);
    while signal_holders(&db, &name, babelfish).await.is_empty() {
        assert!(Instant::now() < give_up, "the guard never took its signal");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let alive = predecessor
        .simple_query("SELECT 1;")
        .await
        .expect("a session opened before the refusals still answers")
        .into_row()
        .await
        .expect("a session opened before the refusals still answers");
    assert_eq!(alive.and_then(|row| row.get::<i32, usize>(0)), Some(1));
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((holder, predecessor));
    db.drop().await;
}
