//! Publishing through the lease guard: a publish keeps the lease renewed,
//! and a publish-and-release stops the renewals first, so that no renewal
//! after it can answer `Lost` and make a published result read as lost. The
//! tests share one database: each works on keys of its own.

use crate::support;

use std::time::Duration;

use fencepost::client::{Guarded, Publication, Publish, Release};
use support::TestDatabase;
use support::lease::{acquired, provisioned, state, workers};
use uuid::Uuid;

/// Renewed every second.
const LEASE: Duration = Duration::from_secs(3);

#[tokio::test]
async fn a_publish_and_release_through_the_guard_sends_no_renewal_after_it() {
    const TEST: &str = "a_publish_and_release_through_the_guard_sends_no_renewal_after_it";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [client, observer] = workers(&db.ado()).await;
    let key = provisioned(&client, "guard-publish").await;
    let guard = client.guard(acquired(client.acquire(&key, LEASE).await.unwrap()));
    let generation = guard.lease().generation();

    let answer = guard.publish_and_release(Uuid::new_v4(), "the result").await.unwrap();
    assert_eq!(answer, Publish::Published);
    // The client's own count of procedure calls, renewals included: the
    // guard's one request after the release, letting go of its handover
    // signal, is no procedure call and no renewal.
    let sent = client.requests_sent();
    // Past two renewal periods: a renewal still running would have gone out
    // and answered `Lost` for the lease the publish gave back.
    tokio::time::sleep(LEASE * 2 / 3 + Duration::from_millis(500)).await;
    assert_eq!(
        client.requests_sent(),
        sent,
        "a renewal went out after the publish released"
    );
    let (_, held, _, published) = state(&observer, &key).await;
    assert!(!held, "the publish did not release");
    assert_eq!(published, Some(generation));
    assert!(matches!(
        observer.read_publication(&key).await.unwrap(),
        Publication::Found { ref payload, .. } if payload == "the result"
    ));
    drop((client, observer));
    db.drop().await;
}

#[tokio::test]
async fn a_publish_through_the_guard_keeps_the_lease_renewed() {
    const TEST: &str = "a_publish_through_the_guard_keeps_the_lease_renewed";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [client, observer] = workers(&db.ado()).await;
    let key = provisioned(&client, "guard-publish").await;
    let guard = client.guard(acquired(client.acquire(&key, LEASE).await.unwrap()));
    let token = guard.token();

    assert_eq!(
        guard.publish(Uuid::new_v4(), "the result").await.unwrap(),
        Publish::Published
    );
    // A whole lease length: held only because the renewals went on.
    let lost = tokio::time::timeout(LEASE + Duration::from_millis(500), guard.lost()).await;
    assert!(lost.is_err(), "lost() resolved after a publish: {lost:?}");
    assert!(!token.is_cancelled());
    let (generation, held, _, published) = state(&observer, &key).await;
    assert!(held, "the lease ended although the guard renews it");
    assert_eq!(published, Some(generation));
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((client, observer));
    db.drop().await;
}

/// Acquiring and guarding in one step: a free key comes back held and
/// renewed; a key another holder keeps past the wait comes back `Busy`.
#[tokio::test]
async fn acquire_guarded_hands_back_a_renewed_guard_or_busy() {
    const TEST: &str = "acquire_guarded_hands_back_a_renewed_guard_or_busy";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [client, other] = workers(&db.ado()).await;
    let key = provisioned(&client, "guarded").await;
    let guard = match client.acquire_guarded(&key, LEASE, Duration::ZERO).await.unwrap() {
        Guarded::Held(guard) => guard,
        other => panic!("expected Held, got {other:?}"),
    };
    let first = guard.lease().local_deadline();
    let busy = other
        .acquire_guarded(&key, LEASE, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(matches!(busy, Guarded::Busy { .. }), "{busy:?}");
    // Past the first renewal period: the guard renewed it.
    tokio::time::sleep_until(first - LEASE / 3).await;
    assert!(guard.lease().local_deadline() > first, "the guard did not renew");
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop((client, other));
    db.drop().await;
}
