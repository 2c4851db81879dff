//! `fence_api.Publish @Release = 1` (contract v1.2): an accepted publish gives
//! the lease back in the same transaction, so a cycle is two calls. Called
//! with raw EXECs, as a service in another language would. The tests share
//! one database: each works on keys of its own.

use crate::support;

use support::TestDatabase;
use support::caller::{Answer, Caller};
use uuid::Uuid;

const PUBLISH_RELEASING: &str = "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, \
                                 @OperationId = @P4, @Payload = @P5, @Release = @P6";

async fn publish_releasing(
    caller: &mut Caller,
    key: &str,
    owner: Uuid,
    generation: i64,
    operation: Uuid,
    release: Option<bool>,
) -> Answer {
    caller
        .call(
            PUBLISH_RELEASING,
            &[&key, &owner, &generation, &operation, &"payload", &release],
        )
        .await
}

/// Generation, whether held, and published generation, as Inspect shows them.
async fn state(caller: &mut Caller, key: &str) -> (i64, bool, Option<i64>) {
    let inspected = caller.inspect(key).await;
    let Answer::Row(row) = &inspected else {
        panic!("{inspected:?}")
    };
    (
        row.get::<i64, _>("Generation").unwrap(),
        row.get::<bool, _>("IsHeld").unwrap(),
        row.get::<i64, _>("PublishedGeneration"),
    )
}

async fn provisioned(caller: &mut Caller) -> String {
    let key = format!("report:{}", Uuid::new_v4().simple());
    let created = caller
        .call("EXEC fence_api.Provision @ResourceKey = @P1", &[&key.as_str()])
        .await;
    assert_eq!(created.outcome(), "Created");
    key
}

#[tokio::test]
async fn an_accepted_publish_with_release_gives_the_lease_back_in_the_same_call() {
    const TEST: &str = "an_accepted_publish_with_release_gives_the_lease_back_in_the_same_call";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut a = Caller::new(db.connect().await);
    let mut b = Caller::new(db.connect().await);
    let key = provisioned(&mut a).await;
    let owner = Uuid::new_v4();
    let generation = a.acquire(&key, owner, 600).await.big("Generation").unwrap();
    let operation = Uuid::new_v4();

    let answer = publish_releasing(&mut a, &key, owner, generation, operation, Some(true)).await;
    assert_eq!(answer.outcome(), "Published");
    assert_eq!(state(&mut a, &key).await, (generation, false, Some(generation)));
    // A successor gets the lease at once, not after the 600 s lease.
    let successor = b.acquire(&key, Uuid::new_v4(), 60).await;
    assert_eq!(successor.outcome(), "Acquired");
    assert_eq!(successor.big("Generation"), Some(generation + 1));

    // The replay of the same operation is a safe no-op: it neither publishes
    // again nor touches the successor's lease.
    let replay = publish_releasing(&mut a, &key, owner, generation, operation, Some(true)).await;
    assert_eq!(replay.outcome(), "AlreadyPublished");
    assert_eq!(state(&mut a, &key).await, (generation + 1, true, Some(generation)));
    drop((a, b));
    db.drop().await;
}

#[tokio::test]
async fn a_refused_publish_with_release_changes_nothing() {
    const TEST: &str = "a_refused_publish_with_release_changes_nothing";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut a = Caller::new(db.connect().await);
    let mut b = Caller::new(db.connect().await);
    let key = provisioned(&mut a).await;
    let owner = Uuid::new_v4();
    let generation = a.acquire(&key, owner, 600).await.big("Generation").unwrap();
    assert_eq!(
        a.publish(&key, owner, generation, Uuid::new_v4(), "first")
            .await
            .outcome(),
        "Published"
    );

    // Something was already published under this generation: refused, and
    // the holder keeps its lease.
    let again = publish_releasing(&mut a, &key, owner, generation, Uuid::new_v4(), Some(true)).await;
    assert_eq!(again.outcome(), "GenerationAlreadyPublished");
    assert_eq!(state(&mut a, &key).await, (generation, true, Some(generation)));

    // A superseded holder releasing with its publish never clears its successor.
    a.call("EXEC fence_admin.ForceRelease @ResourceKey = @P1", &[&key.as_str()])
        .await;
    let successor = b.acquire(&key, Uuid::new_v4(), 600).await.big("Generation").unwrap();
    let stale = publish_releasing(&mut a, &key, owner, generation, Uuid::new_v4(), Some(true)).await;
    assert_eq!(stale.outcome(), "Superseded");
    assert_eq!(state(&mut a, &key).await, (successor, true, Some(generation)));
    drop((a, b));
    db.drop().await;
}

#[tokio::test]
async fn a_null_release_is_refused_with_50108_and_changes_nothing() {
    const TEST: &str = "a_null_release_is_refused_with_50108_and_changes_nothing";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut a = Caller::new(db.connect().await);
    let key = provisioned(&mut a).await;
    let owner = Uuid::new_v4();
    let generation = a.acquire(&key, owner, 600).await.big("Generation").unwrap();

    let answer = publish_releasing(&mut a, &key, owner, generation, Uuid::new_v4(), None).await;
    let Answer::Error { number, message } = &answer else {
        panic!("a NULL @Release was accepted: {answer:?}")
    };
    assert_eq!(*number, 50108);
    assert!(message.contains("@Release"), "{message}");
    assert_eq!(state(&mut a, &key).await, (generation, true, None));
    drop(a);
    db.drop().await;
}

#[tokio::test]
async fn a_publish_without_release_keeps_the_lease_as_in_v1() {
    const TEST: &str = "a_publish_without_release_keeps_the_lease_as_in_v1";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut a = Caller::new(db.connect().await);
    let key = provisioned(&mut a).await;
    let owner = Uuid::new_v4();
    let generation = a.acquire(&key, owner, 600).await.big("Generation").unwrap();
    // The v1 call: five parameters, @Release left to its default.
    let answer = a.publish(&key, owner, generation, Uuid::new_v4(), "v1").await;
    assert_eq!(answer.outcome(), "Published");
    assert_eq!(state(&mut a, &key).await, (generation, true, Some(generation)));
    drop(a);
    db.drop().await;
}
