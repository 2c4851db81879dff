//! Lease sets at the edges of their input and outcomes, on a live engine:
//! a key ending in a quotation mark, generations of 19 digits after a
//! recovery, and a publish-and-release whose one key was a replay.

use crate::support;

use std::time::Duration;

use fencepost::client::{AcquireSet, KeyPublish, LeaseSet, Publish, PublishSet, RenewSet};
use support::TestDatabase;
use support::caller::Caller;
use support::lease::{provisioned, state, worker};
use uuid::Uuid;

const LONG: Duration = Duration::from_secs(120);

fn held(answer: AcquireSet) -> LeaseSet {
    match answer {
        AcquireSet::Acquired(set) => set,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

/// A key may hold any character (contract: keys as `@ResourceKey`), a
/// quotation mark at its end included; `Acquire` takes such a key.
#[tokio::test]
async fn a_key_ending_in_a_quotation_mark_is_acquired_as_a_set() {
    const TEST: &str = "a_key_ending_in_a_quotation_mark_is_acquired_as_a_set";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let quoted = provisioned(&client, "ends-with-quote").await + "\"";
    client.provision(&quoted).await.unwrap();
    let other = provisioned(&client, "plain").await;
    let answer = client.acquire_set(&[&quoted, &other], LONG).await;
    let set = held(answer.unwrap_or_else(|e| panic!("the set of {quoted:?} was refused: {e}")));
    let released = client.release_set(&set).await.unwrap();
    assert_eq!(released.len(), 2);
}

/// Generations reach 2^62 after a recovery (`Recover @Floor` up to
/// 2^62 - 1); a set granted such generations must renew and release.
#[tokio::test]
async fn a_set_granted_generations_above_ten_to_the_eighteenth_renews_and_releases() {
    const TEST: &str = "a_set_granted_generations_above_ten_to_the_eighteenth_renews_and_releases";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let a = provisioned(&client, "a").await;
    let b = provisioned(&client, "b").await;
    let mut operator = Caller::new(db.connect().await);
    let floor: i64 = 2_000_000_000_000_000_000;
    let recovered = operator
        .call(
            "EXEC fence_admin.Recover @RecoveryId = @P1, @Floor = @P2",
            &[&Uuid::new_v4(), &floor],
        )
        .await;
    assert_eq!(recovered.outcome(), "Recovered");
    let mut set = held(client.acquire_set(&[&a, &b], LONG).await.unwrap());
    assert!(set.leases().iter().all(|l| l.generation() > floor));
    let renewed = client.renew_set(&mut set).await;
    let released = client.release_set(&set).await;
    db.drop().await;
    assert!(
        matches!(renewed, Ok(RenewSet::Renewed { .. })),
        "RenewSet of the set AcquireSet just granted: {renewed:?}"
    );
    assert!(
        released.is_ok(),
        "ReleaseSet of the set AcquireSet just granted: {released:?}"
    );
}

/// `PublishSet` with `@Release = 1`: "every lease released too" when the
/// answer is accepted, a replayed key included when the call published
/// another.
#[tokio::test]
async fn a_set_published_and_released_releases_a_key_whose_publish_was_a_replay() {
    const TEST: &str = "a_set_published_and_released_releases_a_key_whose_publish_was_a_replay";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let a = provisioned(&client, "a").await;
    let b = provisioned(&client, "b").await;
    let set = held(client.acquire_set(&[&a, &b], LONG).await.unwrap());
    let first = Uuid::new_v4();
    assert_eq!(
        client.publish(set.lease(&a).unwrap(), first, "one").await.unwrap(),
        Publish::Published
    );
    let publishes = [
        KeyPublish {
            key: &a,
            operation_id: first,
            payload: "one",
        },
        KeyPublish {
            key: &b,
            operation_id: Uuid::new_v4(),
            payload: "two",
        },
    ];
    let answer = client.publish_set_and_release(&set, &publishes).await.unwrap();
    assert!(matches!(answer, PublishSet::Accepted(_)), "{answer:?}");
    let (_, a_held, _, _) = state(&client, &a).await;
    let (_, b_held, _, _) = state(&client, &b).await;
    assert!(!b_held, "b is still held");
    assert!(
        !a_held,
        "publish_set_and_release answered Accepted, yet a is still held"
    );
}
