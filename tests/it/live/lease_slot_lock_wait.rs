//! A slot acquire beside a slot holder that fences its own transaction by
//! its slot (so the holder's transaction keeps the slot's row locked), on a
//! live engine: a free slot is granted without waiting for that row, and a
//! full resource answers `Busy` with the holder's expiry at once. Every party
//! has a connection of its own; the held row is forced by an open
//! transaction. And a key spelling a slot's number with a leading zero is
//! no slot.

use crate::support;

use std::time::{Duration, Instant};

use fencepost::client::{AcquireSlot, Client, Provision, slot_key};
use support::TestDatabase;
use support::caller::Caller;
use support::lease::provisioned;
use uuid::Uuid;

/// A lease no test outlasts.
const LONG: Duration = Duration::from_secs(120);

/// Less than the 5 s a procedure waits for a held row: an answer within
/// this did not wait for the holder's transaction.
const NO_ROW_WAIT: Duration = Duration::from_secs(4);

const ASSERT: &str = "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";

/// Takes slot 0 of `resource` and asserts it inside an open transaction
/// of its own, which keeps the slot's row locked until it ends.
async fn a_holder_fencing_its_transaction_by_slot_zero(client: &Client, db: &TestDatabase, resource: &str) -> Caller {
    let lease = match client.acquire_slot(resource, 2, LONG).await.unwrap() {
        AcquireSlot::Acquired { slot: 0, lease } => lease,
        other => panic!("expected slot 0, got {other:?}"),
    };
    let mut fenced = Caller::new(db.connect().await);
    fenced.begin("READ COMMITTED").await.unwrap();
    let asserted = fenced
        .call(ASSERT, &[&lease.key(), &lease.owner(), &lease.generation()])
        .await;
    assert_eq!(asserted.outcome(), "Holding", "{asserted:?}");
    fenced
}

#[tokio::test]
async fn a_free_slot_is_granted_without_waiting_for_a_holders_open_transaction() {
    const TEST: &str = "a_free_slot_is_granted_without_waiting_for_a_holders_open_transaction";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [client, rival] = support::lease::workers(&db.ado()).await;
    let resource = provisioned(&client, "partner-calls").await;
    client.provision_slots(&resource, 2).await.unwrap();
    let mut fenced = a_holder_fencing_its_transaction_by_slot_zero(&client, &db, &resource).await;

    let started = Instant::now();
    let answer = rival.acquire_slot(&resource, 2, LONG).await.unwrap();
    let took = started.elapsed();
    match answer {
        AcquireSlot::Acquired { slot, lease } => {
            assert_eq!(slot, 1);
            assert_eq!(lease.key(), slot_key(&resource, 1));
        }
        other => panic!("the free slot 1 was not granted beside a holder's open transaction: {other:?} after {took:?}"),
    }
    assert!(took < NO_ROW_WAIT, "the grant waited {took:?} for the holder's row");
    fenced.commit().await.unwrap();
}

#[tokio::test]
async fn a_full_resource_answers_busy_with_the_holders_expiry_without_waiting_for_its_transaction() {
    const TEST: &str = "a_full_resource_answers_busy_with_the_holders_expiry_without_waiting_for_its_transaction";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [client, rival] = support::lease::workers(&db.ado()).await;
    let resource = provisioned(&client, "tenant-imports").await;
    client.provision_slots(&resource, 2).await.unwrap();
    let mut fenced = a_holder_fencing_its_transaction_by_slot_zero(&client, &db, &resource).await;
    // Slot 1 taken too: the resource is full.
    assert!(matches!(
        client
            .acquire_slot_as(&resource, 2, Uuid::new_v4(), LONG)
            .await
            .unwrap(),
        AcquireSlot::Acquired { slot: 1, .. }
    ));

    let started = Instant::now();
    let answer = rival.acquire_slot(&resource, 2, LONG).await.unwrap();
    let took = started.elapsed();
    match answer {
        AcquireSlot::Busy { remaining, .. } => assert!(
            remaining > LONG / 2,
            "Busy without the holders' expiry ({remaining:?} left) after {took:?}"
        ),
        other => panic!("a third holder was let into two slots: {other:?}"),
    }
    assert!(
        took < NO_ROW_WAIT,
        "the Busy answer waited {took:?} for the holder's row"
    );
    fenced.commit().await.unwrap();
}

/// A key that spells a slot's number with a leading zero (`<resource>#01`) is
/// a key like any other, never a slot: two holders are never both told they
/// hold slot 1.
#[tokio::test]
async fn a_key_spelling_a_slot_number_with_a_leading_zero_is_no_slot() {
    const TEST: &str = "a_key_spelling_a_slot_number_with_a_leading_zero_is_no_slot";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [client] = support::lease::workers(&db.ado()).await;
    let resource = provisioned(&client, "report-builds").await;
    client.provision_slots(&resource, 3).await.unwrap();
    let zero_one = format!("{resource}#01");
    assert_eq!(client.provision(&zero_one).await.unwrap(), Provision::Created);

    let mut keys = Vec::new();
    for _ in 0..3 {
        match client.acquire_slot(&resource, 3, LONG).await.unwrap() {
            AcquireSlot::Acquired { slot, lease } => {
                assert_eq!(
                    lease.key(),
                    slot_key(&resource, slot),
                    "slot {slot} granted under another key"
                );
                keys.push(lease.key().to_string());
            }
            other => panic!("expected a slot, got {other:?}"),
        }
    }
    keys.sort();
    assert_eq!(keys, (0..3).map(|n| slot_key(&resource, n)).collect::<Vec<_>>());
    assert!(matches!(
        client.acquire_slot(&resource, 3, LONG).await.unwrap(),
        AcquireSlot::Busy { .. }
    ));
}
