//! Reading published artefacts against the engine: a reader whose store is
//! rooted elsewhere than the publisher's reads what was published, one
//! with read-only rights reads it too, and a publication whose pointer
//! names anything but an artefact of its key and generation is never
//! followed.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use fencepost::artifact::object_store::ObjectStore;
use fencepost::artifact::object_store::local::LocalFileSystem;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::{ArtifactError, ArtifactReader, ArtifactStore, FencedArtifact, Produced, open_url};
use fencepost::client::Publish;
use futures_util::TryStreamExt;
use uuid::Uuid;

use super::artifact_fenced::{Backend, LEASE, own_prefix, store_url};
use crate::support::TestDatabase;
use crate::support::artifact_upload::upload;
use crate::support::lease::{acquired, provisioned, workers};
use crate::support::read_only_store::ReadOnlyStore;

/// Publishes `bytes` for `key` through `store` under a lease of its own.
async fn published(store: &ArtifactStore, client: &fencepost::Client, key: &str, bytes: &'static [u8]) {
    let run = store
        .run_fenced(client, key, LEASE, |_stop| async move {
            Ok::<_, Infallible>(Produced::new(Bytes::from_static(bytes)))
        })
        .await
        .unwrap();
    assert!(matches!(run, FencedArtifact::Published(_)), "{run:?}");
}

#[tokio::test]
async fn a_reader_whose_folder_store_is_rooted_elsewhere_than_the_publisher_s_reads_its_artefact() {
    const TEST: &str = "a_reader_whose_folder_store_is_rooted_elsewhere_than_the_publisher_s_reads_its_artefact";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [worker, reader] = workers(&db.ado()).await;
    let key = provisioned(&worker, "artifact-rooted").await;
    let dir = tempfile::tempdir().unwrap();
    // The publisher's store is rooted at the folder, as object_store's own
    // documentation builds one; its pointer says "daily/...".
    let rooted = LocalFileSystem::new_with_prefix(dir.path()).unwrap().with_fsync(true);
    let publisher = ArtifactStore::new(Arc::new(rooted), &Path::from(""), "daily")
        .await
        .unwrap();
    published(&publisher, &worker, &key, b"rooted at the folder").await;
    // The reader's store is opened by URL, rooted at `/`.
    let url = format!("file://{}", dir.path().display());
    let by_url = ArtifactStore::open(&url, "daily").await.unwrap();
    let read = by_url.read_artifact(&reader, &key).await.unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"rooted at the folder"));
    assert!(read.pointer.location.starts_with("daily/"), "{:?}", read.pointer);
    let read = ArtifactReader::open(&url, "daily")
        .unwrap()
        .read_artifact(&reader, &key)
        .await
        .unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"rooted at the folder"));
    drop((worker, reader));
    db.drop().await;
}

async fn a_reader_with_read_only_rights_reads_the_published_artefact(test: &str, backend: Backend) {
    let Some((url, _dir)) = store_url(test, backend) else {
        return;
    };
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let [worker, reader] = workers(&db.ado()).await;
    let key = provisioned(&worker, "artifact-read-only").await;
    let prefix = own_prefix();
    let publisher = ArtifactStore::open(&url, &prefix).await.unwrap();
    published(&publisher, &worker, &key, b"for read-only eyes").await;
    let before = listed(publisher.object_store().as_ref(), publisher.prefix()).await;

    let (inner, base) = open_url(&url).unwrap();
    let read_only = ArtifactReader::new(Arc::new(ReadOnlyStore { inner }), &base, &prefix).unwrap();
    let read = read_only.read_artifact(&reader, &key).await.unwrap();
    assert_eq!(read.bytes, Bytes::from_static(b"for read-only eyes"));
    assert_eq!(
        listed(publisher.object_store().as_ref(), publisher.prefix()).await,
        before
    );
    drop((worker, reader));
    db.drop().await;
}

async fn listed(store: &dyn ObjectStore, prefix: &Path) -> Vec<String> {
    let mut all: Vec<String> = store
        .list(Some(prefix))
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    all.sort();
    all
}

#[tokio::test]
async fn a_reader_with_read_only_rights_reads_the_published_artefact_from_a_folder() {
    a_reader_with_read_only_rights_reads_the_published_artefact(
        "a_reader_with_read_only_rights_reads_the_published_artefact_from_a_folder",
        Backend::Folder,
    )
    .await;
}

#[tokio::test]
async fn a_reader_with_read_only_rights_reads_the_published_artefact_from_azurite() {
    a_reader_with_read_only_rights_reads_the_published_artefact(
        "a_reader_with_read_only_rights_reads_the_published_artefact_from_azurite",
        Backend::Azurite,
    )
    .await;
}

#[tokio::test]
async fn a_publication_whose_pointer_names_another_key_s_or_generation_s_artefact_is_never_followed() {
    const TEST: &str = "a_publication_whose_pointer_names_another_key_s_or_generation_s_artefact_is_never_followed";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let [worker] = workers(&db.ado()).await;
    let store = ArtifactStore::open("memory://", "fenced").await.unwrap();
    let (objects, prefix) = (store.object_store().as_ref(), store.prefix());

    // A repair script publishes, for one key, the pointer to another's.
    let key = provisioned(&worker, "artifact-foreign-key").await;
    let other = provisioned(&worker, "artifact-other-key").await;
    let lease = acquired(worker.acquire(&key, LEASE).await.unwrap());
    let foreign = upload(objects, prefix, &other, lease.generation(), b"another key's").await;
    assert_eq!(
        worker
            .publish(&lease, Uuid::new_v4(), &foreign.to_payload())
            .await
            .unwrap(),
        Publish::Published
    );
    let error = store.read_artifact(&worker, &key).await.unwrap_err();
    assert!(
        matches!(&error, ArtifactError::Corrupt { what, .. } if what.contains(&format!("of the key `{other}`"))),
        "{error:?}"
    );

    // And one publishes, under generation g, an artefact of generation g + 1.
    let key = provisioned(&worker, "artifact-foreign-generation").await;
    let lease = acquired(worker.acquire(&key, LEASE).await.unwrap());
    let generation = lease.generation();
    let ahead = upload(objects, prefix, &key, generation + 1, b"not this generation's").await;
    assert_eq!(
        worker
            .publish(&lease, Uuid::new_v4(), &ahead.to_payload())
            .await
            .unwrap(),
        Publish::Published
    );
    let error = store.read_artifact(&worker, &key).await.unwrap_err();
    let expected = format!(
        "of generation {}, but generation {generation} published it",
        generation + 1
    );
    assert!(
        matches!(&error, ArtifactError::Corrupt { what, .. } if what.contains(&expected)),
        "{error:?}"
    );
    drop(worker);
    db.drop().await;
}
