//! Edges of the artefact sweep and reader: a case-insensitive file system
//! that puts a key's uploads in a fencepost 0.1.0 folder of another
//! spelling, a reader whose store answers a missing object 403, and a
//! publication older than the one `Inspect` saw.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use fencepost::artifact::object_store::memory::InMemory;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use fencepost::artifact::{ArtifactError, ArtifactPath, ArtifactReader, ArtifactStore, KeyState, Publications, Sweep};
use fencepost::client::{LeaseState, Publication};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::support::artifact_upload::pointer_to;
use crate::support::case_insensitive_store::CaseInsensitive;
use crate::support::get_only_store::GetOnly;

/// The database: key -> (current generation, publication); every lease given back.
struct Database(HashMap<String, (i64, Publication)>);

impl Publications for Database {
    async fn key_state(&self, key: &str) -> Result<KeyState, ArtifactError> {
        let Some((generation, publication)) = self.0.get(key) else {
            return Ok(KeyState::NotProvisioned);
        };
        let lease = LeaseState {
            generation: *generation,
            is_held: false,
            lease_until: None,
            published_generation: match publication {
                Publication::Found { generation, .. } => Some(*generation),
                _ => None,
            },
            server_utc: OffsetDateTime::now_utc(),
            source_version: None,
        };
        Ok(KeyState::of(key, &lease, publication.clone()))
    }
}

fn found(generation: i64, payload: String) -> Publication {
    Publication::Found {
        generation,
        payload,
        published_at: OffsetDateTime::now_utc(),
        source_version: None,
    }
}

/// fencepost 0.1.0 published key `Report` into the folder `Report/` (its
/// spelling kept upper-case letters). After the upgrade, key `report` is
/// spelt `report/`: a different name, but on a case-insensitive file system
/// the same folder, so its uploads land in `Report/` and the sweep lists
/// them as key `Report`'s, judges them by `Report`'s state and deletes
/// `report`'s published artefact.
#[tokio::test]
async fn a_key_s_upload_in_a_0_1_0_folder_of_its_case_folded_twin_is_judged_by_both_keys() {
    let disk = Arc::new(CaseInsensitive::new());
    let store = ArtifactStore::new(disk.clone(), &Path::from(""), "fenced")
        .await
        .unwrap();
    let prefix = store.prefix().clone();

    // 0.1.0's artefact of key "Report", generation 3, in "fenced/Report/3/..".
    let legacy = Path::from(format!("fenced/Report/3/{}", Uuid::new_v4()));
    disk.put(&legacy, PutPayload::from_static(b"0.1.0 report"))
        .await
        .unwrap();
    let legacy_pointer = pointer_to(&legacy, b"0.1.0 report");

    // This version publishes key "report", generation 5.
    let new = ArtifactPath {
        key: "report".into(),
        generation: 5,
        operation_id: Uuid::new_v4(),
    }
    .to_path(&prefix);
    assert_eq!(new.as_ref().split('/').nth(1), Some("report"));
    disk.put(&new, PutPayload::from_static(b"new report")).await.unwrap();
    let new_pointer = pointer_to(&new, b"new report");
    // The reader finds it (a case-insensitive open).
    assert_eq!(
        store.follow("report", &new_pointer).await.unwrap().as_ref(),
        b"new report"
    );

    // "Report" has been acquired up to generation 7 since (released, nothing
    // published at 7); "report" is published at 5 and its lease ended.
    let database = Database(HashMap::from([
        ("Report".to_string(), (7, found(3, legacy_pointer.to_payload()))),
        ("report".to_string(), (5, found(5, new_pointer.to_payload()))),
    ]));
    let report = Sweep::new(Duration::from_secs(60))
        .unwrap()
        .run(
            disk.as_ref(),
            &prefix,
            &database,
            Utc::now() + TimeDelta::hours(1),
            &CancellationToken::new(),
            |_| {},
        )
        .await
        .unwrap();
    let after = store.follow("report", &new_pointer).await;
    assert!(
        report.deleted.is_empty() && after.is_ok(),
        "the sweep deleted {:?}; key `report`'s published artefact now reads {after:?}",
        report.deleted.iter().map(|d| &d.object.location).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_reader_with_get_rights_only_reads_a_0_1_0_artefact_of_an_upper_case_key() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let legacy = Path::from(format!("fenced/Report/3/{}", Uuid::new_v4()));
    inner
        .put(&legacy, PutPayload::from_static(b"0.1.0 report"))
        .await
        .unwrap();
    let pointer = pointer_to(&legacy, b"0.1.0 report");
    // With full rights it is found (second place).
    let full = ArtifactReader::new(inner.clone(), &Path::from(""), "fenced").unwrap();
    assert_eq!(full.follow("Report", &pointer).await.unwrap().as_ref(), b"0.1.0 report");
    // With GetObject only it is not.
    let get_only = ArtifactReader::new(Arc::new(GetOnly { inner }), &Path::from(""), "fenced").unwrap();
    let read = get_only.follow("Report", &pointer).await;
    assert!(read.is_ok(), "a good 0.1.0 publication read as {read:?}");
}

/// Inspect says generation 7 was published (PublishedGeneration = 7); a
/// ReadPublication answered from an older state (a lagging replica, a
/// second pool routed elsewhere) says 6. KeyState::of ignores Inspect's
/// PublishedGeneration and judges the generation-7 object an orphan.
#[test]
fn a_publication_older_than_the_one_inspect_saw_keeps_the_key_s_objects_in_doubt() {
    let published = ArtifactPath {
        key: "k".into(),
        generation: 7,
        operation_id: Uuid::new_v4(),
    };
    let older = ArtifactPath {
        generation: 6,
        operation_id: Uuid::new_v4(),
        ..published.clone()
    };
    let lease = LeaseState {
        generation: 7,
        is_held: false,
        lease_until: None,
        published_generation: Some(7),
        server_utc: OffsetDateTime::now_utc(),
        source_version: None,
    };
    let older_pointer = pointer_to(&older.to_path(&Path::from("p")), b"x");
    let state = KeyState::of("k", &lease, found(6, older_pointer.to_payload()));
    let judged = state.judge(&published);
    assert_ne!(
        judged,
        fencepost::artifact::sweep::Judgement::Orphan,
        "Inspect showed generation 7 published, and its object is judged an orphan"
    );
}
