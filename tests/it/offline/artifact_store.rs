//! Fenced artefacts on the in-memory and local file system stores, with no
//! server: a store is trusted only after it refused an overwrite, a reader
//! gets the published bytes or a typed error, and the sweep deletes orphans
//! and old probes, never a published artefact, one within its grace, one
//! of a key with no fence row, or an object that is not an artefact.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::{TimeDelta, Utc};
use fencepost::artifact::object_store::local::LocalFileSystem;
use fencepost::artifact::object_store::memory::InMemory;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use fencepost::artifact::{
    ArtifactError, ArtifactStore, DeletedBecause, KeptBecause, KeyState, Pointer, Publications, Sweep, SweepReport,
    join_prefix, open_url,
};
use fencepost::client::{LeaseState, Publication};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::support::artifact_upload;
use crate::support::overwriting_store::OverwritingStore;

/// Publications as a map from key to its current generation, whose lease
/// has ended, and the pointer published under it; a key not in it has no
/// fence row.
struct Published(HashMap<String, (i64, Pointer)>);

impl Publications for Published {
    async fn key_state(&self, key: &str) -> Result<KeyState, ArtifactError> {
        let Some((generation, pointer)) = self.0.get(key) else {
            return Ok(KeyState::NotProvisioned);
        };
        let lease = LeaseState {
            generation: *generation,
            is_held: false,
            lease_until: None,
            published_generation: Some(*generation),
            server_utc: OffsetDateTime::now_utc(),
            source_version: None,
        };
        let publication = Publication::Found {
            generation: *generation,
            payload: pointer.to_payload(),
            published_at: OffsetDateTime::now_utc(),
            source_version: None,
        };
        Ok(KeyState::of(key, &lease, publication))
    }
}

/// Writes `bytes` where an artefact of `key`, `generation` goes in `store`,
/// and the pointer a publish of it would carry.
async fn upload(store: &ArtifactStore, key: &str, generation: i64, bytes: &'static [u8]) -> Pointer {
    artifact_upload::upload(store.object_store().as_ref(), store.prefix(), key, generation, bytes).await
}

#[tokio::test]
async fn memory_and_folder_stores_prove_they_refuse_an_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let folder = format!("file://{}", dir.path().display());
    for url in ["memory://", folder.as_str()] {
        let store = ArtifactStore::open(url, "fenced").await.unwrap();
        // The probe is gone again; the prefix's mark stays.
        let left: Vec<_> =
            futures_util::TryStreamExt::try_collect::<Vec<_>>(store.object_store().list(Some(store.prefix())))
                .await
                .unwrap();
        let left: Vec<_> = left.iter().map(|meta| meta.location.to_string()).collect();
        assert_eq!(left, [format!("{}/_fencepost", store.prefix())], "{url}");
    }
}

#[tokio::test]
async fn a_store_that_ignores_create_only_writes_is_refused_naming_the_problem() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let store = Arc::new(OverwritingStore { inner });
    let refused = ArtifactStore::new(store, &Path::from(""), "fenced").await.unwrap_err();
    assert!(
        matches!(refused, ArtifactError::CreateNotEnforced { .. }),
        "{refused:?}"
    );
    let message = refused.to_string();
    assert!(message.contains("accepted a second create-only write"), "{message}");
    assert!(message.contains("OverwritingStore"), "{message}");
}

#[tokio::test]
async fn a_reader_gets_the_published_bytes_and_a_typed_error_for_missing_or_corrupt_ones() {
    let store = ArtifactStore::open("memory://", "fenced").await.unwrap();
    let pointer = upload(&store, "report:daily", 3, b"the report").await;
    assert_eq!(
        store.follow("report:daily", &pointer).await.unwrap(),
        Bytes::from_static(b"the report")
    );

    let mut wrong_size = pointer.clone();
    wrong_size.size += 1;
    let error = store.follow("report:daily", &wrong_size).await.unwrap_err();
    assert!(
        matches!(&error, ArtifactError::Corrupt { what, .. } if what.contains("bytes")),
        "{error:?}"
    );

    let mut wrong_digest = pointer.clone();
    wrong_digest.sha256 = hex::encode(Sha256::digest(b"another report"));
    let error = store.follow("report:daily", &wrong_digest).await.unwrap_err();
    assert!(
        matches!(&error, ArtifactError::Corrupt { what, .. } if what.contains("SHA-256")),
        "{error:?}"
    );

    store
        .object_store()
        .delete(&Path::parse(&pointer.location).unwrap())
        .await
        .unwrap();
    let error = store.follow("report:daily", &pointer).await.unwrap_err();
    assert!(matches!(error, ArtifactError::Missing { .. }), "{error:?}");
}

fn locations<T>(items: &[T], location: impl Fn(&T) -> &str) -> Vec<String> {
    let mut all: Vec<_> = items.iter().map(|i| location(i).to_string()).collect();
    all.sort();
    all
}

/// An hour after the objects were written, with a grace of 30 minutes for
/// leases of at most 10: everything written is past the grace.
fn an_hour_later() -> chrono::DateTime<Utc> {
    Utc::now() + TimeDelta::hours(1)
}

fn sweep() -> Sweep {
    Sweep::new(Duration::from_secs(30 * 60)).unwrap()
}

async fn sweep_on(url: &str) {
    let store = ArtifactStore::open(url, "fenced").await.unwrap();
    let published = upload(&store, "report:daily", 5, b"current").await;
    let superseded = upload(&store, "report:daily", 4, b"older").await;
    let refused = upload(&store, "report:daily", 5, b"stale worker").await;
    let never_provisioned = upload(&store, "other", 1, b"nobody").await;
    let probe = store
        .prefix()
        .clone()
        .join("_probe")
        .join(Uuid::new_v4().to_string().as_str());
    let foreign = store.prefix().clone().join("README.txt");
    for path in [&probe, &foreign] {
        store
            .object_store()
            .put(path, PutPayload::from_static(b"x"))
            .await
            .unwrap();
    }
    let publications = Published(HashMap::from([("report:daily".to_string(), (5, published.clone()))]));
    let stop = CancellationToken::new();

    // Right after they were written every object is within the grace.
    let young = sweep()
        .run(
            store.object_store().as_ref(),
            store.prefix(),
            &publications,
            Utc::now(),
            &stop,
            |_| {},
        )
        .await
        .unwrap();
    assert!(young.deleted.is_empty(), "{url}: {young:?}");
    assert_eq!(young.listed, 6);

    // A dry run says what it would delete and deletes nothing.
    let mut dry = sweep();
    dry.dry_run(true);
    let planned = dry
        .run(
            store.object_store().as_ref(),
            store.prefix(),
            &publications,
            an_hour_later(),
            &stop,
            |_| {},
        )
        .await
        .unwrap();
    assert_eq!(planned.deleted.len(), 3, "{url}: {planned:?}");
    let still: Vec<_> =
        futures_util::TryStreamExt::try_collect::<Vec<_>>(store.object_store().list(Some(store.prefix())))
            .await
            .unwrap();
    assert_eq!(
        still.len(),
        7,
        "{url}: the dry run deleted (six objects and the prefix's mark)"
    );

    let report: SweepReport = sweep()
        .run(
            store.object_store().as_ref(),
            store.prefix(),
            &publications,
            an_hour_later(),
            &stop,
            |_| {},
        )
        .await
        .unwrap();
    let mut expected_deleted = vec![superseded.location.clone(), refused.location.clone(), probe.to_string()];
    expected_deleted.sort();
    assert_eq!(
        locations(&report.deleted, |d| &d.object.location),
        expected_deleted,
        "{url}"
    );
    assert!(report.deleted.iter().any(|d| d.why == DeletedBecause::Probe));
    // A key with no fence row is in doubt, never "nothing published".
    let mut expected_kept = vec![
        published.location.clone(),
        foreign.to_string(),
        never_provisioned.location.clone(),
    ];
    expected_kept.sort();
    assert_eq!(locations(&report.kept, |k| &k.object.location), expected_kept, "{url}");
    assert!(report.kept.iter().any(|k| k.why == KeptBecause::Published));
    assert!(report.kept.iter().any(|k| k.why == KeptBecause::NotAnArtifact));
    assert!(report.kept.iter().any(|k| k.why == KeptBecause::NotProvisioned));
    assert!(!report.interrupted);
    // What the sweep kept is still readable; what it deleted is gone.
    assert_eq!(
        store.follow("report:daily", &published).await.unwrap(),
        Bytes::from_static(b"current")
    );
    assert!(matches!(
        store.follow("report:daily", &refused).await,
        Err(ArtifactError::Missing { .. })
    ));
}

#[tokio::test]
async fn the_sweep_deletes_orphans_and_old_probes_from_memory_and_never_what_is_published() {
    sweep_on("memory://").await;
}

#[tokio::test]
async fn the_sweep_deletes_orphans_and_old_probes_from_a_folder_and_never_what_is_published() {
    let dir = tempfile::tempdir().unwrap();
    sweep_on(&format!("file://{}", dir.path().display())).await;
}

#[tokio::test]
async fn a_stopped_sweep_deletes_nothing_more_and_says_it_was_interrupted() {
    let store = ArtifactStore::open("memory://", "fenced").await.unwrap();
    upload(&store, "k", 1, b"orphan").await;
    let stop = CancellationToken::new();
    stop.cancel();
    let report = sweep()
        .run(
            store.object_store().as_ref(),
            store.prefix(),
            &Published(HashMap::new()),
            an_hour_later(),
            &stop,
            |_| {},
        )
        .await
        .unwrap();
    assert!(report.interrupted);
    assert!(report.deleted.is_empty());
}

#[test]
fn a_grace_that_does_not_exceed_twice_a_named_longest_lease_is_refused() {
    let lease = Duration::from_secs(600);
    let refused = Sweep::new(lease * 2)
        .unwrap()
        .longest_lease(lease)
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(refused, ArtifactError::GraceTooShort { .. }));
    assert!(refused.to_string().contains("twice that lease"), "{refused}");
    assert!(
        Sweep::new(lease * 2 + Duration::from_secs(1))
            .unwrap()
            .longest_lease(lease)
            .is_ok()
    );
}

#[tokio::test]
async fn the_sweep_keeps_a_publication_made_through_a_differently_rooted_store() {
    // The service roots its store at the folder; the operator sweeps the
    // same folder by URL, rooted at `/`: one object, two spellings.
    let dir = tempfile::tempdir().unwrap();
    let rooted: Arc<dyn ObjectStore> = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let writer = ArtifactStore::new(rooted, &Path::from(""), "daily").await.unwrap();
    let published = upload(&writer, "report:daily", 42, b"published").await;
    let orphan = upload(&writer, "report:daily", 41, b"superseded").await;
    assert_eq!(
        published.location,
        format!(
            "daily/report_3Adaily/42/{}",
            published.location.rsplit('/').next().unwrap()
        )
    );

    let (by_url, base) = open_url(&format!("file://{}", dir.path().display())).unwrap();
    let prefix = join_prefix(&base, "daily").unwrap();
    let publications = Published(HashMap::from([("report:daily".to_string(), (42, published.clone()))]));
    let report = sweep()
        .run(
            by_url.as_ref(),
            &prefix,
            &publications,
            an_hour_later(),
            &CancellationToken::new(),
            |_| {},
        )
        .await
        .unwrap();
    let deleted = locations(&report.deleted, |d| &d.object.location);
    assert_eq!(
        deleted,
        [format!("{prefix}/{}", orphan.location.trim_start_matches("daily/"))],
        "{report:?}"
    );
    assert_eq!(
        writer.follow("report:daily", &published).await.unwrap(),
        Bytes::from_static(b"published")
    );
}

#[test]
fn store_urls_name_what_to_fix() {
    let error = open_url("ftp://host/x").unwrap_err();
    assert!(error.to_string().contains("s3://bucket/path"), "{error}");
}

/// Publications that cannot be read, as when the server went away.
struct Unreachable;

impl Publications for Unreachable {
    async fn key_state(&self, key: &str) -> Result<KeyState, ArtifactError> {
        Err(ArtifactError::NotProvisioned { key: key.into() })
    }
}

#[tokio::test]
async fn a_sweep_that_cannot_read_a_publication_deletes_nothing_of_that_key_and_reports_why() {
    let store = ArtifactStore::open("memory://", "fenced").await.unwrap();
    let artifact = upload(&store, "k", 1, b"maybe published").await;
    let report = sweep()
        .run(
            store.object_store().as_ref(),
            store.prefix(),
            &Unreachable,
            an_hour_later(),
            &CancellationToken::new(),
            |_| {},
        )
        .await
        .unwrap();
    assert!(report.deleted.is_empty(), "{report:?}");
    assert!(
        report
            .failed
            .as_deref()
            .unwrap()
            .contains("reading the publication of \"k\""),
        "{report:?}"
    );
    assert!(store.follow("k", &artifact).await.is_ok());
}
