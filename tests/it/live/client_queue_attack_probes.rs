//! Probes of the waiters' queue (`client::queue`) against what the client
//! documents: a waiter keeps its place for its whole wait, the queue never
//! outlives a wait, and a wait that ends however it ends (its future
//! dropped, its session killed) leaves nothing held.
//!
//! Each schedule is forced by what the server shows: a waiter is acted on
//! only once it is seen waiting for a lock (`until_blocked`), or once the
//! queue is seen held.

use crate::support;

use std::time::Duration;

use fencepost::Connection;
use fencepost::client::{BeginFenced, Release};
use support::TestDatabase;
use support::lease::{acquired, provisioned, state, workers};
use support::signal::{named, queue, unique, until_blocked, until_signal_held, warm_signal_session};
use tokio::time::Instant;

/// A holder's lease long enough that no waiter could take it by its end.
const HELD: Duration = Duration::from_secs(600);

/// What the client runs after a refused application lock on Babelfish.
const CLEAR_AFTER_REFUSAL: &str = "IF @s < 0 AND SERVERPROPERTY(N'Babelfish') IS NOT NULL \
     BEGIN BEGIN TRY THROW 50000, N'clear', 1; END TRY BEGIN CATCH END CATCH; END;";

/// Asks for the queue of `key` on `conn` in Exclusive mode, waiting at most
/// `wait`: whether it was granted. The lock is kept when granted.
async fn take_queue(conn: &mut Connection, key: &str, wait: Duration) -> bool {
    let sql = format!(
        "DECLARE @s int; EXEC @s = sp_getapplock @Resource = N'{}', @LockMode = N'Exclusive', \
         @LockOwner = N'Session', @LockTimeout = {}; {CLEAR_AFTER_REFUSAL} SELECT @s;",
        queue(key),
        wait.as_millis()
    );
    let row = conn.simple_query(sql).await.unwrap().into_row().await.unwrap().unwrap();
    row.get::<i32, usize>(0).unwrap() >= 0
}

/// Lets go of the queue of `key` that `conn` holds.
async fn leave_queue(conn: &mut Connection, key: &str) {
    let sql = format!(
        "EXEC sp_releaseapplock @Resource = N'{}', @LockOwner = N'Session';",
        queue(key)
    );
    conn.simple_query(sql).await.unwrap().into_results().await.unwrap();
}

/// Whether someone holds the queue of `key` now, asked on `conn` without
/// keeping it (a shared request, let go of at once).
async fn queue_held(conn: &mut Connection, key: &str) -> bool {
    let resource = queue(key);
    let sql = format!(
        "DECLARE @s int; EXEC @s = sp_getapplock @Resource = N'{resource}', @LockMode = N'Shared', \
         @LockOwner = N'Session', @LockTimeout = 1; \
         IF @s >= 0 EXEC sp_releaseapplock @Resource = N'{resource}', @LockOwner = N'Session'; \
         {CLEAR_AFTER_REFUSAL} SELECT @s;"
    );
    let row = conn.simple_query(sql).await.unwrap().into_row().await.unwrap().unwrap();
    row.get::<i32, usize>(0).unwrap() < 0
}

/// Waits, at most `bound`, until the queue of `key` is held.
async fn until_queue_held(conn: &mut Connection, key: &str, bound: Duration) {
    let give_up = Instant::now() + bound;
    while !queue_held(conn, key).await {
        assert!(Instant::now() < give_up, "the queue of {key} was never held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The sessions that hold or wait for an application lock, with their
/// client's name and state, for a failure's message.
async fn lock_holders(db: &TestDatabase) -> Vec<String> {
    let sql = "SELECT CAST(CONCAT(l.request_session_id, N' ', s.program_name, N' ', l.request_mode, N' ', \
         l.request_status) AS nvarchar(400)) FROM sys.dm_tran_locks AS l JOIN sys.dm_exec_sessions AS s \
         ON s.session_id = l.request_session_id WHERE l.resource_type = N'APPLICATION';";
    db.query(sql)
        .await
        .iter()
        .map(|row| row.get::<&str, usize>(0).unwrap_or_default().to_string())
        .collect()
}

/// The head of the queue keeps its place for its whole wait, also while
/// the holder's fenced transaction keeps the fence row locked past the 5 s
/// `Acquire` waits for it ("a head answered `Busy` keeps it, its place,
/// across its next attempts"; contention is never an error). A second
/// session that queues behind the head must not get the queue while the
/// head still waits and the lease is still held.
#[tokio::test]
async fn client_queue_attack_a_head_keeps_its_place_across_a_long_fenced_transaction() {
    const TEST: &str = "client_queue_attack_a_head_keeps_its_place_across_a_long_fenced_transaction";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, reader] = workers(&db.ado()).await;
    let name = unique("row-held-head");
    let waiter = named(&db, &name, 1).await;
    warm_signal_session(&holder, &waiter).await;
    let key = provisioned(&holder, "row-held-head").await;
    let guard = holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap()));
    let mut probe = db.connect().await;
    until_signal_held(&mut probe, &key).await;
    let BeginFenced::Holding(tx) = guard.begin_fenced().await.unwrap() else {
        panic!("a fresh lease's fenced transaction was refused");
    };

    let waiting = {
        let (waiter, key) = (waiter.clone(), key.clone());
        tokio::spawn(async move { waiter.acquire_waiting(&key, HELD, Duration::from_secs(90)).await })
    };
    // Its first, plain attempt ends at Acquire's bound on the row (5 s);
    // then it joins the queue, and is its head.
    until_queue_held(&mut probe, &key, Duration::from_secs(20)).await;
    // Another waiter comes, behind the head, and waits for its turn for
    // longer than the head's next attempt takes (a pause, then Acquire's 5 s
    // on the row, and a round trip).
    let mut behind = db.connect().await;
    let asked = Instant::now();
    let jumped = take_queue(&mut behind, &key, Duration::from_secs(12)).await;
    let after = asked.elapsed();
    let head_still_waits = !waiting.is_finished();
    let (_, held, ..) = state(&reader, &key).await;

    tx.rollback().await;
    if jumped {
        leave_queue(&mut behind, &key).await;
    }
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    let taken = tokio::time::timeout(Duration::from_secs(30), waiting)
        .await
        .expect("the waiter took the lease after the release")
        .unwrap()
        .unwrap();
    let taken = acquired(taken);
    assert_eq!(waiter.release(&taken).await.unwrap(), Release::Released);
    assert!(
        !(jumped && head_still_waits && held),
        "a waiter that came later was given the queue {after:?} after it asked, while the head \
         still waited and the lease was still held: the head lost its place"
    );
    drop((holder, reader, waiter, probe, behind));
    db.drop().await;
}

/// The head's future dropped (its task aborted) in a runtime that goes on
/// leaves nothing held once the holder lets go: its attempt runs to its end
/// and gives back what it was granted, and the queue is let go of.
#[tokio::test]
async fn client_queue_attack_control_a_head_dropped_in_a_live_runtime_leaves_no_grant_behind() {
    const TEST: &str = "client_queue_attack_control_a_head_dropped_in_a_live_runtime_leaves_no_grant_behind";
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
    until_blocked(&db, &name, 1).await;
    waiting.abort();
    assert!(waiting.await.unwrap_err().is_cancelled());
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    let give_up = Instant::now() + Duration::from_secs(10);
    loop {
        let (generation, held, until, _) = state(&holder, &key).await;
        let queue_left_held = queue_held(&mut probe, &key).await;
        if !held && !queue_left_held {
            break;
        }
        assert!(
            Instant::now() < give_up,
            "held: {held} (generation {generation}, until {until:?}), queue held: {queue_left_held}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop((holder, waiter, probe));
    db.drop().await;
}

/// The session of the head of the queue ended by the server (an operator's
/// KILL, a failover) mid-wait: the wait goes on without an error, lets go of
/// nothing it should keep but the queue it held with the session, and takes
/// the lease once the holder releases it; and the queue the killed session
/// held is let go of with it ("a session that ends lets go of every lock it
/// held"), so the key's next waiter can be its head. On Babelfish 4.2 a
/// session killed while it waits in `sp_getapplock` keeps its granted
/// application locks after it ended: `pg_locks` lists them under the dead
/// backend's pid, and nothing but a restart lets go of them.
#[tokio::test]
async fn client_queue_attack_a_head_whose_session_is_killed_goes_on_waiting() {
    const TEST: &str = "client_queue_attack_a_head_whose_session_is_killed_goes_on_waiting";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    if db.is_babelfish().await {
        support::skip(
            TEST,
            "Babelfish 4.2 keeps the application locks of a session killed while it waits in sp_getapplock \
             (pg_locks lists them under the ended backend) until the server restarts",
        );
        return;
    }
    let [holder] = workers(&db.ado()).await;
    let name = unique("killed-head");
    let waiter = named(&db, &name, 1).await;
    warm_signal_session(&holder, &waiter).await;
    let key = provisioned(&holder, "killed-head").await;
    let guard = holder.guard(acquired(holder.acquire(&key, HELD).await.unwrap()));
    let mut probe = db.connect().await;
    until_signal_held(&mut probe, &key).await;

    let waiting = {
        let (waiter, key) = (waiter.clone(), key.clone());
        tokio::spawn(async move { waiter.acquire_waiting(&key, HELD, Duration::from_secs(60)).await })
    };
    until_blocked(&db, &name, 1).await;
    let sql = format!(
        "SELECT CAST(r.session_id AS int) FROM sys.dm_exec_requests AS r JOIN sys.dm_exec_sessions AS s \
         ON s.session_id = r.session_id WHERE s.program_name = N'{name}' AND r.blocking_session_id <> 0;"
    );
    let rows = db.query(&sql).await;
    let [victim] = rows.iter().map(|r| r.get::<i32, usize>(0).unwrap()).collect::<Vec<_>>()[..] else {
        panic!("not one of the waiter's sessions waits");
    };
    let mut admin = db.connect().await;
    admin
        .simple_query(format!("KILL {victim};"))
        .await
        .unwrap()
        .into_results()
        .await
        .unwrap();
    // It joins the queue again on another session, and waits there.
    until_blocked(&db, &name, 1).await;
    assert!(
        !waiting.is_finished(),
        "the wait ended after its session was killed: {:?}",
        waiting.await
    );
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    let released = Instant::now();
    let taken = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiter took the lease after the release")
        .unwrap();
    let lease = acquired(taken.expect("the killed session surfaced as an error"));
    assert!(
        released.elapsed() < Duration::from_millis(2500),
        "{:?}",
        released.elapsed()
    );
    assert_eq!(waiter.release(&lease).await.unwrap(), Release::Released);
    let give_up = Instant::now() + Duration::from_secs(5);
    while queue_held(&mut probe, &key).await {
        if Instant::now() >= give_up {
            let mut fresh = db.connect().await;
            let seen_by_a_fresh_session = queue_held(&mut fresh, &key).await;
            let holders = lock_holders(&db).await;
            panic!(
                "the queue was left held after the wait, by no live session (held as a fresh session \
                 sees it: {seen_by_a_fresh_session}): the killed head's queue outlived its session; \
                 the live sessions' application locks: {holders:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop((holder, waiter, probe, admin));
    db.drop().await;
}
