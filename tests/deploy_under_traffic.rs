//! `fencepost migrate` redeploys every procedure while 8 workers lease and
//! publish through them. Only retryable errors may appear; every accepted
//! publication is in the tables; no generation falls.

mod lease_support;
mod stress_ledger;
mod support;

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fencepost::Client;
use fencepost::client::{Acquire, Error, Lease, Publish};
use lease_support::worker;
use stress_ledger::{Event, Ledger, TableState};
use support::TestDatabase;
use tokio::time::Instant;
use uuid::Uuid;

const WORKERS: usize = 8;
const KEYS: usize = 4;

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

    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let client = worker(&db.ado()).await;
        let key = keys[w % KEYS].clone();
        tasks.push(tokio::spawn(cycles(client, key, stop.clone())));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let sources = changed_sources();
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
    tokio::time::sleep(Duration::from_secs(2)).await;
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

    let table = TableState::read(&mut db.connect().await, "traffic-").await;
    let violations = ledger.violations(&table);
    let _ = writeln!(
        std::io::stderr(),
        "{test}: {} operations ({}), {} retried errors, {} violations",
        ledger.events.len(),
        ledger.summary(),
        retried.len(),
        violations.len()
    );
    assert!(violations.is_empty(), "{violations:#?}");
    assert!(ledger.accepted().count() > 0, "nothing was published");
    db.drop().await;
}

/// Acquire, publish, release, over and over, retrying what may be retried.
async fn cycles(client: Client, key: String, stop: Arc<AtomicBool>) -> Seen {
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
        seen.events.push(Event::granted(&lease));
        publish_until_known(&client, &lease, &mut seen).await;
        // A failed release leaves the lease to expire; the next acquire waits.
        if let Err(error) = client.release(&lease).await {
            retryable(&mut seen, "release", error);
        }
    }
    seen
}

/// Publishes once, replaying the same operation id while its outcome is
/// unknown; the ledger records what the server decided.
async fn publish_until_known(client: &Client, lease: &Lease, seen: &mut Seen) {
    let operation = Uuid::new_v4();
    let payload = operation.to_string();
    let sent = Instant::now();
    let mut replay = false;
    let outcome = loop {
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
                    return;
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
