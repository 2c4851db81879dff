//! The fence under load: 8 workers on connections of their own, 4 keys, short
//! leases and stalls longer than a lease, a mix of acquire, renew, publish,
//! replay, release and ForceRelease. Every call is written to a client-side
//! ledger; afterwards the ledger and the tables must satisfy the invariants of
//! the fence. The test prints how many operations ran and how many violations
//! it found. Each worker also runs, once and on a key of its own, the
//! schedules contention may not produce in a short run (a replay, a publish
//! after the lease ran out, one after a ForceRelease), so every run shows
//! each of them.
//!
//! `FENCEPOST_STRESS_SECONDS` sets the length of the run (default 60).

use crate::support;
use std::io::Write;
use std::time::Duration;

use fencepost::client::{Acquire, Publish, RefusalReason, Release, Renew};
use fencepost::{Client, Connection};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use support::TestDatabase;
use support::lease::worker;
use support::stress_ledger::{Event, Ledger, TableState};
use tokio::time::Instant;
use uuid::Uuid;

const WORKERS: u64 = 8;
const KEYS: usize = 4;

fn run_length() -> Duration {
    let seconds = std::env::var("FENCEPOST_STRESS_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    Duration::from_secs(seconds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_load_with_stalls_every_invariant_of_the_fence_holds() {
    let test = "under_load_with_stalls_every_invariant_of_the_fence_holds";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let first = worker(&db.ado()).await;
    let mut keys = Vec::new();
    for i in 0..KEYS {
        let key = format!("stress-{i}");
        first.provision(&key).await.unwrap();
        keys.push(key);
    }
    for w in 0..WORKERS {
        first.provision(&solo_key(w)).await.unwrap();
    }
    drop(first);

    // Every worker warms up at once, and the run's clock starts only when
    // all of them are ready, so the whole window runs eight ways.
    let warming: Vec<_> = (0..WORKERS)
        .map(|_| {
            let ado = db.ado();
            tokio::spawn(async move {
                let client = worker(&ado).await;
                let operator = support::connect_ado(&ado).await;
                (client, operator)
            })
        })
        .collect();
    let mut ready = Vec::new();
    for warm in warming {
        ready.push(warm.await.expect("a worker warms up"));
    }
    let deadline = Instant::now() + run_length();
    let seed: u64 = rand::rng().random();
    let mut tasks = Vec::new();
    for (w, (client, operator)) in (0..WORKERS).zip(ready) {
        let keys = keys.clone();
        tasks.push(tokio::spawn(run_worker(w, client, operator, keys, deadline, seed + w)));
    }
    let mut ledger = Ledger::default();
    for task in tasks {
        ledger.events.extend(task.await.unwrap());
    }

    let table = TableState::read(&mut *db.session().await, "stress-").await;
    let violations = ledger.violations(&table);
    let _ = writeln!(
        std::io::stderr(),
        "{test}: {} operations ({}), {} violations (seed {seed})",
        ledger.events.len(),
        ledger.summary(),
        violations.len()
    );
    assert!(
        violations.is_empty(),
        "{} violations, first ones:\n{}",
        violations.len(),
        violations.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
    assert!(
        ledger.accepted().count() > 0,
        "nothing was ever published: the run showed nothing"
    );
    // A run that never met a schedule proved nothing about it.
    let publishes = |wanted: Publish, replayed: bool| {
        ledger
            .events
            .iter()
            .filter(
                |e| matches!(e, Event::Publish { outcome, replay, .. } if *outcome == wanted && *replay == replayed),
            )
            .count()
    };
    let schedules = [
        (
            "a stale publish refused as Superseded",
            publishes(Publish::Refused(RefusalReason::Superseded), false),
        ),
        (
            "a publish after the lease ran out refused as Expired",
            publishes(Publish::Refused(RefusalReason::Expired), false)
                + publishes(Publish::Refused(RefusalReason::Expired), true),
        ),
        (
            "a replay answered AlreadyPublished",
            publishes(Publish::AlreadyPublished, true),
        ),
        (
            "a ForceRelease that fenced a key",
            ledger
                .events
                .iter()
                .filter(|e| matches!(e, Event::Fenced { .. }))
                .count(),
        ),
    ];
    for (schedule, seen) in schedules {
        assert!(seen > 0, "the run never showed {schedule}: {}", ledger.summary());
    }
    db.drop().await;
}

async fn run_worker(
    w: u64,
    client: Client,
    mut operator: Connection,
    keys: Vec<String>,
    deadline: Instant,
    seed: u64,
) -> Vec<Event> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut events = scripted(w, &client, &mut operator).await;
    let mut publishes = 0u64;
    while Instant::now() < deadline {
        let key = keys[rng.random_range(0..keys.len())].clone();
        if rng.random_range(0..100) < 4 {
            events.push(force_release(&mut operator, &key).await);
            continue;
        }
        let length = Duration::from_secs(rng.random_range(1..=2));
        let owner = Uuid::new_v4();
        let mut lease = match client.acquire_as(&key, owner, length).await {
            Ok(Acquire::Acquired(lease)) => {
                events.push(Event::granted(&lease));
                lease
            }
            Ok(Acquire::Busy { .. }) => {
                events.push(Event::Busy);
                tokio::time::sleep(Duration::from_millis(rng.random_range(10..100))).await;
                continue;
            }
            other => {
                events.push(Event::Failed {
                    what: format!("acquire {key}: {other:?}"),
                });
                continue;
            }
        };
        let mut last: Option<(Uuid, String)> = None;
        for _ in 0..rng.random_range(1..=5) {
            match rng.random_range(0..100) {
                0..30 => match client.renew(&mut lease).await {
                    Ok(Renew::Renewed { .. }) => events.push(Event::renewed(&lease)),
                    Ok(Renew::Lost) => events.push(Event::Lost),
                    other => events.push(Event::Failed {
                        what: format!("renew: {other:?}"),
                    }),
                },
                // A stall of up to 3 s: longer than any lease here.
                30..55 => tokio::time::sleep(Duration::from_millis(rng.random_range(0..3000))).await,
                55..80 => {
                    publishes += 1;
                    let operation = Uuid::new_v4();
                    let payload = format!("w{w}-p{publishes}");
                    events.push(publish(&client, &lease, operation, &payload, false).await);
                    last = Some((operation, payload));
                }
                80..90 => {
                    if let Some((operation, payload)) = &last {
                        events.push(publish(&client, &lease, *operation, payload, true).await);
                    }
                }
                _ => {
                    match client.release(&lease).await {
                        Ok(Release::Released) => events.push(Event::Released {
                            key: key.clone(),
                            generation: lease.generation(),
                            received: Instant::now(),
                        }),
                        Ok(Release::NotHolder) => events.push(Event::NotHolder),
                        other => events.push(Event::Failed {
                            what: format!("release: {other:?}"),
                        }),
                    }
                    break;
                }
            }
        }
        // Otherwise the lease is left to run out, as a crashed holder's does.
    }
    events
}

/// A key only worker `w` uses.
fn solo_key(w: u64) -> String {
    format!("stress-solo-{w}")
}

/// The schedules that contention on the shared keys may never produce in a
/// short run, each once, on the worker's own key where nobody can take over:
/// a replay, a publish after the lease ran out, and a publish after a
/// ForceRelease fenced the holder out. They run while the other workers load
/// the server, and go into the ledger like every other call.
async fn scripted(w: u64, client: &Client, operator: &mut Connection) -> Vec<Event> {
    let key = solo_key(w);
    let mut events = Vec::new();
    let grant = async |events: &mut Vec<Event>, length: Duration| {
        let lease = support::lease::acquired(client.acquire(&key, length).await.unwrap());
        events.push(Event::granted(&lease));
        lease
    };
    let expect = |events: &mut Vec<Event>, event: Event, wanted: Publish| {
        let Event::Publish { outcome, .. } = &event else {
            panic!("worker {w}: {event:?}, expected {wanted:?}");
        };
        assert_eq!(*outcome, wanted, "worker {w} on {key}");
        events.push(event);
    };

    let lease = grant(&mut events, Duration::from_secs(30)).await;
    let operation = Uuid::new_v4();
    let payload = format!("w{w}-solo");
    expect(
        &mut events,
        publish(client, &lease, operation, &payload, false).await,
        Publish::Published,
    );
    expect(
        &mut events,
        publish(client, &lease, operation, &payload, true).await,
        Publish::AlreadyPublished,
    );
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    events.push(Event::Released {
        key: key.clone(),
        generation: lease.generation(),
        received: Instant::now(),
    });

    // Left to run out, as a stalled holder's lease does: the server clock says when.
    let lease = grant(&mut events, Duration::from_secs(1)).await;
    support::lease::wait_until_expired(client, &key).await;
    let late = publish(client, &lease, Uuid::new_v4(), &format!("w{w}-expired"), false).await;
    expect(&mut events, late, Publish::Refused(RefusalReason::Expired));

    let lease = grant(&mut events, Duration::from_secs(30)).await;
    let fenced = force_release(operator, &key).await;
    assert!(matches!(fenced, Event::Fenced { .. }), "worker {w}: {fenced:?}");
    events.push(fenced);
    let stale = publish(client, &lease, Uuid::new_v4(), &format!("w{w}-fenced"), false).await;
    expect(&mut events, stale, Publish::Refused(RefusalReason::Superseded));
    events
}

async fn publish(
    client: &Client,
    lease: &fencepost::client::Lease,
    operation: Uuid,
    payload: &str,
    replay: bool,
) -> Event {
    let sent = Instant::now();
    match client.publish(lease, operation, payload).await {
        Ok(outcome) => Event::Publish {
            key: lease.key().to_string(),
            owner: lease.owner(),
            generation: lease.generation(),
            operation,
            payload: payload.to_string(),
            outcome,
            replay,
            sent,
        },
        Err(e) => Event::Failed {
            what: format!("publish: {e}"),
        },
    }
}

async fn force_release(operator: &mut Connection, key: &str) -> Event {
    let answer = async {
        operator
            .query("EXEC fence_admin.ForceRelease @ResourceKey = @P1", &[&key])
            .await?
            .into_row()
            .await
    };
    match answer.await {
        Ok(Some(row)) => match row.get::<i64, _>("Generation") {
            Some(generation) => Event::Fenced {
                key: key.to_string(),
                generation,
                received: Instant::now(),
            },
            None => Event::Failed {
                what: format!("ForceRelease {key}: no generation"),
            },
        },
        other => Event::Failed {
            what: format!("ForceRelease {key}: {other:?}"),
        },
    }
}
