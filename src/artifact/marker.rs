//! The mark of an artefact folder: `{prefix}/_fencepost`, written by every
//! store opened to publish, so the sweep deletes only under a prefix that
//! fencepost published to, never in a folder or bucket that merely holds
//! objects whose names look like artefacts.

use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::error::ArtifactError;
use super::layout::MARKER_SEGMENT;

/// What the marker holds: a line that says what the folder is.
const MARKER_BODY: &[u8] = b"{\"format\":\"fencepost.artifact-prefix/1\"}\n";

/// The marker's path under `prefix`.
pub(crate) fn marker_path(prefix: &Path) -> Path {
    prefix.clone().join(MARKER_SEGMENT)
}

/// Marks `prefix` as an artefact folder. Create-only, so a marker already
/// there is left as it is.
pub(crate) async fn mark(store: &dyn ObjectStore, prefix: &Path) -> Result<(), ArtifactError> {
    let path = marker_path(prefix);
    let options = PutOptions {
        mode: PutMode::Create,
        ..PutOptions::default()
    };
    match store
        .put_opts(&path, PutPayload::from_static(MARKER_BODY), options)
        .await
    {
        Ok(_) | Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => Ok(()),
        Err(source) => Err(ArtifactError::Store {
            action: "mark",
            path: path.to_string(),
            source,
        }),
    }
}

/// Whether `prefix` carries the marker.
pub(crate) async fn is_marked(store: &dyn ObjectStore, prefix: &Path) -> Result<bool, ArtifactError> {
    let path = marker_path(prefix);
    match store.head(&path).await {
        Ok(_) => Ok(true),
        Err(object_store::Error::NotFound { .. }) => Ok(false),
        Err(source) => Err(ArtifactError::Store {
            action: "read the mark of",
            path: path.to_string(),
            source,
        }),
    }
}
