//! The pairs of docs/contract.md's lock-order table that this engine can
//! run, each with a forced interleaving: a service's transaction holds a
//! fence row, an operator's call queues behind it (seen waiting for a lock),
//! the service goes on to another key and commits; nobody is chosen as a
//! deadlock victim and the operator's call then answers. The recovery's
//! pairs are in `lease_restore_safety.rs`.

use crate::support;

use std::time::Duration;

use support::TestDatabase;
use support::caller::{Answer, Caller};
use support::signal::until_waiting_for_a_lock;
use uuid::Uuid;

const PROVISION: &str = "EXEC fence_api.Provision @ResourceKey = @P1";
const ASSERT: &str = "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";

/// A held lease: key, owner, generation.
type Held = (String, Uuid, i64);

async fn held(caller: &mut Caller, name: &str) -> Held {
    let key = format!("{name}:{}", Uuid::new_v4().simple());
    assert_eq!(caller.call(PROVISION, &[&key.as_str()]).await.outcome(), "Created");
    let owner = Uuid::new_v4();
    let generation = caller.acquire(&key, owner, 600).await.big("Generation").unwrap();
    (key, owner, generation)
}

/// The service holds `first`'s row in an open transaction; `operator_sql`
/// (on `first`'s key, `@P1`) queues behind it; the service asserts `second`
/// and commits. Returns the operator's answer.
async fn operator_behind_a_service(db: &TestDatabase, operator_sql: &'static str) -> Answer {
    let (mut service, mut operator) = (Caller::new(db.connect().await), Caller::new(db.connect().await));
    let first = held(&mut service, "first").await;
    let second = held(&mut service, "second").await;
    service.begin("READ COMMITTED").await.unwrap();
    let asserted = service.call(ASSERT, &[&first.0.as_str(), &first.1, &first.2]).await;
    assert_eq!(asserted.outcome(), "Holding");

    let queued = operator.spid().await;
    let key = first.0.clone();
    let call = tokio::spawn(async move { operator.call(operator_sql, &[&key.as_str()]).await });
    until_waiting_for_a_lock(db, queued, Duration::from_secs(20)).await;

    let then = service.call(ASSERT, &[&second.0.as_str(), &second.1, &second.2]).await;
    assert_eq!(
        then.error_number(),
        None,
        "the service's next key failed while an operator waited: {then:?}"
    );
    service.commit().await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), call)
        .await
        .expect("the operator's call never answered")
        .unwrap()
}

#[tokio::test]
async fn a_force_release_behind_a_service_transaction_that_goes_on_to_another_key_deadlocks_neither() {
    let name = "a_force_release_behind_a_service_transaction_that_goes_on_to_another_key_deadlocks_neither";
    let Some(db) = TestDatabase::shared(name).await else {
        return;
    };
    let answer = operator_behind_a_service(&db, "EXEC fence_admin.ForceRelease @ResourceKey = @P1").await;
    assert_eq!(answer.outcome(), "Fenced", "{answer:?}");
    db.drop().await;
}

#[tokio::test]
async fn a_source_version_reset_behind_a_service_transaction_that_goes_on_to_another_key_deadlocks_neither() {
    let name = "a_source_version_reset_behind_a_service_transaction_that_goes_on_to_another_key_deadlocks_neither";
    let Some(db) = TestDatabase::shared(name).await else {
        return;
    };
    let answer = operator_behind_a_service(&db, "EXEC fence_admin.ResetSourceVersion @ResourceKey = @P1").await;
    assert_eq!(answer.error_number(), None, "{answer:?}");
    db.drop().await;
}

/// A prune running while a service's transaction has written a tenure (its
/// Acquire took over an expired lease) and holds it uncommitted: the prune
/// holds no fence row, so it waits or passes, and both end.
#[tokio::test]
async fn a_prune_beside_a_service_transaction_that_wrote_a_tenure_deadlocks_neither() {
    let name = "a_prune_beside_a_service_transaction_that_wrote_a_tenure_deadlocks_neither";
    let Some(db) = TestDatabase::shared(name).await else {
        return;
    };
    let (mut service, mut operator) = (Caller::new(db.connect().await), Caller::new(db.connect().await));
    let key = format!("pruned:{}", Uuid::new_v4().simple());
    assert_eq!(service.call(PROVISION, &[&key.as_str()]).await.outcome(), "Created");
    let first = Uuid::new_v4();
    assert_eq!(service.acquire(&key, first, 1).await.outcome(), "Acquired");
    tokio::time::sleep(Duration::from_millis(1500)).await;

    service.begin("READ COMMITTED").await.unwrap();
    let next = Uuid::new_v4();
    let taken = service.acquire(&key, next, 600).await;
    assert_eq!(taken.outcome(), "Acquired", "{taken:?}");
    let generation = taken.big("Generation").unwrap();
    let prune = tokio::spawn(async move {
        let answer = operator
            .call("EXEC fence_admin.PruneTenure @OlderThanDays = @P1", &[&1i32])
            .await;
        (operator, answer)
    });
    let asserted = service.call(ASSERT, &[&key.as_str(), &next, &generation]).await;
    assert_eq!(asserted.outcome(), "Holding", "{asserted:?}");
    service.commit().await.unwrap();
    let (_operator, pruned) = tokio::time::timeout(Duration::from_secs(20), prune)
        .await
        .expect("the prune never answered")
        .unwrap();
    assert_eq!(pruned.outcome(), "Pruned", "{pruned:?}");
    db.drop().await;
}
