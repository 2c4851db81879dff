//! A lease set held by the client's set guard, fenced transactions over a
//! set and `run_fenced_set` on a live engine: the guard keeps every key past
//! its lease length; a key taken over fires the set's token and refuses the
//! set's fenced transaction, and the commit asserts every key again so a
//! superseded key rolls back what the work wrote; `run_fenced_set` publishes
//! every key exactly once, also when the publish's reply is lost. The tests
//! share one database: each works on keys and tables of its own.

use crate::support;

use std::time::Duration;

use fencepost::client::{
    AcquireSet, BeginFenced, Error, FencedOutcome, FencedSet, LeaseSet, LostReason, Publication, RefusalReason, Release,
};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::lease::{provisioned, state, warm_up, worker, workers};
use support::proxy::{Cut, Proxy};
use support::report_table::{self, insert_into, writers};

/// Long enough to wait past in a test, with room for the first renewal on a
/// fresh session: Babelfish 4.2 spends 2 to 3.5 s on a session's first call
/// of a lease-set procedure (docs/engines.md), and the renewal must be
/// answered between a third of the lease and its end.
const LEASE: Duration = Duration::from_secs(8);
/// A lease no test outlasts.
const LONG: Duration = Duration::from_secs(60);

fn held(answer: AcquireSet) -> LeaseSet {
    match answer {
        AcquireSet::Acquired(set) => set,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

async fn keys(client: &Client, count: usize) -> Vec<String> {
    let mut keys = Vec::with_capacity(count);
    for _ in 0..count {
        keys.push(provisioned(client, "set").await);
    }
    keys
}

fn refs(keys: &[String]) -> Vec<&str> {
    keys.iter().map(String::as_str).collect()
}

/// A fenced transaction of `guard` that writes a row with `insert` and then
/// raises `key`'s generation itself, as a successor's grant would: its
/// commit must find the key superseded.
async fn superseding_inside(
    guard: &fencepost::client::LeaseSetGuard,
    insert: &str,
    key: &str,
) -> FencedOutcome<(), Error> {
    let supersede = "UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceKey = @P1";
    guard
        .fenced_transaction(async |tx| {
            tx.execute(insert, &[&"superseded"]).await?;
            tx.execute(supersede, &[&key]).await?;
            Ok::<_, Error>(())
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn a_set_guard_keeps_every_key_past_its_lease_length_and_release_gives_them_back() {
    const TEST: &str = "a_set_guard_keeps_every_key_past_its_lease_length_and_release_gives_them_back";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, observer] = workers(&db.ado()).await;
    let keys = keys(&holder, 3).await;
    let set = held(holder.acquire_set(&refs(&keys), LEASE).await.unwrap());
    let first_deadline = set.local_deadline();
    let guard = holder.guard_set(set);
    let token = guard.token();

    // Waiting out the first lease is the point: a guard that does not renew
    // every key loses one by then.
    tokio::time::sleep_until(first_deadline + LEASE / 2).await;
    assert_eq!(guard.lost_reason(), None);
    assert!(!token.is_cancelled(), "the token was cancelled while the set was held");
    assert!(
        guard.lease_set().local_deadline() > first_deadline,
        "no renewal was recorded"
    );
    for lease in guard.lease_set().leases() {
        let (generation, held, _, _) = state(&observer, lease.key()).await;
        assert!(held, "{}: the key ended although the guard renews the set", lease.key());
        assert_eq!(generation, lease.generation(), "{}", lease.key());
    }

    let released = guard.release().await.unwrap();
    assert_eq!(released.len(), keys.len());
    assert!(
        released.iter().all(|(_, answer)| *answer == Release::Released),
        "{released:?}"
    );
    assert!(token.is_cancelled(), "release() left the guard's token live");
    for key in &keys {
        let (_, held, _, _) = state(&observer, key).await;
        assert!(!held, "{key}: release left the key held");
    }
    drop((holder, observer));
    db.drop().await;
}

/// An operator fences the holder out of one key of its set and a rival takes
/// that key: the set is lost as a whole, its token fires naming the key, the
/// set's fenced transaction is refused, and releasing gives back the keys
/// the set still held while the rival keeps its own.
#[tokio::test]
async fn a_key_taken_over_fires_the_sets_token_and_its_fenced_transaction_is_refused() {
    const TEST: &str = "a_key_taken_over_fires_the_sets_token_and_its_fenced_transaction_is_refused";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let report = report_table::create(&db, true).await;
    let insert = insert_into(&report);
    let [holder, rival] = workers(&db.ado()).await;
    let keys = keys(&holder, 3).await;
    let guard = holder.guard_set(held(holder.acquire_set(&refs(&keys), LEASE).await.unwrap()));
    let token = guard.token();
    let taken = &keys[1];

    db.exec(&format!("EXEC fence_admin.ForceRelease @ResourceKey = N'{taken}';"))
        .await;
    let successor = match rival.acquire(taken, LONG).await.unwrap() {
        fencepost::client::Acquire::Acquired(lease) => lease,
        other => panic!("the rival could not take the key: {other:?}"),
    };

    // The next renewal, at most a third of the lease away, answers Lost.
    let lost = tokio::time::timeout(LEASE, guard.lost())
        .await
        .expect("lost() never resolved after a key was taken over");
    assert_eq!(lost.reason, LostReason::Renewal);
    assert_eq!(lost.key.as_deref(), Some(taken.as_str()));
    assert!(token.is_cancelled(), "the set's token outlived a lost key");

    let written = guard
        .fenced_transaction(async |tx| {
            tx.execute(&insert, &[&"stale holder"]).await?;
            Ok::<_, Error>(())
        })
        .await
        .unwrap();
    assert!(
        matches!(written, FencedOutcome::Refused(RefusalReason::Superseded)),
        "{written:?}"
    );
    assert_eq!(
        writers(&db, &report).await,
        Vec::<String>::new(),
        "a stale holder's row landed"
    );

    let released = guard.release().await.unwrap();
    for (key, answer) in &released {
        let expected = if key == taken {
            Release::NotHolder
        } else {
            Release::Released
        };
        assert_eq!(*answer, expected, "{key}");
    }
    let (generation, held, _, _) = state(&rival, taken).await;
    assert!(held, "the rival lost the key it took");
    assert_eq!(generation, successor.generation());
    drop((holder, rival));
    db.drop().await;
}

/// The commit of a set's fenced transaction asserts every key again: a key
/// whose generation moved on inside the transaction (what a takeover looks
/// like to the fence) refuses the commit with 50110, and everything the work
/// wrote is rolled back, the move too.
#[tokio::test]
async fn the_commit_of_a_sets_fenced_transaction_asserts_every_key_and_rolls_back_on_a_superseded_one() {
    const TEST: &str = "the_commit_of_a_sets_fenced_transaction_asserts_every_key_and_rolls_back_on_a_superseded_one";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let report = report_table::create(&db, true).await;
    let insert = insert_into(&report);
    let [holder, observer] = workers(&db.ado()).await;
    let keys = keys(&holder, 3).await;
    let guard = holder.guard_set(held(holder.acquire_set(&refs(&keys), LONG).await.unwrap()));
    let last = keys.iter().max().unwrap().clone();
    let generation_before = state(&observer, &last).await.0;

    // Committed under the whole set.
    let kept = guard
        .fenced_transaction(async |tx| {
            assert_eq!(tx.lease_set().map(|set| set.leases().len()), Some(3));
            tx.execute(&insert, &[&"holder"]).await?;
            Ok::<_, Error>(())
        })
        .await
        .unwrap();
    assert!(matches!(kept, FencedOutcome::Committed(())), "{kept:?}");

    let refused = superseding_inside(&guard, &insert, &last).await;
    assert!(
        matches!(refused, FencedOutcome::Refused(RefusalReason::Superseded)),
        "{refused:?}"
    );
    assert_eq!(
        writers(&db, &report).await,
        ["holder"],
        "a refused commit left rows behind"
    );
    assert_eq!(
        state(&observer, &last).await.0,
        generation_before,
        "the move was not rolled back"
    );
    // Nothing was lost: the set is still held, and a begin is still granted.
    match guard.begin_fenced().await.unwrap() {
        BeginFenced::Holding(tx) => tx.rollback().await,
        other => panic!("the set is still held, yet {other:?}"),
    }
    assert!(
        guard
            .release()
            .await
            .unwrap()
            .iter()
            .all(|(_, r)| *r == Release::Released)
    );
    drop((holder, observer));
    db.drop().await;
}

/// `run_fenced_set` publishes each key's payload under the set's generation
/// once: the first publish reaches the server and commits, its reply is
/// cut, and the replay with the same operation ids answers
/// `AlreadyPublished`, so the run reads as published and each key holds one
/// publish record.
#[tokio::test]
async fn run_fenced_set_publishes_every_key_exactly_once_also_when_the_publishs_reply_is_lost() {
    const TEST: &str = "run_fenced_set_publishes_every_key_exactly_once_also_when_the_publishs_reply_is_lost";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let mut config = ClientConfig::new(ConnectionString::parse(&proxy.ado(&db.ado())).unwrap());
    config
        .max_connections(2)
        .call_timeout(Duration::from_secs(6))
        .release_timeout(Duration::from_millis(500));
    let client = Client::connect_with(config).await.unwrap();
    let direct = db.ado();
    let ((), observer) = tokio::join!(warm_up(&client), worker(&direct));
    let keys = keys(&observer, 3).await;

    let fenced = client
        .run_fenced_set(&refs(&keys), LONG, |_| async {
            // The publish reaches the server, which commits it; its reply
            // is cut.
            proxy.cut_next_naming(Cut::BeforeReply, "fence_api.PublishSet");
            Ok::<_, std::convert::Infallible>(
                keys.iter()
                    .map(|key| (key.clone(), format!("result of {key}")))
                    .collect(),
            )
        })
        .await
        .unwrap();
    assert!(!proxy.cut_pending(), "the publish's reply was never cut");
    let FencedSet::Published { set, operation_ids } = fenced else {
        panic!("expected Published, got {fenced:?}");
    };
    assert_eq!(operation_ids.len(), keys.len());
    for lease in set.leases() {
        let key = lease.key();
        match observer.read_publication(key).await.unwrap() {
            Publication::Found {
                generation, payload, ..
            } => {
                assert_eq!(payload, format!("result of {key}"));
                assert_eq!(generation, lease.generation(), "{key}");
            }
            other => panic!("{key}: {other:?}"),
        }
        let recorded = db
            .query(&format!(
                "SELECT COUNT(*) FROM fence.PublishedOperation WHERE ResourceKey = N'{key}'"
            ))
            .await;
        assert_eq!(recorded[0].get::<i32, _>(0), Some(1), "{key}: not written exactly once");
        let (_, held, _, _) = state(&observer, key).await;
        assert!(!held, "{key}: the accepted publish did not give the key back");
    }
    drop((client, observer));
    db.drop().await;
}

/// The commit names the set as one `N'...'` literal: keys holding a quote, a
/// backslash, JSON's escapes and a character outside the Basic Multilingual
/// Plane are asserted as they are (a superseded one refuses the commit),
/// and a set of a thousand keys, past the 8,000 bytes a session context
/// value holds, commits.
#[tokio::test]
async fn a_sets_fenced_transaction_commits_keys_of_any_spelling_and_a_thousand_keys() {
    const TEST: &str = "a_sets_fenced_transaction_commits_keys_of_any_spelling_and_a_thousand_keys";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let report = report_table::create(&db, true).await;
    let insert = insert_into(&report);
    let [holder, observer] = workers(&db.ado()).await;
    let mut awkward = Vec::new();
    for name in [
        "it's",
        "O''Brien",
        "back\\slash",
        "\"quoted\"",
        "tab\tand\nline",
        "astral \u{1F600}",
    ] {
        awkward.push(provisioned(&holder, name).await);
    }
    let guard = holder.guard_set(held(holder.acquire_set(&refs(&awkward), LONG).await.unwrap()));
    let kept = guard
        .fenced_transaction(async |tx| {
            tx.execute(&insert, &[&"awkward"]).await?;
            Ok::<_, Error>(())
        })
        .await
        .unwrap();
    assert!(matches!(kept, FencedOutcome::Committed(())), "{kept:?}");

    let astral = awkward.iter().find(|key| key.starts_with("astral")).unwrap().clone();
    let refused = superseding_inside(&guard, &insert, &astral).await;
    assert!(
        matches!(refused, FencedOutcome::Refused(RefusalReason::Superseded)),
        "the commit did not assert the key {astral:?}: {refused:?}"
    );
    assert!(
        guard
            .release()
            .await
            .unwrap()
            .iter()
            .all(|(_, r)| *r == Release::Released)
    );

    let thousand = keys(&holder, 1000).await;
    let guard = holder.guard_set(held(holder.acquire_set(&refs(&thousand), LONG).await.unwrap()));
    let kept = guard
        .fenced_transaction(async |tx| {
            tx.execute(&insert, &[&"thousand"]).await?;
            Ok::<_, Error>(())
        })
        .await
        .unwrap();
    assert!(matches!(kept, FencedOutcome::Committed(())), "{kept:?}");
    assert_eq!(writers(&db, &report).await, ["awkward", "thousand"]);
    let released = guard.release().await.unwrap();
    assert_eq!(released.len(), 1000);
    assert!(released.iter().all(|(_, r)| *r == Release::Released));
    let (_, still_held, _, _) = state(&observer, &thousand[999]).await;
    assert!(!still_held);
    drop((holder, observer));
    db.drop().await;
}
