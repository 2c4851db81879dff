//! The six semantics of the fence (DESIGN.md), plus the acquire contract, on a
//! live engine. Each worker has its own client and connection; the order of
//! their steps is forced with a barrier, and a lease expires by letting the
//! server clock run past it. Every test but the redeploy's shares one
//! database: each works on keys of its own.

use crate::support;

use std::sync::Arc;

use fencepost::client::{
    Acquire, Inspection, OperationOutcome, Provision, Publication, Publish, RefusalReason, Release, Renew,
};
use support::TestDatabase;
use support::lease::{SHORT, acquired, provisioned, state, unwarmed, wait_until_expired, worker, workers};
use tokio::sync::Barrier;
use uuid::Uuid;

async fn published(client: &fencepost::Client, key: &str) -> Publication {
    client.read_publication(key).await.unwrap()
}

/// The server clock, as `Inspect` reads it.
async fn server_utc(client: &fencepost::Client, key: &str) -> time::OffsetDateTime {
    match client.inspect(key).await.unwrap() {
        Inspection::Found(state) => state.server_utc,
        Inspection::NotProvisioned => panic!("{key} is not provisioned"),
    }
}

#[tokio::test]
async fn a_superseded_publish_is_refused_while_the_successors_lands() {
    let Some(db) = TestDatabase::shared("a_superseded_publish_is_refused_while_the_successors_lands").await else {
        return;
    };
    let [a, b] = workers(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let step = Arc::new(Barrier::new(2));

    let worker_a = tokio::spawn({
        let (step, key) = (step.clone(), key.clone());
        async move {
            let lease = acquired(a.acquire(&key, SHORT).await.unwrap());
            step.wait().await; // 1: A holds the lease.
            step.wait().await; // 2: A's lease has expired and B holds the next one.
            let late = a.publish(&lease, Uuid::new_v4(), "from A").await.unwrap();
            step.wait().await; // 3: A's late write is done.
            (lease.generation(), late)
        }
    });
    let worker_b = tokio::spawn({
        let (step, key) = (step.clone(), key.clone());
        async move {
            step.wait().await; // 1
            wait_until_expired(&b, &key).await;
            let lease = acquired(b.acquire(&key, SHORT * 5).await.unwrap());
            step.wait().await; // 2
            step.wait().await; // 3
            let own = b.publish(&lease, Uuid::new_v4(), "from B").await.unwrap();
            (lease.generation(), own, published(&b, &key).await)
        }
    });
    // The first worker to fail fails the test: its partner would wait at the
    // barrier for ever.
    let ((generation_a, late), (generation_b, own, publication)) =
        tokio::try_join!(worker_a, worker_b).expect("a worker failed");

    assert_eq!(late, Publish::Refused(RefusalReason::Superseded));
    assert_eq!(own, Publish::Published);
    assert_eq!(generation_b, generation_a + 1);
    assert!(
        matches!(
            publication,
            Publication::Found { generation, ref payload, .. } if generation == generation_b && payload == "from B"
        ),
        "{publication:?}"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_late_release_and_renew_change_nothing_of_the_successors() {
    let Some(db) = TestDatabase::shared("a_late_release_and_renew_change_nothing_of_the_successors").await else {
        return;
    };
    let [a, b] = workers(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let step = Arc::new(Barrier::new(2));

    let worker_a = tokio::spawn({
        let (step, key) = (step.clone(), key.clone());
        async move {
            let mut lease = acquired(a.acquire(&key, SHORT).await.unwrap());
            step.wait().await; // 1: A holds the lease.
            step.wait().await; // 2: B holds the next one.
            let release = a.release(&lease).await.unwrap();
            let renew = a.renew(&mut lease).await.unwrap();
            step.wait().await; // 3: A's late calls are done.
            (release, renew)
        }
    });
    let worker_b = tokio::spawn({
        let (step, key) = (step.clone(), key.clone());
        async move {
            step.wait().await; // 1
            wait_until_expired(&b, &key).await;
            let lease = acquired(b.acquire(&key, SHORT * 5).await.unwrap());
            let before = state(&b, &key).await;
            step.wait().await; // 2
            step.wait().await; // 3
            let after = state(&b, &key).await;
            let own = b.publish(&lease, Uuid::new_v4(), "from B").await.unwrap();
            (before, after, own)
        }
    });
    // The first worker to fail fails the test: its partner would wait at the
    // barrier for ever.
    let ((release, renew), (before, after, own)) = tokio::try_join!(worker_a, worker_b).expect("a worker failed");

    assert_eq!(release, Release::NotHolder);
    assert_eq!(renew, Renew::Lost);
    assert_eq!(after, before, "A's late release or renew touched B's lease");
    assert!(before.1, "B holds the lease");
    assert_eq!(own, Publish::Published, "B still owns its lease after A's late calls");
    db.drop().await;
}

#[tokio::test]
async fn publish_and_renew_after_expiry_with_no_successor_are_refused() {
    let Some(db) = TestDatabase::shared("publish_and_renew_after_expiry_with_no_successor_are_refused").await else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let a = unwarmed(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let mut lease = acquired(a.acquire(&key, SHORT).await.unwrap());
    wait_until_expired(&a, &key).await;
    let before = state(&a, &key).await;

    assert_eq!(
        a.publish(&lease, Uuid::new_v4(), "late").await.unwrap(),
        Publish::Refused(RefusalReason::Expired)
    );
    assert_eq!(a.renew(&mut lease).await.unwrap(), Renew::Lost);
    // Not revived: still not held, same generation, nothing published.
    assert_eq!(state(&a, &key).await, before);
    assert_eq!(before.0, lease.generation());
    assert_eq!(published(&a, &key).await, Publication::NothingPublished);
    // Close the pools first: open sessions keep the database in use.
    drop(a);
    db.drop().await;
}

#[tokio::test]
async fn a_second_publish_in_one_generation_is_refused() {
    let Some(db) = TestDatabase::shared("a_second_publish_in_one_generation_is_refused").await else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let a = unwarmed(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let lease = acquired(a.acquire(&key, SHORT * 5).await.unwrap());

    assert_eq!(
        a.publish(&lease, Uuid::new_v4(), "first").await.unwrap(),
        Publish::Published
    );
    assert_eq!(
        a.publish(&lease, Uuid::new_v4(), "second").await.unwrap(),
        Publish::Refused(RefusalReason::GenerationAlreadyPublished)
    );
    assert!(matches!(published(&a, &key).await, Publication::Found { payload, .. } if payload == "first"));
    // Close the pools first: open sessions keep the database in use.
    drop(a);
    db.drop().await;
}

#[tokio::test]
async fn a_replay_with_the_same_operation_id_is_already_published_and_writes_once() {
    let Some(db) =
        TestDatabase::shared("a_replay_with_the_same_operation_id_is_already_published_and_writes_once").await
    else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let (a, other) = (unwarmed(&db.ado()).await, unwarmed(&db.ado()).await);
    let key = provisioned(&a, "report").await;
    let lease = acquired(a.acquire(&key, SHORT * 5).await.unwrap());
    let operation = Uuid::new_v4();

    assert_eq!(
        a.publish(&lease, operation, "payload").await.unwrap(),
        Publish::Published
    );
    let first = published(&a, &key).await;
    // The replay comes over another connection, as it would after a lost reply,
    // and even carries a different payload: it must not be written.
    assert_eq!(
        other.publish(&lease, operation, "changed").await.unwrap(),
        Publish::AlreadyPublished
    );
    assert_eq!(published(&a, &key).await, first, "the replay wrote again");
    assert!(matches!(first, Publication::Found { ref payload, .. } if payload == "payload"));
    assert!(matches!(
        a.outcome(operation).await.unwrap(),
        OperationOutcome::Published { resource_key, generation, .. }
            if resource_key == key && generation == lease.generation()
    ));
    // Close the pools first: open sessions keep the database in use.
    drop((a, other));
    db.drop().await;
}

#[tokio::test]
async fn the_generation_never_goes_down() {
    let Some(db) = TestDatabase::deployed("the_generation_never_goes_down").await else {
        return;
    };
    let a = worker(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let mut seen = vec![state(&a, &key).await.0];

    let first = acquired(a.acquire(&key, SHORT * 5).await.unwrap());
    seen.push(state(&a, &key).await.0);
    assert_eq!(a.release(&first).await.unwrap(), Release::Released);
    seen.push(state(&a, &key).await.0);
    assert_eq!(a.provision(&key).await.unwrap(), Provision::Exists);
    seen.push(state(&a, &key).await.0);
    let second = acquired(a.acquire(&key, SHORT * 5).await.unwrap());
    assert_eq!(
        a.publish(&second, Uuid::new_v4(), "x").await.unwrap(),
        Publish::Published
    );
    seen.push(state(&a, &key).await.0);
    // A redeploy: it re-applies every permission script and must leave the row alone.
    db.migrate(&fencepost::deploy::Sources::embedded().unwrap())
        .await
        .expect("redeploy");
    seen.push(state(&a, &key).await.0);
    wait_until_expired(&a, &key).await;
    acquired(a.acquire(&key, SHORT).await.unwrap());
    seen.push(state(&a, &key).await.0);

    assert_eq!(seen, [0, 1, 1, 1, 2, 2, 3]);
    // Close the pools first: open sessions keep the database in use.
    drop(a);
    db.drop().await;
}

#[tokio::test]
async fn an_acquire_retried_by_the_holder_keeps_its_generation() {
    let Some(db) = TestDatabase::shared("an_acquire_retried_by_the_holder_keeps_its_generation").await else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let a = unwarmed(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let owner = Uuid::new_v4();
    let first = acquired(a.acquire_as(&key, owner, SHORT * 5).await.unwrap());
    // The retry must come at a later server time than the first acquire, or
    // an equal expiry could not tell "extended" from "left alone".
    let acquired_at = first.until() - SHORT * 5;
    while server_utc(&a, &key).await <= acquired_at {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let retry = acquired(a.acquire_as(&key, owner, SHORT * 5).await.unwrap());

    assert_eq!(retry.generation(), first.generation());
    assert!(
        retry.until() > first.until(),
        "the retry extends the lease: {:?} after {:?}",
        retry.until(),
        first.until()
    );
    assert_eq!(
        a.publish(&first, Uuid::new_v4(), "x").await.unwrap(),
        Publish::Published
    );
    // Close the pools first: open sessions keep the database in use.
    drop(a);
    db.drop().await;
}

#[tokio::test]
async fn busy_carries_the_server_time_it_was_judged_at_and_the_time_left() {
    let test = "busy_carries_the_server_time_it_was_judged_at_and_the_time_left";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let [a, b] = workers(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let length = SHORT * 5;
    let lease = acquired(a.acquire(&key, length).await.unwrap());

    match b.acquire(&key, SHORT).await.unwrap() {
        Acquire::Busy { until, remaining } => {
            assert_eq!(until, lease.until());
            assert!(remaining <= length, "{remaining:?}");
            assert!(remaining > length - SHORT, "{remaining:?}");
        }
        other => panic!("expected Busy, got {other:?}"),
    }
    // The row itself: ServerUtc is the server's reading, between the lease's
    // start and its end.
    let rows = db
        .query(&format!(
            "EXEC fence_api.Acquire @ResourceKey = N'{key}', @Owner = '{}', @LeaseSeconds = 2;",
            uuid::Uuid::new_v4()
        ))
        .await;
    assert_eq!(rows[0].get::<&str, _>("Outcome"), Some("Busy"));
    let server_utc = rows[0]
        .get::<time::PrimitiveDateTime, _>("ServerUtc")
        .expect("ServerUtc is set")
        .assume_utc();
    assert!(server_utc < lease.until(), "{server_utc} >= {}", lease.until());
    assert!(server_utc >= lease.until() - length, "{server_utc}");
    drop((a, b));
    db.drop().await;
}

#[tokio::test]
async fn an_unknown_key_is_not_provisioned() {
    let Some(db) = TestDatabase::shared("an_unknown_key_is_not_provisioned").await else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let a = unwarmed(&db.ado()).await;
    let key = "never-provisioned";

    assert!(matches!(a.acquire(key, SHORT).await.unwrap(), Acquire::NotProvisioned));
    assert_eq!(a.inspect(key).await.unwrap(), Inspection::NotProvisioned);
    assert_eq!(published(&a, key).await, Publication::NotProvisioned);
    // Close the pools first: open sessions keep the database in use.
    drop(a);
    db.drop().await;
}

#[tokio::test]
async fn inspect_never_shows_the_owner() {
    let Some(db) = TestDatabase::shared("inspect_never_shows_the_owner").await else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let a = unwarmed(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let owner = Uuid::new_v4();
    acquired(a.acquire_as(&key, owner, SHORT * 5).await.unwrap());

    // Read the procedure's row directly, every column, not just what the
    // client decodes.
    let mut raw = db.connect().await;
    let rows = raw
        .query("EXEC fence_api.Inspect @ResourceKey = @P1", &[&key.as_str()])
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    let columns: Vec<&str> = row.columns().iter().map(|c| c.name()).collect();
    assert!(!columns.iter().any(|c| c.eq_ignore_ascii_case("Owner")), "{columns:?}");
    for (i, column) in row.columns().iter().enumerate() {
        if let Ok(Some(value)) = row.try_get::<Uuid, _>(i) {
            assert_ne!(value, owner, "column {} shows the owner", column.name());
        }
        if let Ok(Some(value)) = row.try_get::<&str, _>(i) {
            assert!(
                !value.to_lowercase().contains(&owner.to_string()),
                "column {} shows the owner",
                column.name()
            );
        }
    }
    // Close the pools first: open sessions keep the database in use.
    drop(a);
    db.drop().await;
}
