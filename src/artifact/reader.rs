//! A handle that only reads artefacts, for a process whose credentials only
//! read (a report front-end with read-only bucket rights and
//! `fence_reader`): opening it writes nothing, neither a probe nor the
//! prefix's mark, and it has no way to publish.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::path::Path;

use super::error::ArtifactError;
use super::store_url::{debug_store, join_prefix, open_url};

/// Where artefacts are read from: a store and the prefix they are under.
/// It reads only ([`read_artifact`](ArtifactReader::read_artifact),
/// [`follow`](ArtifactReader::follow)); publishing takes an
/// [`ArtifactStore`](super::ArtifactStore), which proves the store first.
/// Cheap to clone.
///
/// ```compile_fail,E0599
/// # async fn f(reader: fencepost::artifact::ArtifactReader, guard: &fencepost::client::LeaseGuard) {
/// // A reader cannot publish.
/// reader.publish(guard, fencepost::artifact::Produced::new(b"x".to_vec())).await;
/// # }
/// ```
#[derive(Clone)]
pub struct ArtifactReader {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) prefix: Path,
}

impl std::fmt::Debug for ArtifactReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_store(f, "ArtifactReader", self.store.as_ref(), &self.prefix)
    }
}

impl ArtifactReader {
    /// Reads the artefacts under the path of the store `url` names
    /// ([`open_url`]) and then `prefix`. Nothing is written or read yet: a
    /// wrong URL is an error now, a store that cannot be reached one at the
    /// first read.
    pub fn open(url: &str, prefix: &str) -> Result<ArtifactReader, ArtifactError> {
        let (store, base) = open_url(url)?;
        ArtifactReader::new(store, &base, prefix)
    }

    /// Reads the artefacts of a store of the caller's making under `base`
    /// and then `prefix`; nothing is written.
    pub fn new(store: Arc<dyn ObjectStore>, base: &Path, prefix: &str) -> Result<ArtifactReader, ArtifactError> {
        let prefix = join_prefix(base, prefix)?;
        Ok(ArtifactReader { store, prefix })
    }

    /// The path every artefact it reads is under.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// The object store itself.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }
}
