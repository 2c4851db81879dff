//! `fencepost migrate` redeploys every procedure while 8 workers lease and
//! publish through them. Every worker completes calls while the deploy runs;
//! only a few retryable errors may appear; every accepted publication is in
//! the tables; no generation falls.

use crate::support;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fencepost::Client;
use fencepost::client::{Acquire, Error, Lease, Publish};
use support::TestDatabase;
use support::lease::worker;
use support::stress_ledger::{Event, Ledger, TableState};
use tokio::time::Instant;
use uuid::Uuid;

const WORKERS: usize = 8;
const KEYS: usize = 4;

/// How often a publication whose outcome is unknown, or that met a
/// retryable error, is sent again before the worker records a failure.
const PUBLISH_ATTEMPTS: u32 = 20;

/// The pause between two of those attempts.
const PUBLISH_PAUSE: Duration = Duration::from_millis(100);

/// The most retryable errors the whole run may meet: the deploy alters each
/// procedure in a transaction of its own, which a call waits behind rather
/// than failing, so a redeploy under traffic is meant to cost none.
const RETRIED_AT_MOST: usize = 4;

/// How long the workers may take to complete a call before the deploy, and
/// again after it.
const PROGRESS_WITHIN: Duration = Duration::from_secs(60);

/// A copy of the shipped T-SQL in which every procedure's text has changed,
/// so the runner alters all of them.
fn changed_sources() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for folder in ["migrations", "procedures", "permissions"] {
        std::fs::create_dir(dir.path().join(folder)).unwrap();
        for entry in std::fs::read_dir(root.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            let mut text = std::fs::read_to_string(&path).unwrap();
            if folder == "procedures" {
                text.push_str("-- redeployed under traffic\n");
            }
            std::fs::write(dir.path().join(folder).join(path.file_name().unwrap()), text).unwrap();
        }
    }
    dir
}

/// What one worker saw: the ledger's events, and each retryable error.
struct Seen {
    events: Vec<Event>,
    retried: Vec<String>,
}

/// When each of a worker's accepted calls (a grant, a publication) came
/// back, shared with the test while the worker runs.
type Completed = Arc<Mutex<Vec<Instant>>>;

/// Waits until every worker has completed an accepted call after `since`.
async fn every_worker_completes_a_call_after(completed: &[Completed], since: Instant, when: &str) {
    let give_up = Instant::now() + PROGRESS_WITHIN;
    while !completed.iter().all(|c| c.lock().unwrap().iter().any(|at| *at > since)) {
        assert!(
            Instant::now() < give_up,
            "a worker completed no call {when} within {PROGRESS_WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deploy_during_traffic_loses_nothing_and_lowers_no_generation() {
    let test = "a_deploy_during_traffic_loses_nothing_and_lowers_no_generation";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let keys: Vec<String> = (0..KEYS).map(|i| format!("traffic-{i}")).collect();
    let first = worker(&db.ado()).await;
    for key in &keys {
        first.provision(key).await.unwrap();
    }
    drop(first);

    // Warmed together: the warm-up compiles each procedure once per session,
    // which is what costs the time.
    let ado = db.ado();
    let clients = futures_util::future::join_all((0..WORKERS).map(|_| worker(&ado))).await;
    let stop = Arc::new(AtomicBool::new(false));
    let completed: Vec<Completed> = (0..WORKERS).map(|_| Completed::default()).collect();
    let mut tasks = Vec::new();
    for (w, client) in clients.into_iter().enumerate() {
        let key = keys[w % KEYS].clone();
        tasks.push(tokio::spawn(cycles(client, key, stop.clone(), completed[w].clone())));
    }
    let sources = changed_sources();
    // Traffic is flowing: every worker has had a call accepted.
    let started = Instant::now();
    every_worker_completes_a_call_after(&completed, started, "before the deploy").await;
    let deploy_started = Instant::now();
    let deploy = support::binary::tokio(support::binary::fencepost_on(
        &db.ado(),
        [
            std::ffi::OsStr::new("migrate"),
            std::ffi::OsStr::new("--source-dir"),
            sources.path().as_os_str(),
        ],
    ))
    .output()
    .await
    .unwrap();
    let deploy_ended = Instant::now();
    // And still flows through the altered procedures.
    every_worker_completes_a_call_after(&completed, deploy_ended, "after the deploy").await;
    stop.store(true, Ordering::SeqCst);

    let mut ledger = Ledger::default();
    let mut retried = Vec::new();
    for task in tasks {
        let seen = task.await.unwrap();
        ledger.events.extend(seen.events);
        retried.extend(seen.retried);
    }
    let report = String::from_utf8_lossy(&deploy.stdout);
    assert!(
        deploy.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&deploy.stderr)
    );
    assert!(
        report.contains("fence_api.Publish"),
        "the deploy did not alter Publish:\n{report}"
    );

    let table = TableState::read(&mut *db.session().await, "traffic-").await;
    let violations = ledger.violations(&table);
    let _ = writeln!(
        std::io::stderr(),
        "{test}: {} operations ({}), {} retried errors, {} violations; the deploy took {:?}",
        ledger.events.len(),
        ledger.summary(),
        retried.len(),
        violations.len(),
        deploy_ended - deploy_started
    );
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(ledger.accepted().count() > 0, "nothing was published");
    // The procedures were altered while calls went through them: each worker
    // had a call accepted while `migrate` ran.
    let deploy_took = deploy_ended - deploy_started;
    for (w, completed) in completed.iter().enumerate() {
        let during = completed
            .lock()
            .unwrap()
            .iter()
            .filter(|at| (deploy_started..=deploy_ended).contains(at))
            .count();
        assert!(
            during > 0,
            "worker {w} completed no call during the {deploy_took:?} the deploy ran"
        );
    }
    assert!(
        retried.len() <= RETRIED_AT_MOST,
        "{} retried errors, at most {RETRIED_AT_MOST} expected: {retried:#?}",
        retried.len()
    );
    db.drop().await;
}

/// Acquire, publish, release, over and over, retrying what may be retried.
async fn cycles(client: Client, key: String, stop: Arc<AtomicBool>, completed: Completed) -> Seen {
    let mut seen = Seen {
        events: Vec::new(),
        retried: Vec::new(),
    };
    while !stop.load(Ordering::SeqCst) {
        let lease = match client.acquire(&key, Duration::from_secs(5)).await {
            Ok(Acquire::Acquired(lease)) => lease,
            Ok(Acquire::Busy { .. }) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            Ok(other) => panic!("{key}: {other:?}"),
            Err(error) => {
                retryable(&mut seen, "acquire", error);
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        completed.lock().unwrap().push(Instant::now());
        seen.events.push(Event::granted(&lease));
        if publish_until_known(&client, &lease, &mut seen).await == Some(Publish::Published) {
            completed.lock().unwrap().push(Instant::now());
        }
        // A failed release leaves the lease to expire; the next acquire waits.
        if let Err(error) = client.release(&lease).await {
            retryable(&mut seen, "release", error);
        }
    }
    seen
}

/// Publishes once, replaying the same operation id while its outcome is
/// unknown, at most [`PUBLISH_ATTEMPTS`] times; the ledger records what the
/// server decided, or a failure when it never said.
async fn publish_until_known(client: &Client, lease: &Lease, seen: &mut Seen) -> Option<Publish> {
    let operation = Uuid::new_v4();
    let payload = operation.to_string();
    let sent = Instant::now();
    let mut replay = false;
    let mut attempts = 0;
    let outcome = loop {
        if attempts == PUBLISH_ATTEMPTS {
            seen.events.push(Event::Failed {
                what: format!("publish {operation}: no outcome after {PUBLISH_ATTEMPTS} attempts"),
            });
            return None;
        }
        if attempts > 0 {
            tokio::time::sleep(PUBLISH_PAUSE).await;
        }
        attempts += 1;
        match client.publish(lease, operation, &payload).await {
            Ok(Publish::AlreadyPublished) if replay => break Publish::Published,
            Ok(outcome) => break outcome,
            // An unknown outcome is settled by replaying the same operation.
            Err(error) if error.unknown_operation() == Some(operation) => {
                seen.retried.push(format!("publish: {error}"));
                replay = true;
            }
            Err(error) => {
                if !retryable(seen, "publish", error) {
                    return None;
                }
                replay = true;
            }
        }
    };
    seen.events.push(Event::Publish {
        key: lease.key().to_string(),
        owner: lease.owner(),
        generation: lease.generation(),
        operation,
        payload,
        outcome,
        replay: false,
        sent,
    });
    Some(outcome)
}

/// Records `error` and whether it may be retried; one that may not is a
/// violation.
fn retryable(seen: &mut Seen, what: &str, error: Error) -> bool {
    let transient = error.is_transient();
    if transient {
        seen.retried.push(format!("{what}: {error}"));
    } else {
        seen.events.push(Event::Failed {
            what: format!("{what}: {error}"),
        });
    }
    transient
}
