//! Reading artefacts with no server: a reader needs no right but reading.

use std::sync::Arc;

use bytes::Bytes;
use fencepost::artifact::object_store::ObjectStore;
use fencepost::artifact::object_store::memory::InMemory;
use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::{ArtifactError, ArtifactReader, ArtifactStore};
use futures_util::TryStreamExt;

use crate::support::artifact_upload::upload;
use crate::support::read_only_store::ReadOnlyStore;

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
