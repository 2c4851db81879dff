//! A set acquire whose caller stopped waiting (a timeout around
//! `acquire_set`) on a live engine: its attempt runs to its end and a grant
//! nobody waits for is given back, so no key stays held by an owner nobody
//! knows. A service holds a row in an open transaction of its own; the
//! schedule is forced by that transaction, not by timing.

use crate::support;

use std::time::Duration;

use support::TestDatabase;
use support::caller::Caller;
use support::lease::{provisioned, state, worker};
use uuid::Uuid;

const LONG: Duration = Duration::from_secs(120);

/// Whatever the server did with an abandoned acquire is done within its own
/// 5 s bound: asks the server until `key`'s generation rose above `before`
/// (the abandoned call was granted), then allows a second for a client that
/// gives such a grant back. Answers whether it was granted.
async fn after_the_abandoned_grant(client: &fencepost::Client, key: &str, before: i64) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(8);
    while tokio::time::Instant::now() < deadline {
        let (generation, _, _, _) = state(client, key).await;
        if generation > before {
            tokio::time::sleep(Duration::from_secs(1)).await;
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A caller that stops waiting for `acquire_set` (a timeout around it)
/// must not leave its keys held by an owner nobody knows, as `acquire`
/// guarantees for one key (its attempt runs to its end on a task of its
/// own and gives back a grant whose caller is gone).
#[tokio::test]
async fn a_set_acquire_whose_caller_stopped_waiting_leaves_no_key_held() {
    const TEST: &str = "a_set_acquire_whose_caller_stopped_waiting_leaves_no_key_held";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let first = provisioned(&client, "a-first").await;
    let second = provisioned(&client, "b-second").await;
    // A service's open transaction holds `second`'s row, which nobody holds:
    // a Release that finds no lease of its owner still locks the row until
    // that transaction ends, and the set acquire, seeing both keys free,
    // waits for it.
    let mut service = Caller::new(db.connect().await);
    service.begin("READ COMMITTED").await.unwrap();
    let released = service
        .call(
            "EXEC fence_api.Release @ResourceKey = @P1, @Owner = @P2, @Generation = @P3",
            &[&second.as_str(), &Uuid::new_v4(), &1i64],
        )
        .await;
    assert_eq!(released.outcome(), "NotHolder");
    let (before, _, _, _) = state(&client, &first).await;
    // The set acquire waits for `second`'s row; its caller gives up first.
    let gave_up = tokio::time::timeout(
        Duration::from_millis(1500),
        client.acquire_set(&[&first, &second], LONG),
    )
    .await;
    assert!(
        gave_up.is_err(),
        "the set acquire answered while the row was held: {gave_up:?}"
    );
    service.commit().await.unwrap();
    after_the_abandoned_grant(&client, &first, before).await;
    let (_, first_held, until, _) = state(&client, &first).await;
    assert!(
        !first_held,
        "a set acquire whose caller was gone was granted and kept: {first} is held until {until:?} by an owner nobody knows"
    );
}

/// The same for a slot: a caller that stops waiting for `acquire_slot`
/// while it waits for the resource's row leaves no slot held, so the
/// semaphore does not lose a slot until that lease's end.
#[tokio::test]
async fn a_slot_acquire_whose_caller_stopped_waiting_leaves_no_slot_held() {
    const TEST: &str = "a_slot_acquire_whose_caller_stopped_waiting_leaves_no_slot_held";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let resource = format!("dropped-slot:{}", Uuid::new_v4().simple());
    client.provision_slots(&resource, 1).await.unwrap();
    let slot = fencepost::client::slot_key(&resource, 0);
    // A service's open transaction holds the resource's own row, the
    // semaphore's lock, which every slot acquire takes.
    let mut service = Caller::new(db.connect().await);
    service.begin("READ COMMITTED").await.unwrap();
    let released = service
        .call(
            "EXEC fence_api.Release @ResourceKey = @P1, @Owner = @P2, @Generation = @P3",
            &[&resource.as_str(), &Uuid::new_v4(), &1i64],
        )
        .await;
    assert_eq!(released.outcome(), "NotHolder");
    let (before, _, _, _) = state(&client, &slot).await;
    let gave_up = tokio::time::timeout(Duration::from_millis(1500), client.acquire_slot(&resource, 1, LONG)).await;
    assert!(
        gave_up.is_err(),
        "the slot acquire answered while the row was held: {gave_up:?}"
    );
    service.commit().await.unwrap();
    assert!(
        after_the_abandoned_grant(&client, &slot, before).await,
        "the abandoned acquire was never granted, so the test shows nothing"
    );
    let (_, held, until, _) = state(&client, &slot).await;
    assert!(
        !held,
        "a slot acquire whose caller was gone was granted and kept: {slot} is held until {until:?} by an owner nobody knows"
    );
}
