//! An artefact put in a store as a publish would upload it, and the pointer
//! a publish of it would carry, for the artefact tests that read it back.

use fencepost::artifact::object_store::path::Path;
use fencepost::artifact::object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use fencepost::artifact::{ArtifactPath, POINTER_FORMAT, Pointer};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// Writes `bytes` to `store` where an artefact of `key`, `generation` goes
/// under `prefix`, and answers the pointer a publish of it would carry.
pub async fn upload(
    store: &dyn ObjectStore,
    prefix: &Path,
    key: &str,
    generation: i64,
    bytes: &'static [u8],
) -> Pointer {
    let path = ArtifactPath {
        key: key.into(),
        generation,
        operation_id: Uuid::new_v4(),
    }
    .to_path(prefix);
    store.put(&path, PutPayload::from_static(bytes)).await.unwrap();
    pointer_to(&path, bytes)
}

/// The pointer a publish of `bytes` uploaded at `path` would carry.
pub fn pointer_to(path: &Path, bytes: &[u8]) -> Pointer {
    Pointer {
        format: POINTER_FORMAT.into(),
        location: path.to_string(),
        size: bytes.len() as u64,
        sha256: hex::encode(Sha256::digest(bytes)),
        e_tag: None,
        version: None,
        source_version: None,
    }
}
