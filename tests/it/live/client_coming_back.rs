//! A worker that releases a key in a guard and at once waits for it again
//! goes behind those who waited: its wait joins the key's queue with its
//! first attempt (see `client::handed_over`), so it never races the head its
//! release woke, whatever the length of the jobs. Each schedule is forced:
//! a waiter is started only once the one before it is seen waiting for a
//! lock on the server.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost::Client;
use fencepost::client::Release;
use support::TestDatabase;
use support::lease::{acquired, provisioned, state};
use support::signal::{named, unique, until_blocked, until_signal_held, warm_guard, warm_signal_session};
use tokio::time::Instant;

/// A holder's lease long enough that no waiter could take it by its end.
const HELD: Duration = Duration::from_secs(600);

/// Waiter `index` of a round: waits for `key`, records its turn in
/// `order`, holds the key in a guard for `work`, and releases it.
async fn waiter(client: Client, key: String, index: usize, work: Duration, order: Arc<Mutex<Vec<String>>>) {
    let lease = acquired(
        client
            .acquire_waiting(&key, HELD, Duration::from_secs(60))
            .await
            .unwrap(),
    );
    order.lock().unwrap().push(format!("waiter {index}"));
    let guard = client.guard(lease);
    tokio::time::sleep(work).await;
    assert_eq!(guard.release().await.unwrap(), Release::Released);
}

/// A worker that releases and at once waits again goes behind every waiter
/// queued ("the worker goes behind those who waited"), not only behind the
/// head its release woke.
#[tokio::test]
async fn a_worker_coming_back_goes_behind_two_queued_waiters() {
    const TEST: &str = "a_worker_coming_back_goes_behind_two_queued_waiters";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    /// How long each waiter holds the lease once granted.
    const WORK: Duration = Duration::from_millis(80);
    const ROUNDS: usize = 3;
    let holder_name = unique("comes-back-2");
    let holder = named(&db, &holder_name, 1).await;
    let key = provisioned(&holder, "comes-back-2").await;
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let name = unique("queued");
        let client = named(&db, &name, 1).await;
        warm_signal_session(&holder, &client).await;
        warm_guard(&db, &client, &key).await;
        waiters.push((name, client));
    }
    warm_guard(&db, &holder, &key).await;
    let mut probe = db.connect().await;
    let mut lease = acquired(holder.acquire(&key, HELD).await.unwrap());
    for round in 0..ROUNDS {
        let guard = holder.guard(lease);
        until_signal_held(&mut probe, &key).await;
        // The waiters let go of the key in the last round: past the window
        // of a worker coming back, so that they queue as newcomers do.
        tokio::time::sleep(Duration::from_millis(150)).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for (index, (name, client)) in waiters.iter().enumerate() {
            waiting.push(tokio::spawn(waiter(
                client.clone(),
                key.clone(),
                index,
                WORK,
                order.clone(),
            )));
            // Queued in this order: the first blocks on the signal as the
            // head, the second on the queue behind it.
            until_blocked(&db, name, 1).await;
        }
        assert_eq!(guard.release().await.unwrap(), Release::Released);
        lease = acquired(
            holder
                .acquire_waiting(&key, HELD, Duration::from_secs(60))
                .await
                .unwrap(),
        );
        order.lock().unwrap().push("holder".to_string());
        for waiting in waiting {
            tokio::time::timeout(Duration::from_secs(60), waiting)
                .await
                .expect("every waiter is served")
                .unwrap();
        }
        let order = order.lock().unwrap().clone();
        assert_eq!(
            order,
            ["waiter 0", "waiter 1", "holder"],
            "round {round}: the releaser that came back was served ahead of a waiter queued before it"
        );
    }
    assert_eq!(holder.release(&lease).await.unwrap(), Release::Released);
    drop((holder, waiters, probe));
    db.drop().await;
}

/// A worker that let go of the key a moment ago waits for it again while
/// the waiter its release woke holds it for a short job, and a second
/// waiter is queued behind that one: a job queue of three workers. However
/// short the first waiter's job (swept from 10 to 34 ms), the worker must
/// not take the key ahead of the second waiter, which was queued before it
/// and is woken by that job's release.
#[tokio::test]
async fn a_worker_coming_back_never_overtakes_a_waiter_queued_behind_a_short_job() {
    const TEST: &str = "a_worker_coming_back_never_overtakes_a_waiter_queued_behind_a_short_job";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let worker_name = unique("job-worker");
    let worker = named(&db, &worker_name, 1).await;
    let key = provisioned(&worker, "short-jobs").await;
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let name = unique("job-waiter");
        let client = named(&db, &name, 1).await;
        warm_signal_session(&worker, &client).await;
        warm_guard(&db, &client, &key).await;
        waiters.push((name, client));
    }
    warm_guard(&db, &worker, &key).await;
    let mut probe = db.connect().await;
    let mut overtaken = Vec::new();
    let jobs: Vec<u64> = (10..=34).step_by(2).collect();
    for &job in &jobs {
        let guard = worker.guard(acquired(worker.acquire(&key, HELD).await.unwrap()));
        until_signal_held(&mut probe, &key).await;
        // Past the window of a worker coming back, for the waiters' own
        // last releases.
        tokio::time::sleep(Duration::from_millis(150)).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for (index, (name, client)) in waiters.iter().enumerate() {
            // The first waiter's job is the short one swept; the second's is
            // long enough to end the round in order.
            let work = if index == 0 {
                Duration::from_millis(job)
            } else {
                Duration::from_millis(60)
            };
            waiting.push(tokio::spawn(waiter(
                client.clone(),
                key.clone(),
                index,
                work,
                order.clone(),
            )));
            until_blocked(&db, name, 1).await;
        }
        // The worker finishes its job and comes back for the next one.
        assert_eq!(guard.release().await.unwrap(), Release::Released);
        let lease = acquired(
            worker
                .acquire_waiting(&key, HELD, Duration::from_secs(60))
                .await
                .unwrap(),
        );
        order.lock().unwrap().push("worker".to_string());
        let guard = worker.guard(lease);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(guard.release().await.unwrap(), Release::Released);
        for waiting in waiting {
            tokio::time::timeout(Duration::from_secs(60), waiting)
                .await
                .expect("every waiter is served")
                .unwrap();
        }
        let order = order.lock().unwrap().clone();
        if order != ["waiter 0", "waiter 1", "worker"] {
            overtaken.push((job, order));
        }
        // The next round begins once the key is free.
        let give_up = Instant::now() + Duration::from_secs(10);
        while state(&worker, &key).await.1 {
            assert!(Instant::now() < give_up, "the key stayed held after the round");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    assert!(
        overtaken.is_empty(),
        "the worker coming back took the key ahead of a waiter queued before it in {} of {} rounds \
         (first waiter's job in ms, order served): {overtaken:?}",
        overtaken.len(),
        jobs.len()
    );
    drop((worker, waiters, probe));
    db.drop().await;
}
