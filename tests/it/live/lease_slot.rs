//! Slots (contract v1.8) on a live engine: racing acquirers never hold more
//! slots than the resource has, a slot's stale holder is refused as any
//! stale holder is, and lowering the slot count never lets more than the new
//! count in. Every worker has a connection of its own, and schedules are
//! forced with barriers.

use crate::support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost::client::{AcquireSlot, Error, Lease, Parameter, Publish, RefusalReason, Release, slot_key};
use support::TestDatabase;
use support::caller::Caller;
use support::lease::{provisioned, wait_until_expired, worker};
use tokio::sync::Barrier;
use uuid::Uuid;

/// A lease no test outlasts.
const LONG: Duration = Duration::from_secs(120);

const ASSERT: &str = "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";

fn slot(answer: AcquireSlot) -> (u32, Lease) {
    match answer {
        AcquireSlot::Acquired { slot, lease } => (slot, lease),
        other => panic!("expected Acquired, got {other:?}"),
    }
}

#[tokio::test]
async fn racing_acquirers_never_hold_more_slots_than_the_resource_has() {
    const TEST: &str = "racing_acquirers_never_hold_more_slots_than_the_resource_has";
    const WORKERS: usize = 6;
    const SLOTS: u32 = 3;
    const ROUNDS: usize = 4;
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let setup = worker(&db.ado()).await;
    let resource = provisioned(&setup, "imports").await;
    // More slot keys than slots: a free key above the count must stay unused.
    setup.provision_slots(&resource, SLOTS + 2).await.unwrap();
    let resource = Arc::new(resource);
    let step = Arc::new(Barrier::new(WORKERS));
    let holders = Arc::new(Mutex::new(Vec::<(usize, u32)>::new()));
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let client = worker(&db.ado()).await;
        let (resource, step, holders) = (resource.clone(), step.clone(), holders.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..ROUNDS {
                step.wait().await;
                // One attempt: a deadlock retried would hide.
                let answer = client
                    .acquire_slot_as(&resource, SLOTS, Uuid::new_v4(), LONG)
                    .await
                    .unwrap_or_else(|error| panic!("worker {w}, round {round}: {error}"));
                let held = match answer {
                    AcquireSlot::Acquired { slot, lease } => {
                        assert!(slot < SLOTS, "slot {slot} of {SLOTS} granted");
                        assert_eq!(lease.key(), slot_key(&resource, slot));
                        holders.lock().unwrap().push((round, slot));
                        Some(lease)
                    }
                    AcquireSlot::Busy { .. } => None,
                    other => panic!("worker {w}, round {round}: {other:?}"),
                };
                // Every acquirer has answered before anyone lets go.
                step.wait().await;
                if let Some(lease) = held {
                    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
                }
                step.wait().await;
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let holders = holders.lock().unwrap();
    for round in 0..ROUNDS {
        let slots: Vec<u32> = holders.iter().filter(|(r, _)| *r == round).map(|(_, s)| *s).collect();
        let distinct: HashSet<u32> = slots.iter().copied().collect();
        assert_eq!(
            slots.len(),
            SLOTS as usize,
            "round {round}: {slots:?} granted to {WORKERS} racing acquirers"
        );
        assert_eq!(
            distinct.len(),
            slots.len(),
            "round {round}: a slot granted twice: {slots:?}"
        );
    }
}

#[tokio::test]
async fn a_slots_stale_holder_is_refused_as_any_stale_holder_is() {
    const TEST: &str = "a_slots_stale_holder_is_refused_as_any_stale_holder_is";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [client, rival] = support::lease::workers(&db.ado()).await;
    let mut service = Caller::new(db.connect().await);
    let resource = provisioned(&client, "partner").await;
    client.provision_slots(&resource, 1).await.unwrap();
    let (number, stale) = slot(client.acquire_slot(&resource, 1, Duration::from_secs(1)).await.unwrap());
    assert_eq!(number, 0);
    wait_until_expired(&client, stale.key()).await;
    let (_, fresh) = slot(rival.acquire_slot(&resource, 1, LONG).await.unwrap());
    assert_eq!(fresh.key(), stale.key());
    assert!(fresh.generation() > stale.generation(), "a slot's generation went back");

    assert_eq!(
        client.publish(&stale, Uuid::new_v4(), "stale").await.unwrap(),
        Publish::Refused(RefusalReason::Superseded)
    );
    service.begin("READ COMMITTED").await.unwrap();
    let asserted = service
        .call(ASSERT, &[&stale.key(), &stale.owner(), &stale.generation()])
        .await;
    assert_eq!(asserted.error_number(), Some(50110), "{asserted:?}");
    assert_eq!(service.trancount().await, 0);
    assert_eq!(client.release(&stale).await.unwrap(), Release::NotHolder);
    assert_eq!(
        rival.publish(&fresh, Uuid::new_v4(), "fresh").await.unwrap(),
        Publish::Published
    );
}

#[tokio::test]
async fn lowering_the_slot_count_never_lets_more_than_the_new_count_in() {
    const TEST: &str = "lowering_the_slot_count_never_lets_more_than_the_new_count_in";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let resource = provisioned(&client, "tenant").await;
    client.provision_slots(&resource, 3).await.unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(slot(client.acquire_slot(&resource, 3, LONG).await.unwrap()));
    }
    let numbers: HashSet<u32> = held.iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, HashSet::from([0, 1, 2]));

    // Down to 2 while three hold: nobody is let in until fewer than 2 hold,
    // counting the holder of slot 2, which the old count let in.
    assert!(matches!(
        client.acquire_slot(&resource, 2, LONG).await.unwrap(),
        AcquireSlot::Busy { .. }
    ));
    let (_, first) = held.remove(0);
    assert_eq!(client.release(&first).await.unwrap(), Release::Released);
    assert!(
        matches!(
            client.acquire_slot(&resource, 2, LONG).await.unwrap(),
            AcquireSlot::Busy { .. }
        ),
        "a third holder was let in under a count of 2"
    );
    let (_, second) = held.remove(0);
    assert_eq!(client.release(&second).await.unwrap(), Release::Released);
    let (number, lease) = slot(client.acquire_slot(&resource, 2, LONG).await.unwrap());
    assert!(number < 2, "slot {number} granted under a count of 2");
    assert!(
        lease.generation() > first.generation().min(second.generation()),
        "a slot's lower generation was revived"
    );
}

#[tokio::test]
async fn a_lost_reply_on_a_slot_acquire_is_confirmed_by_its_retry_and_bad_input_is_refused() {
    const TEST: &str = "a_lost_reply_on_a_slot_acquire_is_confirmed_by_its_retry_and_bad_input_is_refused";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let mut caller = Caller::new(db.connect().await);
    let resource = provisioned(&client, "retry").await;
    client.provision_slots(&resource, 2).await.unwrap();
    let owner = Uuid::new_v4();
    let (number, first) = slot(client.acquire_slot_as(&resource, 2, owner, LONG).await.unwrap());
    let (again, confirmed) = slot(client.acquire_slot_as(&resource, 2, owner, LONG).await.unwrap());
    assert_eq!((again, confirmed.generation()), (number, first.generation()));

    let missing = format!("missing:{}", Uuid::new_v4().simple());
    assert!(matches!(
        client.acquire_slot(&missing, 2, LONG).await.unwrap(),
        AcquireSlot::NotProvisioned
    ));
    let error = client.acquire_slot(&resource, 0, LONG).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidInput {
                parameter: Parameter::Slots,
                ..
            }
        ),
        "{error:?}"
    );
    let acquire_slot = "EXEC fence_api.AcquireSlot @ResourceKey = @P1, @Slots = @P2, @Owner = @P3, @LeaseSeconds = @P4";
    let (zero, seconds) = (0i32, 60i32);
    let refused = caller
        .call(acquire_slot, &[&resource.as_str(), &zero, &Uuid::new_v4(), &seconds])
        .await;
    assert_eq!(refused.error_number(), Some(50136), "{refused:?}");
    let long = "x".repeat(252);
    let ten = 10i32;
    let refused = caller
        .call(acquire_slot, &[&long.as_str(), &ten, &Uuid::new_v4(), &seconds])
        .await;
    assert_eq!(refused.error_number(), Some(50101), "{refused:?}");
}
