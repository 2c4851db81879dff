//! Lease sets at the edges of their input and outcomes, on a live engine:
//! a key ending in a quotation mark, generations of 19 digits after a
//! recovery, and a publish-and-release whose one key was a replay.

use crate::support;

use std::time::Duration;

use fencepost::client::{AcquireSet, LeaseSet};
use support::TestDatabase;
use support::lease::{provisioned, worker};

const LONG: Duration = Duration::from_secs(120);

fn held(answer: AcquireSet) -> LeaseSet {
    match answer {
        AcquireSet::Acquired(set) => set,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

/// A key may hold any character (contract: keys as `@ResourceKey`), a
/// quotation mark at its end included; `Acquire` takes such a key.
#[tokio::test]
async fn a_key_ending_in_a_quotation_mark_is_acquired_as_a_set() {
    const TEST: &str = "a_key_ending_in_a_quotation_mark_is_acquired_as_a_set";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let client = worker(&db.ado()).await;
    let quoted = provisioned(&client, "ends-with-quote").await + "\"";
    client.provision(&quoted).await.unwrap();
    let other = provisioned(&client, "plain").await;
    let answer = client.acquire_set(&[&quoted, &other], LONG).await;
    let set = held(answer.unwrap_or_else(|e| panic!("the set of {quoted:?} was refused: {e}")));
    let released = client.release_set(&set).await.unwrap();
    assert_eq!(released.len(), 2);
}
