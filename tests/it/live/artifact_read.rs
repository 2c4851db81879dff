//! Reading published artefacts against the engine: a reader with read-only
//! rights reads what was published.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use fencepost::artifact::object_store::ObjectStore;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::{ArtifactReader, ArtifactStore, FencedArtifact, Produced, open_url};
use futures_util::TryStreamExt;

use super::artifact_fenced::{Backend, LEASE, own_prefix, store_url};
use crate::support::TestDatabase;
use crate::support::lease::{provisioned, workers};
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
