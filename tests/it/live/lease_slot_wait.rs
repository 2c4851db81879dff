//! A slot acquired with a deadline, and a resource's slots as an operator
//! lists them, on a live engine: a waiter on a full resource takes the slot
//! its holder gives back, never while the resource is full, and gives up at
//! once on a resource not provisioned; `Admin::slots` lists each provisioned
//! slot with its lease, leaving out keys that spell no slot number.

use crate::support;

use std::time::Duration;

use fencepost::client::{AcquireSlot, Release, slot_key};
use support::TestDatabase;
use support::lease::{unwarmed, workers};
use tokio::time::Instant;
use uuid::Uuid;

/// A lease no poll could outlast: a waiter that takes its slot well before
/// it ends took the slot its holder gave back.
const HELD: Duration = Duration::from_secs(600);

fn unique(what: &str) -> String {
    format!("fp-{what}-{}", Uuid::new_v4().simple())
}

fn acquired(answer: AcquireSlot) -> (u32, fencepost::client::Lease) {
    match answer {
        AcquireSlot::Acquired { slot, lease } => (slot, lease),
        other => panic!("expected Acquired, got {other:?}"),
    }
}

#[tokio::test]
async fn a_slot_waiter_takes_the_slot_given_back_and_never_one_past_the_count() {
    const TEST: &str = "a_slot_waiter_takes_the_slot_given_back_and_never_one_past_the_count";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, waiter] = workers(&db.ado()).await;
    let resource = unique("slot-wait");
    holder.provision_slots(&resource, 3).await.unwrap();
    // Two slots of three provisioned slot keys: the third key is never
    // granted while two are live.
    let (first_slot, first) = acquired(holder.acquire_slot(&resource, 2, HELD).await.unwrap());
    let (_, second) = acquired(holder.acquire_slot(&resource, 2, HELD).await.unwrap());

    let waiting = tokio::spawn({
        let (waiter, resource) = (waiter.clone(), resource.clone());
        async move {
            let answer = waiter
                .acquire_slot_waiting(&resource, 2, HELD, Duration::from_secs(30))
                .await
                .unwrap();
            (answer, Instant::now())
        }
    });
    // Long enough for several attempts, each answered Busy.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!waiting.is_finished(), "the waiter stopped waiting on a full resource");
    assert_eq!(holder.release(&first).await.unwrap(), Release::Released);
    let released = Instant::now();

    let (answer, taken) = waiting.await.unwrap();
    let (slot, lease) = acquired(answer);
    assert_eq!(slot, first_slot, "the waiter took a slot past the count");
    assert_eq!(lease.key(), slot_key(&resource, slot));
    assert!(lease.generation() > first.generation());
    let after = taken.saturating_duration_since(released);
    assert!(
        after < Duration::from_secs(5),
        "the slot given back was taken {after:?} later, not at the waiter's next look"
    );
    for lease in [&second, &lease] {
        let owner = if lease.owner() == second.owner() {
            &holder
        } else {
            &waiter
        };
        assert_eq!(owner.release(lease).await.unwrap(), Release::Released);
    }

    let started = Instant::now();
    let answer = waiter
        .acquire_slot_waiting(&unique("never-provisioned"), 2, HELD, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(matches!(answer, AcquireSlot::NotProvisioned), "{answer:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "waited {:?}",
        started.elapsed()
    );
    drop((holder, waiter));
    db.drop().await;
}

#[tokio::test]
async fn an_operator_lists_a_resources_slots_with_their_leases_and_no_other_key() {
    const TEST: &str = "an_operator_lists_a_resources_slots_with_their_leases_and_no_other_key";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = unwarmed(&db.ado()).await;
    let resource = unique("slot-list");
    client.provision_slots(&resource, 12).await.unwrap();
    // Keys under the same prefix that spell no slot number.
    for other in ["01", "a", "", "12x"] {
        client.provision(&format!("{resource}#{other}")).await.unwrap();
    }
    let (slot, lease) = acquired(client.acquire_slot(&resource, 12, HELD).await.unwrap());

    let listed = client.admin().slots(&resource).await.unwrap();
    let numbers: Vec<u32> = listed.slots.iter().map(|s| s.slot).collect();
    assert_eq!(
        numbers,
        (0..12).collect::<Vec<_>>(),
        "slots in slot order, nothing else"
    );
    assert_eq!(listed.held(), 1);
    let held = listed.slots.iter().find(|s| s.state.is_held).unwrap();
    assert_eq!((held.slot, held.key.as_str()), (slot, lease.key()));
    assert_eq!(held.state.generation, lease.generation());
    assert!(listed.resource_provisioned);

    let none = client.admin().slots(&unique("no-slots")).await.unwrap();
    assert!(none.slots.is_empty() && !none.resource_provisioned, "{none:?}");
    // Slots without the resource's own key: AcquireSlot would grant none.
    let headless = unique("headless");
    client.provision(&slot_key(&headless, 0)).await.unwrap();
    let listed = client.admin().slots(&headless).await.unwrap();
    assert_eq!((listed.slots.len(), listed.resource_provisioned), (1, false));
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    drop(client);
    db.drop().await;
}
