//! What a store's probe proves, with no server: a refusal as "already
//! exists" or as a failed precondition, the first write's bytes kept, a
//! delete that failed, and the store's clock against this host's.

use std::sync::Arc;

use chrono::TimeDelta;
use fencepost::artifact::object_store::ObjectStore;
use fencepost::artifact::object_store::memory::InMemory;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::{ArtifactError, CreateRefusal, prove_create_only};

use crate::support::quirky_store::{Quirk, QuirkyStore};

fn store(quirk: Quirk) -> QuirkyStore {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    QuirkyStore { inner, quirk }
}

#[tokio::test]
async fn a_store_that_refuses_the_second_write_as_a_failed_precondition_is_trusted() {
    let proof = prove_create_only(&store(Quirk::RefusesAsPrecondition), &Path::from("fenced")).await;
    let proof = proof.unwrap_or_else(|error| panic!("{error:?}"));
    assert_eq!(proof.refused_as, CreateRefusal::PreconditionFailed);
}

#[tokio::test]
async fn a_store_that_refuses_the_second_write_after_making_it_is_refused() {
    let refused = prove_create_only(&store(Quirk::OverwritesThenRefuses), &Path::from("fenced"))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ArtifactError::ProbeNotKept { found, .. } if found == "the second write's bytes"),
        "{refused:?}"
    );
    assert!(
        refused.to_string().contains("instead of the first write's bytes"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_probe_that_could_not_be_deleted_is_reported() {
    let proof = prove_create_only(&store(Quirk::RefusesDeletes), &Path::from("fenced"))
        .await
        .unwrap();
    let left = proof.probe_left.expect("the failed delete is reported");
    assert!(left.contains("deletes are refused here"), "{left}");
    assert!(proof.probe.starts_with("fenced/_probe/"), "{}", proof.probe);
}

#[tokio::test]
async fn the_store_s_clock_is_measured_against_this_host_s() {
    let behind = TimeDelta::minutes(-10);
    let proof = prove_create_only(&store(Quirk::ClockOff(behind)), &Path::from("fenced"))
        .await
        .unwrap();
    // Ten minutes, less the second a store's time may lag its write, and
    // less at most the probe's write (and the moment between reading the
    // two clocks around it).
    let off = (proof.clock_skew - behind).to_std().unwrap();
    let lag = std::time::Duration::from_secs(1);
    assert!(
        off >= lag && off <= lag + proof.round_trip + std::time::Duration::from_millis(5),
        "{proof:?}"
    );
    let in_step = prove_create_only(&store(Quirk::RefusesDeletes), &Path::from("fenced"))
        .await
        .unwrap();
    assert_eq!(in_step.clock_skew, TimeDelta::zero(), "{in_step:?}");
}
