//! Lease sets (contract v1.8) on a live engine: several workers racing for
//! overlapping sets never deadlock, never leave part of a set held, and
//! every grant raises each key's generation; a holder that lost one key of
//! its set is refused on publish, renew and AssertHolderSet, and changes
//! nothing; a set acquire sent again by the same owner confirms the same
//! grant; bad input is refused naming the parameter, with nothing changed.
//! The tests share one database: each works on keys of its own. Every
//! worker has a connection of its own, and schedules are forced with
//! barriers.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost::Client;
use fencepost::client::{
    AcquireSet, Error, KeyPublish, KeyRefusal, LeaseSet, Parameter, Publication, Publish, PublishSet, RefusalReason,
    Release, RenewSet,
};
use support::TestDatabase;
use support::caller::Caller;
use support::lease::{acquired, provisioned, state, wait_until_expired, worker};
use tiberius::{Row, ToSql};
use tokio::sync::Barrier;
use uuid::Uuid;

/// A lease no test outlasts.
const LONG: Duration = Duration::from_secs(120);

const ASSERT_SET: &str = "EXEC fence_api.AssertHolderSet @Leases = @P1, @Owner = @P2";
const ACQUIRE_SET: &str = "EXEC fence_api.AcquireSet @ResourceKeys = @P1, @Owner = @P2, @LeaseSeconds = @P3";
const PUBLISH_SET: &str = "EXEC fence_api.PublishSet @Leases = @P1, @Owner = @P2";
const RENEW_SET: &str = "EXEC fence_api.RenewSet @Leases = @P1, @Owner = @P2, @LeaseSeconds = @P3";
const FORCE_RELEASE: &str = "EXEC fence_admin.ForceRelease @ResourceKey = @P1";

fn held(answer: AcquireSet) -> LeaseSet {
    match answer {
        AcquireSet::Acquired(set) => set,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

/// The rows a set procedure answered, or the error the server raised.
pub(super) async fn rows(caller: &mut Caller, sql: &str, args: &[&dyn ToSql]) -> Result<Vec<Row>, (u32, String)> {
    let result = match caller.conn.query(sql, args).await {
        Ok(stream) => stream.into_first_result().await,
        Err(e) => Err(e),
    };
    match result {
        Ok(rows) => Ok(rows),
        Err(tiberius::error::Error::Server(token)) => Err((token.code(), token.message().to_string())),
        Err(other) => panic!("{sql}: {other}"),
    }
}

/// `@Leases` of the set procedures for `set`, by hand, as another
/// language's caller would write it.
fn leases_json(set: &LeaseSet) -> String {
    let items: Vec<String> = set
        .leases()
        .iter()
        .map(|lease| serde_json::json!({"ResourceKey": lease.key(), "Generation": lease.generation()}).to_string())
        .collect();
    format!("[{}]", items.join(","))
}

#[tokio::test]
async fn overlapping_sets_from_several_workers_never_deadlock_never_hold_part_and_raise_every_generation() {
    const TEST: &str =
        "overlapping_sets_from_several_workers_never_deadlock_never_hold_part_and_raise_every_generation";
    const WORKERS: usize = 4;
    const ROUNDS: usize = 6;
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let setup = worker(&db.ado()).await;
    let mut keys = Vec::new();
    for i in 0..WORKERS + 2 {
        keys.push(provisioned(&setup, &format!("overlap{i}")).await);
    }
    let keys = Arc::new(keys);
    // The generation each key was last granted at, written by the holder
    // while it holds the key, so no other grant of it can interleave.
    let last = Arc::new(Mutex::new(HashMap::<String, i64>::new()));
    let grants = Arc::new(Mutex::new(0usize));
    let step = Arc::new(Barrier::new(WORKERS));
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let client = worker(&db.ado()).await;
        let (keys, last, grants, step) = (keys.clone(), last.clone(), grants.clone(), step.clone());
        let observer = worker(&db.ado()).await;
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                // Three neighbouring keys, each worker's overlapping the
                // next one's, sent in an order of the worker's own (odd
                // workers descending): the server must lock them in one.
                let mut mine: Vec<&str> = (0..3).map(|i| keys[(w + round + i) % keys.len()].as_str()).collect();
                if w % 2 == 1 {
                    mine.reverse();
                }
                step.wait().await;
                // One attempt: `acquire_set` would retry a deadlock victim
                // (1205) as the same owner and hide it.
                let answer = client.acquire_set_as(&mine, Uuid::new_v4(), LONG).await;
                step.wait().await;
                match answer {
                    Ok(AcquireSet::Acquired(set)) => {
                        assert_eq!(set.leases().len(), 3);
                        for lease in set.leases() {
                            let mut last = last.lock().unwrap();
                            let before = last.get(lease.key()).copied().unwrap_or(0);
                            assert!(
                                lease.generation() > before,
                                "{} granted at {} after {before}",
                                lease.key(),
                                lease.generation()
                            );
                            last.insert(lease.key().to_string(), lease.generation());
                        }
                        for lease in set.leases() {
                            let (generation, is_held, _, _) = state(&observer, lease.key()).await;
                            assert!(is_held && generation == lease.generation(), "{lease:?} is not held");
                        }
                        *grants.lock().unwrap() += 1;
                        let released = client.release_set(&set).await.unwrap();
                        assert!(released.iter().all(|(_, r)| *r == Release::Released), "{released:?}");
                    }
                    Ok(AcquireSet::Refused(keys)) => {
                        assert!(
                            keys.iter()
                                .any(|(_, refusal)| matches!(refusal, KeyRefusal::Busy { .. })),
                            "refused with no busy key: {keys:?}"
                        );
                    }
                    // Nothing here holds a row for the 5 s AcquireSet waits:
                    // that long a wait is two sets waiting for each other.
                    Ok(other) => panic!("worker {w}, round {round}: {other:?}"),
                    Err(error) => panic!("worker {w}, round {round}: {error}"),
                }
                step.wait().await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert!(
        *grants.lock().unwrap() >= ROUNDS,
        "too few sets were granted to show anything"
    );
    // A refused call that held part of its set would leave that key held.
    for key in keys.iter() {
        let (_, is_held, _, _) = state(&setup, key).await;
        assert!(!is_held, "{key} is still held after every granted set was released");
    }
}

#[tokio::test]
async fn a_set_acquire_is_all_or_nothing_and_names_each_keys_reason() {
    const TEST: &str = "a_set_acquire_is_all_or_nothing_and_names_each_keys_reason";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [client, rival] = support::lease::workers(&db.ado()).await;
    let free = provisioned(&client, "free").await;
    let busy = provisioned(&client, "busy").await;
    let missing = format!("missing:{}", Uuid::new_v4().simple());
    let rivals = acquired(rival.acquire(&busy, LONG).await.unwrap());
    let before = state(&client, &free).await;

    let answer = client.acquire_set(&[&free, &busy, &missing], LONG).await.unwrap();
    let AcquireSet::Refused(keys) = answer else {
        panic!("expected Refused, got {answer:?}");
    };
    let reasons: HashMap<String, KeyRefusal> = keys.into_iter().collect();
    assert_eq!(reasons[&free], KeyRefusal::Withheld);
    assert_eq!(reasons[&missing], KeyRefusal::NotProvisioned);
    match reasons[&busy] {
        KeyRefusal::Busy { until, remaining } => {
            assert_eq!(until, rivals.until());
            assert!(remaining > Duration::ZERO);
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    assert_eq!(state(&client, &free).await, before, "the free key was taken in part");

    assert_eq!(rival.release(&rivals).await.unwrap(), Release::Released);
    let set = held(client.acquire_set(&[&free, &busy], LONG).await.unwrap());
    assert_eq!(set.lease(&free).unwrap().generation(), before.0 + 1);
    assert_eq!(set.lease(&busy).unwrap().generation(), rivals.generation() + 1);
    assert!(set.leases().iter().all(|lease| lease.until() == set.until()));
}

#[tokio::test]
async fn a_lost_reply_on_a_set_acquire_is_confirmed_by_its_retry() {
    const TEST: &str = "a_lost_reply_on_a_set_acquire_is_confirmed_by_its_retry";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [client, rival] = support::lease::workers(&db.ado()).await;
    let a = provisioned(&client, "a").await;
    let b = provisioned(&client, "b").await;
    let owner = Uuid::new_v4();
    // The first reply is taken as lost: only the server knows of the grant.
    let first = held(client.acquire_set_as(&[&a, &b], owner, LONG).await.unwrap());
    let busy = rival.acquire_set(&[&b], LONG).await.unwrap();
    assert!(matches!(busy, AcquireSet::Refused(_)), "{busy:?}");

    let again = held(client.acquire_set_as(&[&b, &a], owner, LONG).await.unwrap());
    for lease in first.leases() {
        let confirmed = again.lease(lease.key()).unwrap();
        assert_eq!(
            confirmed.generation(),
            lease.generation(),
            "the retry raised {}",
            lease.key()
        );
        assert!(confirmed.until() >= lease.until());
    }
    let (generation, is_held, until, _) = state(&client, &a).await;
    assert!(is_held && generation == first.lease(&a).unwrap().generation());
    assert_eq!(until, Some(again.until()));

    // A retry after one key was taken by another owner grants nothing.
    let released = client.release_set(&again).await.unwrap();
    assert!(released.iter().all(|(_, r)| *r == Release::Released));
    let rivals = acquired(rival.acquire(&b, LONG).await.unwrap());
    let before_a = state(&client, &a).await;
    let late = client.acquire_set_as(&[&a, &b], owner, LONG).await.unwrap();
    assert!(matches!(late, AcquireSet::Refused(_)), "{late:?}");
    assert_eq!(state(&client, &a).await, before_a);
    assert_eq!(rival.release(&rivals).await.unwrap(), Release::Released);
}

#[tokio::test]
async fn a_holder_that_lost_one_key_of_its_set_is_refused_everywhere_and_changes_nothing() {
    const TEST: &str = "a_holder_that_lost_one_key_of_its_set_is_refused_everywhere_and_changes_nothing";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [client, rival] = support::lease::workers(&db.ado()).await;
    let mut service = Caller::new(db.connect().await);
    let mut operator = Caller::new(db.connect().await);
    let a = provisioned(&client, "a").await;
    let b = provisioned(&client, "b").await;
    let mut set = held(client.acquire_set(&[&a, &b], LONG).await.unwrap());
    let b_before = state(&client, &b).await;

    // An operator fences a; a rival takes it under the next generation.
    assert_eq!(operator.call(FORCE_RELEASE, &[&a.as_str()]).await.outcome(), "Fenced");
    let rivals = acquired(rival.acquire(&a, LONG).await.unwrap());

    let publishes = [
        KeyPublish {
            key: &a,
            operation_id: Uuid::new_v4(),
            payload: "stale a",
        },
        KeyPublish {
            key: &b,
            operation_id: Uuid::new_v4(),
            payload: "stale b",
        },
    ];
    let answer = client.publish_set(&set, &publishes).await.unwrap();
    let PublishSet::Refused(refused) = answer else {
        panic!("expected Refused, got {answer:?}");
    };
    let refused: HashMap<String, Option<RefusalReason>> = refused.into_iter().collect();
    assert_eq!(refused[&a], Some(RefusalReason::Superseded));
    assert_eq!(refused[&b], None, "b alone would have been accepted");
    assert_eq!(
        client.read_publication(&b).await.unwrap(),
        Publication::NothingPublished,
        "the refused set wrote b"
    );

    // AssertHolderSet throws for the lost key, naming it, and rolls the
    // caller's transaction back.
    service.begin("READ COMMITTED").await.unwrap();
    service
        .batch("CREATE TABLE #Written (Id int); INSERT INTO #Written VALUES (1);")
        .await
        .unwrap();
    let asserted = rows(&mut service, ASSERT_SET, &[&leases_json(&set), &set.owner()]).await;
    let (number, message) = asserted.expect_err("a lost key was asserted as held");
    assert_eq!(number, 50110, "{message}");
    assert!(message.contains(&a), "the refusal does not name the key: {message}");
    assert_eq!(service.trancount().await, 0, "the caller's transaction is still open");

    // Renewing the set renews nothing: b runs out at its old expiry.
    assert_eq!(
        client.renew_set(&mut set).await.unwrap(),
        RenewSet::Lost { lost: vec![a.clone()] }
    );
    assert_eq!(state(&client, &b).await, b_before, "b was renewed with a lost set");

    // The rival's lease on a is untouched by all of it, and publishes.
    let released = client.release_set(&set).await.unwrap();
    let released: HashMap<String, Release> = released.into_iter().collect();
    assert_eq!(released[&a], Release::NotHolder);
    assert_eq!(released[&b], Release::Released);
    assert_eq!(
        rival.publish(&rivals, Uuid::new_v4(), "fresh a").await.unwrap(),
        Publish::Published
    );
}

#[tokio::test]
async fn a_set_publishes_every_payload_exactly_once_and_its_replay_changes_nothing() {
    const TEST: &str = "a_set_publishes_every_payload_exactly_once_and_its_replay_changes_nothing";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let mut service = Caller::new(db.connect().await);
    // Keys and payloads holding what JSON must escape.
    let a = provisioned(&client, "quote\"and\\slash").await;
    let b = provisioned(&client, "line\nbreak\ttab").await;
    let mut set = held(client.acquire_set(&[&a, &b], LONG).await.unwrap());
    assert!(matches!(
        client.renew_set(&mut set).await.unwrap(),
        RenewSet::Renewed { .. }
    ));

    service.begin("READ COMMITTED").await.unwrap();
    let holding = rows(&mut service, ASSERT_SET, &[&leases_json(&set), &set.owner()])
        .await
        .unwrap();
    assert_eq!(holding.len(), 2);
    assert!(
        holding
            .iter()
            .all(|row| row.get::<&str, _>("Outcome") == Some("Holding"))
    );
    service.commit().await.unwrap();

    let payload_a = "{\"q\":\"a \\\" b\",\"path\":\"C:\\\\x\"}\n\u{1}é😀";
    let publishes = [
        KeyPublish {
            key: &a,
            operation_id: Uuid::new_v4(),
            payload: payload_a,
        },
        KeyPublish {
            key: &b,
            operation_id: Uuid::new_v4(),
            payload: "",
        },
    ];
    let first = client.publish_set(&set, &publishes).await.unwrap();
    let PublishSet::Accepted(accepted) = first else {
        panic!("expected Accepted, got {first:?}");
    };
    assert!(accepted.iter().all(|(_, p)| *p == Publish::Published), "{accepted:?}");
    let replay = client.publish_set_and_release(&set, &publishes).await.unwrap();
    let PublishSet::Accepted(replayed) = replay else {
        panic!("expected Accepted, got {replay:?}");
    };
    assert!(
        replayed.iter().all(|(_, p)| *p == Publish::AlreadyPublished),
        "{replayed:?}"
    );
    for (key, payload) in [(&a, payload_a), (&b, "")] {
        match client.read_publication(key).await.unwrap() {
            Publication::Found {
                generation,
                payload: read,
                ..
            } => {
                assert_eq!(read, payload, "{key}'s payload was not read exactly");
                assert_eq!(generation, set.lease(key).unwrap().generation());
            }
            other => panic!("{key}: {other:?}"),
        }
    }
    // A replay releases nothing; the set is still held until released.
    let (_, is_held, _, _) = state(&client, &a).await;
    assert!(is_held);
    let released = client.release_set(&set).await.unwrap();
    assert!(released.iter().all(|(_, r)| *r == Release::Released));
}

#[tokio::test]
async fn a_set_whose_leases_ran_out_is_lost_and_never_revived() {
    const TEST: &str = "a_set_whose_leases_ran_out_is_lost_and_never_revived";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let a = provisioned(&client, "a").await;
    let b = provisioned(&client, "b").await;
    let mut set = held(client.acquire_set(&[&a, &b], Duration::from_secs(1)).await.unwrap());
    wait_until_expired(&client, &a).await;
    wait_until_expired(&client, &b).await;
    let answer = client.renew_set(&mut set).await.unwrap();
    assert_eq!(
        answer,
        RenewSet::Lost {
            lost: vec![a.clone(), b.clone()]
        }
    );
    let publishes = [
        KeyPublish {
            key: &a,
            operation_id: Uuid::new_v4(),
            payload: "late",
        },
        KeyPublish {
            key: &b,
            operation_id: Uuid::new_v4(),
            payload: "late",
        },
    ];
    let PublishSet::Refused(refused) = client.publish_set(&set, &publishes).await.unwrap() else {
        panic!("an expired set published");
    };
    assert!(
        refused.iter().all(|(_, r)| *r == Some(RefusalReason::Expired)),
        "{refused:?}"
    );
    let (_, is_held, _, _) = state(&client, &a).await;
    assert!(!is_held, "an expired set was revived");
}

#[tokio::test]
async fn bad_input_to_the_set_procedures_is_refused_naming_the_parameter_and_changes_nothing() {
    const TEST: &str = "bad_input_to_the_set_procedures_is_refused_naming_the_parameter_and_changes_nothing";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let mut caller = Caller::new(db.connect().await);
    let a = provisioned(&client, "a").await;
    let before = state(&client, &a).await;
    let owner = Uuid::new_v4();
    let seconds = 60i32;
    let quoted = serde_json::to_string(&a).unwrap();
    for (keys, what) in [
        ("not json".to_string(), "text"),
        (format!("{{\"k\": {quoted}}}"), "an object"),
        ("[]".to_string(), "no key"),
        (format!("[{quoted}, 1]"), "a number"),
        (format!("[{quoted}, null]"), "a null"),
        (format!("[{quoted}, {quoted}]"), "a key twice"),
        (format!("[{quoted}, \"\"]"), "an empty key"),
        (format!("[{quoted}, \"trailing \"]"), "a trailing space"),
        (format!("[{quoted}, \"{}\"]", "x".repeat(257)), "a long key"),
    ] {
        let answer = rows(&mut caller, ACQUIRE_SET, &[&keys.as_str(), &owner, &seconds]).await;
        let (number, message) = answer.expect_err(what);
        assert_eq!(number, 50134, "{what}: {message}");
        assert!(message.contains("@ResourceKeys"), "{what}: {message}");
    }
    let nil = Uuid::nil();
    let (number, message) = rows(
        &mut caller,
        ACQUIRE_SET,
        &[&format!("[{quoted}]").as_str(), &nil, &seconds],
    )
    .await
    .expect_err("a nil owner");
    assert_eq!(number, 50102, "{message}");

    let item = |generation: &str| format!("[{{\"ResourceKey\": {quoted}, \"Generation\": {generation}}}]");
    for (leases, what) in [
        (item("0"), "generation 0"),
        (item("\"x\""), "a generation of letters"),
        (item("-1"), "a negative generation"),
        (item("1.5"), "a fraction"),
        ("[{\"Generation\": 1}]".to_string(), "no key"),
        ("[1]".to_string(), "no object"),
    ] {
        let answer = rows(&mut caller, RENEW_SET, &[&leases.as_str(), &owner, &seconds]).await;
        let (number, message) = answer.expect_err(what);
        assert_eq!(number, 50135, "{what}: {message}");
        assert!(message.contains("@Leases"), "{what}: {message}");
    }
    let publish = format!(
        "[{{\"ResourceKey\": {quoted}, \"Generation\": 1, \"OperationId\": \"not an id\", \"Payload\": \"p\"}}]"
    );
    let (number, message) = rows(&mut caller, PUBLISH_SET, &[&publish.as_str(), &owner])
        .await
        .expect_err("a bad operation id");
    assert_eq!(number, 50135, "{message}");
    assert!(message.contains("OperationId"), "{message}");
    assert_eq!(state(&client, &a).await, before, "bad input changed the key");

    // The client refuses the same before any round trip.
    let error = client.acquire_set(&[&a, &a], LONG).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                parameter: Parameter::ResourceKeys,
                ..
            }
        ),
        "{error:?}"
    );
}

/// A set's keys of every shape a key may take reach the server exactly:
/// what one acquire granted, single-key calls find under the same keys.
#[tokio::test]
async fn keys_of_every_shape_are_read_exactly() {
    const TEST: &str = "keys_of_every_shape_are_read_exactly";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client: Client = worker(&db.ado()).await;
    let tag = Uuid::new_v4().simple().to_string();
    let shapes = [
        format!("{tag}\\"),
        format!("{tag}\\n"),
        format!("{tag}\u{1}\u{1f}"),
        format!("{tag}\\u0041"),
        format!("{tag}\""),
        format!("{tag}\\\""),
        format!("\"{tag}"),
        format!("{tag}😀{}", "é".repeat(120)),
        format!("{tag}A"),
        format!("{tag}a"),
    ];
    for key in &shapes {
        client.provision(key).await.unwrap();
    }
    let keys: Vec<&str> = shapes.iter().map(String::as_str).collect();
    let set = held(client.acquire_set(&keys, LONG).await.unwrap());
    for key in &shapes {
        let lease = set.lease(key).unwrap_or_else(|| panic!("no lease for {key:?}"));
        let (generation, is_held, _, _) = state(&client, key).await;
        assert!(is_held && generation == lease.generation(), "{key:?}");
    }
    let released = client.release_set(&set).await.unwrap();
    assert!(released.iter().all(|(_, r)| *r == Release::Released), "{released:?}");
}
