//! `acquire_waiting` on a live engine: a waiter takes a lease its holder
//! released early within about a second, not when the lease would have
//! expired.

use crate::support;

use std::time::Duration;

use fencepost::client::{Acquire, Release};
use support::TestDatabase;
use support::lease::{acquired, provisioned, workers};
use tokio::time::Instant;

#[tokio::test]
async fn a_waiter_takes_a_lease_released_early_within_about_a_second() {
    const TEST: &str = "a_waiter_takes_a_lease_released_early_within_about_a_second";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [holder, waiter] = workers(&db.ado()).await;
    let key = provisioned(&holder, "report").await;
    let lease = acquired(holder.acquire(&key, Duration::from_secs(600)).await.unwrap());

    let sent = waiter.requests_sent();
    let waiting = tokio::spawn({
        let (waiter, key) = (waiter.clone(), key.clone());
        async move {
            let answer = waiter
                .acquire_waiting(&key, Duration::from_secs(30), Duration::from_secs(20))
                .await
                .unwrap();
            (answer, Instant::now())
        }
    });
    // The waiter has found the key busy and asked again: a second attempt
    // starts only after the first was answered Busy. It is still waiting.
    let give_up = Instant::now() + Duration::from_secs(10);
    while waiter.requests_sent() < sent + 2 {
        assert!(Instant::now() < give_up, "the waiter never asked twice");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!waiting.is_finished(), "the waiter stopped waiting for a held lease");
    assert_eq!(holder.release(&lease).await.unwrap(), Release::Released);
    let released = Instant::now();

    let (answer, taken) = waiting.await.unwrap();
    assert!(matches!(answer, Acquire::Acquired(_)), "{answer:?}");
    let after = taken.saturating_duration_since(released);
    assert!(
        after < Duration::from_millis(2500),
        "the waiter took the released lease {after:?} after the release"
    );
    drop((holder, waiter));
    db.drop().await;
}
