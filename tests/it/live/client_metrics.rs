//! The client's metrics through the `metrics` facade, as an application's
//! recorder sees them: names, units and low-cardinality labels for a full
//! cycle, a refusal, a lost lease and an unknown outcome settled. The recorder
//! is this test's thread's own (the test's runtime has one thread), so the
//! other tests that share the process under `cargo test` do not count in it.
#![cfg(feature = "metrics")]

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use fencepost::client::{Acquire, Fenced, LostReason, Publish, RefusalReason, meter};
use fencepost::{Client, ClientConfig, ConnectionString};
use metrics::Unit;
use metrics_util::MetricKind;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use support::TestDatabase;
use support::lease::{provisioned, warm_up};
use support::proxy::{Cut, Proxy};
use support::signal::signal_held;
use uuid::Uuid;

/// Each metric as (kind, name, sorted labels) → its value.
type Seen = BTreeMap<(MetricKind, String, Vec<(String, String)>), DebugValue>;

#[tokio::test]
async fn a_cycle_a_refusal_a_lost_lease_and_an_unknown_outcome_are_counted_with_their_labels() {
    const TEST: &str = "a_cycle_a_refusal_a_lost_lease_and_an_unknown_outcome_are_counted_with_their_labels";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);

    let proxy = Proxy::start(db.connection_string().server()).await;
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    config
        .max_connections(1)
        // Room for a first compilation on a busy engine; a held reply still
        // outlasts the 3 s lease below.
        .call_timeout(Duration::from_secs(5))
        .checkout_timeout(Duration::from_millis(500))
        .release_timeout(Duration::from_millis(500));
    let client = Client::connect_with(config).await.unwrap();
    warm_up(&client).await;
    let key = provisioned(&client, "metrics").await;

    // A full cycle, then a refusal: the superseded first holder publishes.
    let Acquire::Acquired(first) = client.acquire(&key, Duration::from_secs(30)).await.unwrap() else {
        panic!("not acquired")
    };
    assert_eq!(
        client.publish_and_release(&first, Uuid::new_v4(), "one").await.unwrap(),
        Publish::Published
    );
    let Acquire::Acquired(second) = client.acquire(&key, Duration::from_secs(30)).await.unwrap() else {
        panic!("not acquired")
    };
    assert_eq!(
        client.publish(&first, Uuid::new_v4(), "late").await.unwrap(),
        Publish::Refused(RefusalReason::Superseded)
    );
    let busy = client.acquire(&key, Duration::from_secs(30)).await.unwrap();
    assert!(matches!(busy, Acquire::Busy { .. }), "{busy:?}");

    // A lost lease: an operator fences the guarded holder out.
    let guard = client.guard(second);
    db.exec(&format!("EXEC fence_admin.ForceRelease @ResourceKey = N'{key}';"))
        .await;
    let lost = tokio::time::timeout(Duration::from_secs(60), guard.lost())
        .await
        .expect("the loss is seen");
    assert_eq!(lost, LostReason::Renewal);
    drop(guard);

    // An unknown outcome: every reply to run_fenced's publish is lost; then
    // settled once the server answers again.
    let fenced = client
        .run_fenced(&key, Duration::from_secs(3), |_| async {
            proxy.cut_next(Cut::BeforeReply);
            proxy.hold_replies(true);
            Ok::<_, std::convert::Infallible>("unknown")
        })
        .await
        .expect("a publish that may have committed is not an error");
    let Fenced::Unknown(unsettled) = fenced else {
        panic!("{fenced:?}")
    };
    proxy.hold_replies(false);
    let mut attempts = 0;
    let settled = loop {
        match client.settle(&unsettled).await {
            Ok(answer) => break answer,
            Err(error) => {
                attempts += 1;
                assert!(attempts < 50, "never settled: {error}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };

    // A waiting acquire that gets the lease records how long it waited.
    let other = provisioned(&client, "metrics-wait").await;
    let waited = client
        .acquire_waiting(&other, Duration::from_secs(30), Duration::from_secs(5))
        .await
        .unwrap();
    let Acquire::Acquired(waited) = waited else {
        panic!("{waited:?}")
    };
    assert_eq!(settled, Publish::AlreadyPublished);

    // A waiting attempt, blocked on a guard's handover signal before its
    // Acquire, is measured in a series of its own: its duration holds that
    // deliberate wait. Three seconds leave a new signal session time to
    // log in on a busy engine.
    let holder = client.guard(waited);
    let busy = client
        .acquire_waiting(&other, Duration::from_secs(30), Duration::from_secs(3))
        .await
        .unwrap();
    assert!(matches!(busy, Acquire::Busy { .. }), "{busy:?}");
    drop(holder);

    let snapshot = snapshotter.snapshot().into_vec();
    let mut seen = Seen::new();
    let mut units = BTreeMap::new();
    for (key, unit, _, value) in snapshot {
        let (kind, key) = key.into_parts();
        let mut labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_string(), l.value().to_string()))
            .collect();
        labels.sort();
        units.insert(key.name().to_string(), unit);
        seen.insert((kind, key.name().to_string(), labels), value);
    }
    let labels = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        let mut v: Vec<_> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        v.sort();
        v
    };
    let counter = |name: &str, pairs: &[(&str, &str)]| -> u64 {
        match seen.get(&(MetricKind::Counter, name.to_string(), labels(pairs))) {
            Some(DebugValue::Counter(n)) => *n,
            other => panic!("{name} {pairs:?}: {other:?} in {:#?}", seen.keys().collect::<Vec<_>>()),
        }
    };
    assert!(counter(meter::ACQUISITIONS, &[("outcome", "Acquired")]) >= 2);
    // The plain Busy, and the waiting acquire's attempts (at least two).
    assert!(counter(meter::ACQUISITIONS, &[("outcome", "Busy")]) >= 3);
    assert!(counter(meter::PUBLICATIONS, &[("outcome", "Published")]) >= 1);
    assert_eq!(counter(meter::PUBLICATIONS, &[("outcome", "Superseded")]), 1);
    assert_eq!(counter(meter::RENEWALS, &[("result", "Lost")]), 1);
    assert_eq!(counter(meter::LEASES_LOST, &[("reason", "renewal")]), 1);
    assert_eq!(counter(meter::OUTCOMES_UNKNOWN, &[("settled", "unsettled")]), 1);
    assert_eq!(counter(meter::OUTCOMES_UNKNOWN, &[("settled", "AlreadyPublished")]), 1);

    // The conventions' duration histogram, in seconds, one series per
    // procedure and outcome; a refusal is an outcome, not an error.
    // Where the calls went, as the spans say it: the proxy's address and
    // port, and the test's database.
    let server = ConnectionString::parse(&proxy.ado(&db.ado())).unwrap().server();
    let (address, port) = server.rsplit_once(':').unwrap();
    let histogram = |pairs: &[(&str, &str)]| -> usize {
        let mut all = vec![
            ("db.system.name", "microsoft.sql_server"),
            ("db.operation.name", "EXECUTE"),
            ("db.namespace", db.name.as_str()),
            ("server.address", address),
            ("server.port", port),
        ];
        all.extend_from_slice(pairs);
        match seen.get(&(
            MetricKind::Histogram,
            meter::OPERATION_DURATION.to_string(),
            labels(&all),
        )) {
            Some(DebugValue::Histogram(values)) => values.len(),
            other => panic!("{pairs:?}: {other:?}"),
        }
    };
    assert_eq!(
        histogram(&[
            ("db.stored_procedure.name", "fence_api.Publish"),
            ("fencepost.outcome", "Superseded")
        ]),
        1
    );
    assert!(
        histogram(&[
            ("db.stored_procedure.name", "fence_api.Acquire"),
            ("fencepost.outcome", "Acquired")
        ]) >= 2
    );
    assert!(
        histogram(&[
            ("db.stored_procedure.name", "fence_api.Acquire"),
            ("fencepost.outcome", "Busy"),
            ("fencepost.attempt", "waiting")
        ]) >= 1
    );
    assert_eq!(units[meter::OPERATION_DURATION], Some(Unit::Seconds));
    match seen.get(&(MetricKind::Histogram, meter::HANDOVER_WAIT.to_string(), Vec::new())) {
        Some(DebugValue::Histogram(waits)) => assert_eq!(waits.len(), 1),
        other => panic!("{other:?}"),
    }
    assert_eq!(units[meter::HANDOVER_WAIT], Some(Unit::Seconds));

    // Never a key, an owner or an operation id in a label.
    for (_, name, pairs) in seen.keys() {
        for (_, value) in pairs {
            assert!(
                !value.contains(&key) && Uuid::parse_str(value).is_err(),
                "{name}: {value}"
            );
        }
    }
    // The guard is gone: none held now.
    match seen.get(&(MetricKind::Gauge, meter::GUARDS_HELD.to_string(), Vec::new())) {
        Some(DebugValue::Gauge(held)) => assert_eq!(held.into_inner(), 0.0),
        other => panic!("{other:?}"),
    }
    drop(client);
    db.drop().await;
}

/// The waiters' signal sessions are as many as `signal_sessions` says, and
/// a gauge shows them in use: with one, a second waiter finds none free
/// while the first blocks on its signal. Guards hold their signals on
/// sessions of their own, so both of a client's guards signal.
#[tokio::test]
async fn signal_sessions_keep_their_own_size_and_a_gauge_shows_them_in_use() {
    const TEST: &str = "signal_sessions_keep_their_own_size_and_a_gauge_shows_them_in_use";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let _recording = metrics::set_default_local_recorder(&recorder);

    let mut config = ClientConfig::new(db.connection_string());
    config
        .max_connections(4)
        .signal_sessions(1)
        .checkout_timeout(Duration::from_millis(500));
    let client = Client::connect_with(config).await.unwrap();
    warm_up(&client).await;
    let holder = Client::connect(&db.ado()).await.unwrap();
    let mut probe = db.connect().await;
    let mut guards = Vec::new();
    let mut keys = Vec::new();
    for name in ["signal-a", "signal-b"] {
        let key = provisioned(&holder, name).await;
        let Acquire::Acquired(lease) = holder.acquire(&key, Duration::from_secs(30)).await.unwrap() else {
            panic!("not acquired")
        };
        guards.push(holder.guard(lease));
        keys.push(key);
    }
    for key in &keys {
        let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
        while !signal_held(&mut probe, key).await {
            assert!(
                tokio::time::Instant::now() < give_up,
                "the signal of {key} was never raised"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // Both wait (a Busy, then a wait on the signal): the one that took the
    // session blocks on it, the other finds none free.
    let waits = keys
        .iter()
        .map(|key| client.acquire_waiting(key, Duration::from_secs(30), Duration::from_secs(2)));
    for answer in futures_util::future::join_all(waits).await {
        assert!(matches!(answer, Ok(Acquire::Busy { .. })), "{answer:?}");
    }
    let seen: Seen = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (kind, key) = (key.kind(), key.key());
            let mut labels: Vec<_> = key
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect();
            labels.sort();
            ((kind, key.name().to_string(), labels), value)
        })
        .collect();
    let in_use = (
        MetricKind::Gauge,
        meter::SIGNAL_SESSIONS.to_string(),
        vec![("state".to_string(), "in_use".to_string())],
    );
    match seen.get(&in_use) {
        Some(DebugValue::Gauge(used)) => assert_eq!(used.into_inner(), 1.0, "{seen:?}"),
        other => panic!("{other:?}"),
    }
    drop(guards);
    drop((client, holder));
    db.drop().await;
}
