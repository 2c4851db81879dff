//! `Client::fake()` with lease sets and slots (contract 1.8), as a
//! service's own tests use it: a transfer job holding two accounts at once,
//! and an import worker limited to a few slots per tenant.

use std::time::Duration;

use fencepost::Client;
use fencepost::client::fake::Fault;
use fencepost::client::{
    AcquireSet, AcquireSlot, Error, FencedSet, KeyPublish, KeyRefusal, LeaseSet, LostReason, Procedure, PublishSet,
    RefusalReason, Release, RenewSet,
};
use fencepost::model::{Call, Ending};
use uuid::Uuid;

const LEASE: Duration = Duration::from_secs(30);

async fn provisioned(keys: &[&str]) -> Client {
    let client = Client::fake();
    for key in keys {
        client.provision(key).await.unwrap();
    }
    client
}

async fn acquired_set(client: &Client, keys: &[&str]) -> LeaseSet {
    match client.acquire_set(keys, LEASE).await.unwrap() {
        AcquireSet::Acquired(set) => set,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

/// The service under test: moves an amount between two accounts, each an
/// account's key, publishing both balances at once or not at all.
async fn transfer(client: &Client, from: &str, to: &str) -> Result<FencedSet<String>, Error> {
    let (from, to) = (from.to_string(), to.to_string());
    client
        .run_fenced_set(&[&from.clone(), &to.clone()], LEASE, |_token| async move {
            Ok::<_, String>(vec![(from, "balance 90".to_string()), (to, "balance 110".to_string())])
        })
        .await
}

#[tokio::test(start_paused = true)]
async fn a_set_is_granted_whole_with_each_key_at_its_own_generation() {
    let client = provisioned(&["account:b", "account:a"]).await;
    let other = client.as_fake().unwrap().client();
    // account:b changed hands once before.
    let Ok(fencepost::client::Acquire::Acquired(lease)) = other.acquire("account:b", LEASE).await else {
        panic!("account:b is free");
    };
    assert_eq!(other.release(&lease).await.unwrap(), Release::Released);
    let set = acquired_set(&client, &["account:b", "account:a"]).await;
    let keys: Vec<(&str, i64)> = set.leases().iter().map(|l| (l.key(), l.generation())).collect();
    assert_eq!(keys, vec![("account:a", 1), ("account:b", 2)], "in lock order");
    assert!(set.leases().iter().all(|lease| lease.owner() == set.owner()));
}

#[tokio::test(start_paused = true)]
async fn a_set_with_one_busy_key_is_refused_whole_and_names_each_key() {
    let client = provisioned(&["account:a", "account:b"]).await;
    let other = client.as_fake().unwrap().client();
    acquired_set(&other, &["account:b"]).await;
    tokio::time::advance(Duration::from_secs(10)).await;
    match client
        .acquire_set(&["account:a", "account:b", "account:c"], LEASE)
        .await
        .unwrap()
    {
        AcquireSet::Refused(keys) => {
            assert_eq!(keys[0], ("account:a".to_string(), KeyRefusal::Withheld));
            assert!(
                matches!(keys[1], (ref key, KeyRefusal::Busy { remaining, .. }) if key == "account:b" && remaining == Duration::from_secs(20))
            );
            assert_eq!(keys[2], ("account:c".to_string(), KeyRefusal::NotProvisioned));
        }
        other => panic!("expected Refused, got {other:?}"),
    }
    let fence = client.as_fake().unwrap().fence();
    assert_eq!(fence.resource("account:a").unwrap().owner, None, "nothing was granted");
}

#[tokio::test(start_paused = true)]
async fn a_lost_reply_to_an_acquire_set_is_confirmed_by_its_retry_at_the_same_generations() {
    let client = provisioned(&["account:a", "account:b"]).await;
    let fake = client.as_fake().unwrap();
    fake.fail_next(Procedure::AcquireSet, Fault::ReplyLost);
    let set = acquired_set(&client, &["account:a", "account:b"]).await;
    assert!(set.leases().iter().all(|lease| lease.generation() == 1));
    assert_eq!(fake.calls(Procedure::AcquireSet), 2);
}

#[tokio::test(start_paused = true)]
async fn a_set_renews_all_or_none_and_a_lost_key_loses_the_set() {
    let client = provisioned(&["account:a", "account:b"]).await;
    let mut set = acquired_set(&client, &["account:a", "account:b"]).await;
    tokio::time::advance(Duration::from_secs(10)).await;
    assert!(matches!(
        client.renew_set(&mut set).await.unwrap(),
        RenewSet::Renewed { .. }
    ));
    // An operator fences one account off.
    client
        .as_fake()
        .unwrap()
        .call(&Call::force_release("account:b"))
        .unwrap();
    match client.renew_set(&mut set).await.unwrap() {
        RenewSet::Lost { lost } => assert_eq!(lost, vec!["account:b".to_string()]),
        other => panic!("expected Lost, got {other:?}"),
    }
    let released = client.release_set(&set).await.unwrap();
    assert_eq!(
        released,
        vec![
            ("account:a".to_string(), Release::Released),
            ("account:b".to_string(), Release::NotHolder)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_guarded_set_publishes_every_key_or_none() {
    let client = provisioned(&["account:a", "account:b"]).await;
    let guard = client.guard_set(acquired_set(&client, &["account:a", "account:b"]).await);
    // Held past several renewals.
    tokio::time::sleep(LEASE * 3).await;
    assert!(guard.lost_reason().is_none());
    let publishes = [
        KeyPublish {
            key: "account:a",
            operation_id: Uuid::new_v4(),
            payload: "balance 90",
        },
        KeyPublish {
            key: "account:b",
            operation_id: Uuid::new_v4(),
            payload: "balance 110",
        },
    ];
    assert!(matches!(
        guard.publish_set_and_release(&publishes).await.unwrap(),
        PublishSet::Accepted(_)
    ));
    let fence = client.as_fake().unwrap().fence();
    for (key, payload) in [("account:a", "balance 90"), ("account:b", "balance 110")] {
        let row = fence.resource(key).unwrap();
        assert_eq!((row.payload.as_deref(), row.owner), (Some(payload), None));
        assert_eq!(fence.tenures(key).last().unwrap().ending, Ending::Released);
    }
}

#[tokio::test(start_paused = true)]
async fn a_guarded_set_is_lost_when_any_key_is_and_its_publish_is_refused() {
    let client = provisioned(&["account:a", "account:b"]).await;
    let guard = client.guard_set(acquired_set(&client, &["account:a", "account:b"]).await);
    client
        .as_fake()
        .unwrap()
        .call(&Call::force_release("account:a"))
        .unwrap();
    let lost = tokio::time::timeout(LEASE, guard.lost())
        .await
        .expect("the renewal finds it");
    assert_eq!(
        (lost.key.as_deref(), lost.reason),
        (Some("account:a"), LostReason::Renewal)
    );
    assert!(guard.token().is_cancelled());
    let publishes = [
        KeyPublish {
            key: "account:a",
            operation_id: Uuid::new_v4(),
            payload: "late",
        },
        KeyPublish {
            key: "account:b",
            operation_id: Uuid::new_v4(),
            payload: "late",
        },
    ];
    match guard.publish_set(&publishes).await.unwrap() {
        PublishSet::Refused(keys) => assert_eq!(
            keys,
            vec![
                ("account:a".to_string(), Some(RefusalReason::Superseded)),
                ("account:b".to_string(), None)
            ]
        ),
        other => panic!("expected Refused, got {other:?}"),
    }
    let fence = client.as_fake().unwrap().fence();
    assert_eq!(
        fence.resource("account:b").unwrap().payload,
        None,
        "nothing was published"
    );
}

#[tokio::test(start_paused = true)]
async fn run_fenced_set_publishes_the_works_result_under_every_key_once() {
    let client = provisioned(&["account:a", "account:b"]).await;
    client
        .as_fake()
        .unwrap()
        .fail_next(Procedure::PublishSet, Fault::ReplyLost);
    match transfer(&client, "account:a", "account:b").await.unwrap() {
        FencedSet::Published { operation_ids, .. } => assert_eq!(operation_ids.len(), 2),
        other => panic!("expected Published, got {other:?}"),
    }
    let fence = client.as_fake().unwrap().fence();
    assert_eq!(
        fence.resource("account:b").unwrap().payload.as_deref(),
        Some("balance 110")
    );
    assert_eq!(
        client.as_fake().unwrap().calls(Procedure::PublishSet),
        2,
        "replayed once"
    );
}

#[tokio::test(start_paused = true)]
async fn run_fenced_set_does_not_start_the_work_while_a_key_is_held() {
    let client = provisioned(&["account:a", "account:b"]).await;
    let holder = client.as_fake().unwrap().client();
    acquired_set(&holder, &["account:b"]).await;
    match transfer(&client, "account:a", "account:b").await.unwrap() {
        FencedSet::NotAcquired(keys) => assert!(matches!(keys[1].1, KeyRefusal::Busy { .. })),
        other => panic!("expected NotAcquired, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_fenced_transaction_over_a_set_is_unavailable_on_the_fake_and_sends_nothing() {
    let client = provisioned(&["account:a", "account:b"]).await;
    let guard = client.guard_set(acquired_set(&client, &["account:a", "account:b"]).await);
    assert!(matches!(guard.begin_fenced().await, Err(Error::Unavailable { .. })));
    assert_eq!(client.as_fake().unwrap().calls(Procedure::AssertHolderSet), 0);
}

#[tokio::test(start_paused = true)]
async fn slots_admit_as_many_holders_as_the_count_and_then_answer_busy() {
    let client = Client::fake();
    client.provision_slots("imports:tenant-7", 2).await.unwrap();
    let mut held = Vec::new();
    for expected in 0..2 {
        match client.acquire_slot("imports:tenant-7", 2, LEASE).await.unwrap() {
            AcquireSlot::Acquired { slot, lease } => {
                assert_eq!(
                    (slot, lease.key()),
                    (expected, format!("imports:tenant-7#{expected}").as_str())
                );
                held.push(lease);
            }
            other => panic!("expected Acquired, got {other:?}"),
        }
    }
    tokio::time::advance(Duration::from_secs(5)).await;
    match client.acquire_slot("imports:tenant-7", 2, LEASE).await.unwrap() {
        AcquireSlot::Busy { remaining, .. } => assert_eq!(remaining, Duration::from_secs(25)),
        other => panic!("expected Busy, got {other:?}"),
    }
    // A slot given back is taken again under its next generation.
    assert_eq!(client.release(&held[0]).await.unwrap(), Release::Released);
    match client.acquire_slot("imports:tenant-7", 2, LEASE).await.unwrap() {
        AcquireSlot::Acquired { slot: 0, lease } => assert_eq!(lease.generation(), 2),
        other => panic!("expected slot 0, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_slot_is_a_lease_renewed_and_published_under_like_any_other() {
    let client = Client::fake();
    client.provision_slots("imports:tenant-7", 1).await.unwrap();
    let AcquireSlot::Acquired { lease, .. } = client.acquire_slot("imports:tenant-7", 1, LEASE).await.unwrap() else {
        panic!("the slot is free");
    };
    let guard = client.guard(lease);
    tokio::time::sleep(LEASE * 2).await;
    assert!(guard.lost_reason().is_none());
    let published = guard
        .publish_and_release(Uuid::new_v4(), "imported 40 rows")
        .await
        .unwrap();
    assert_eq!(published, fencepost::client::Publish::Published);
    let fence = client.as_fake().unwrap().fence();
    assert_eq!(
        fence.resource("imports:tenant-7#0").unwrap().payload.as_deref(),
        Some("imported 40 rows")
    );
}

#[tokio::test(start_paused = true)]
async fn a_slot_without_its_provisioned_key_is_not_provisioned() {
    let client = provisioned(&["imports:tenant-7"]).await;
    assert!(matches!(
        client.acquire_slot("imports:tenant-7", 3, LEASE).await.unwrap(),
        AcquireSlot::NotProvisioned
    ));
}
