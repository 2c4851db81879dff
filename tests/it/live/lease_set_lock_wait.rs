//! A set acquire that cannot be granted, because a live owner holds one of
//! its keys, on a live engine: it holds no other owner's row while it waits,
//! so that owner renews at once. Every party has a connection of its own;
//! the wait is forced by an open transaction and seen on the server.

use crate::support;

use std::time::Duration;

use support::TestDatabase;
use support::caller::{Answer, Caller};
use support::lease::{provisioned, worker};
use support::signal::until_waiting_for_a_lock;
use uuid::Uuid;

/// A set acquire that cannot be granted (one key is held by a live owner)
/// must not stop that owner from renewing: `RenewMany` waits at most 1 s.
#[tokio::test]
async fn a_set_acquire_that_cannot_be_granted_does_not_stall_another_owners_renewal() {
    const TEST: &str = "a_set_acquire_that_cannot_be_granted_does_not_stall_another_owners_renewal";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let first = provisioned(&client, "a-first").await;
    let second = provisioned(&client, "b-second").await;
    let holder = Uuid::new_v4();
    let mut service = Caller::new(db.connect().await);
    let generation = service.acquire(&first, holder, 120).await.big("Generation").unwrap();
    // Another service holds `second` and fences its own transaction by it.
    let other = Uuid::new_v4();
    let mut fenced = Caller::new(db.connect().await);
    let other_generation = fenced.acquire(&second, other, 120).await.big("Generation").unwrap();
    fenced.begin("READ COMMITTED").await.unwrap();
    let asserted = fenced
        .call(
            "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3",
            &[&second.as_str(), &other, &other_generation],
        )
        .await;
    assert_eq!(asserted.outcome(), "Holding");
    // A third party asks for both keys as a set.
    let mut waiter = Caller::new(db.connect().await);
    let spid = waiter.spid().await;
    let keys = serde_json::json!([first, second]).to_string();
    let mut waiting = tokio::spawn(async move {
        let answer = match waiter
            .conn
            .query(
                "EXEC fence_api.AcquireSet @ResourceKeys = @P1, @Owner = @P2, @LeaseSeconds = 60",
                &[&keys.as_str(), &Uuid::new_v4()],
            )
            .await
        {
            Ok(stream) => stream.into_first_result().await,
            Err(e) => Err(e),
        };
        let rows = answer.map_err(|e| e.to_string())?;
        Ok::<_, String>(
            rows.iter()
                .map(|row| row.get::<&str, _>("Outcome").unwrap_or_default().to_string())
                .collect::<Vec<_>>(),
        )
    });
    // The set acquire either answers at once (a live owner holds `first`)
    // or waits for a row; either way, then `first`'s holder renews.
    tokio::select! {
        () = until_waiting_for_a_lock(&db, spid, Duration::from_secs(4)) => {}
        answered = &mut waiting => {
            let outcomes = answered.unwrap().unwrap_or_else(|e| panic!("the set acquire failed: {e}"));
            assert_eq!(outcomes.first().map(String::as_str), Some("Busy"), "{outcomes:?}");
        }
    }
    // The holder of `first` renews it.
    let leases = serde_json::json!([{
        "ResourceKey": first, "Owner": holder.hyphenated().to_string(),
        "Generation": generation, "LeaseSeconds": 120
    }])
    .to_string();
    let mut renewer = Caller::new(db.connect().await);
    let renewed = renewer
        .call("EXEC fence_api.RenewMany @Leases = @P1", &[&leases.as_str()])
        .await;
    fenced.commit().await.unwrap();
    if !waiting.is_finished() {
        let _ = waiting.await;
    }
    match renewed {
        Answer::Row(row) => assert_eq!(row.get::<&str, _>("Outcome"), Some("Renewed")),
        Answer::Error { number, message } => {
            panic!("the holder's RenewMany failed behind a set acquire that could not be granted: {number} {message}")
        }
    }
}
