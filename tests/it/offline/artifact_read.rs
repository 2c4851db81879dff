//! Reading artefacts with no server: a reader finds an artefact by its
//! identity whatever root its store has, follows a pointer only to an
//! artefact of the key it reads, checks the size before it downloads, and
//! needs no right but reading.

use std::sync::Arc;

use bytes::Bytes;
use fencepost::artifact::object_store::local::LocalFileSystem;
use fencepost::artifact::object_store::memory::InMemory;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use fencepost::artifact::{ArtifactError, ArtifactReader, ArtifactStore};
use futures_util::TryStreamExt;

use crate::support::artifact_upload::{pointer_to, upload};
use crate::support::quirky_store::{Quirk, QuirkyStore};
use crate::support::read_only_store::ReadOnlyStore;

#[tokio::test]
async fn a_reader_whose_store_is_rooted_elsewhere_than_the_publisher_s_finds_the_artefact() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    // The publisher's store is rooted at the folder; its pointer says
    // "daily/k/1/<id>".
    let rooted = Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap());
    let publisher = ArtifactStore::new(rooted, &Path::from(""), "daily").await.unwrap();
    let published = upload(publisher.object_store().as_ref(), publisher.prefix(), "k", 1, b"rooted").await;
    assert!(published.location.starts_with("daily/"), "{published:?}");
    // The reader's is rooted at `/`, by URL.
    let reader = ArtifactStore::open(&url, "daily").await.unwrap();
    assert_eq!(
        reader.follow("k", &published).await.unwrap(),
        Bytes::from_static(b"rooted")
    );
    // And the other way round: a pointer spelt from `/` read from the folder.
    let from_root = upload(
        reader.object_store().as_ref(),
        reader.prefix(),
        "k",
        2,
        b"from the root",
    )
    .await;
    assert_eq!(
        publisher.follow("k", &from_root).await.unwrap(),
        Bytes::from_static(b"from the root")
    );
}

#[tokio::test]
async fn a_pointer_to_an_artefact_of_another_key_is_corrupt_and_never_followed() {
    let store = ArtifactStore::open("memory://", "fenced").await.unwrap();
    let other = upload(
        store.object_store().as_ref(),
        store.prefix(),
        "payroll",
        1,
        b"not yours",
    )
    .await;
    let error = store.follow("report", &other).await.unwrap_err();
    assert!(
        matches!(&error, ArtifactError::Corrupt { what, .. } if what.contains("of the key `payroll`")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_pointer_to_an_object_that_is_no_artefact_is_corrupt_and_never_followed() {
    let store = ArtifactStore::open("memory://", "fenced").await.unwrap();
    let path = store.prefix().clone().join("README.txt");
    store
        .object_store()
        .put(&path, PutPayload::from_static(b"some file"))
        .await
        .unwrap();
    let error = store
        .follow("report", &pointer_to(&path, b"some file"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ArtifactError::Corrupt { what, .. } if what.contains("does not end in an artefact's name")),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_object_of_another_size_is_corrupt_before_its_body_is_downloaded() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let quirky = Arc::new(QuirkyStore {
        inner: inner.clone(),
        quirk: Quirk::BodyFails,
    });
    let mut pointer = upload(inner.as_ref(), &Path::from("fenced"), "k", 1, b"the report").await;
    pointer.size += 1;
    let reader = ArtifactReader::new(quirky, &Path::from(""), "fenced").unwrap();
    let error = reader.follow("k", &pointer).await.unwrap_err();
    assert!(
        matches!(&error, ArtifactError::Corrupt { what, .. } if what == "10 bytes, the pointer says 11"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_reader_needs_only_the_right_to_read() {
    let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let pointer = upload(inner.as_ref(), &Path::from("fenced"), "k", 1, b"published").await;
    let read_only = Arc::new(ReadOnlyStore { inner: inner.clone() });
    // A store opened to publish must write, and says so.
    let refused = ArtifactStore::new(read_only.clone(), &Path::from(""), "fenced")
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, ArtifactError::Store { action: "probe", source, .. }
            if matches!(source, fencepost::artifact::object_store::Error::PermissionDenied { .. })),
        "{refused:?}"
    );
    // A reader writes nothing and reads.
    let reader = ArtifactReader::new(read_only, &Path::from(""), "fenced").unwrap();
    assert_eq!(
        reader.follow("k", &pointer).await.unwrap(),
        Bytes::from_static(b"published")
    );
    let objects: Vec<_> = inner
        .list(None)
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    assert_eq!(objects, [pointer.location]);
}
