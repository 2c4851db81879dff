//! The store artefacts are published to, once it has proved it refuses to
//! replace an object written create-only, and has marked its prefix.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::path::Path;

use super::error::ArtifactError;
use super::marker::mark;
use super::probe::{CreateOnlyProof, prove_create_only};
use super::reader::ArtifactReader;
use super::store_url::{debug_store, join_prefix, open_url};

/// Where artefacts are published and read: a store that has refused to
/// replace a probe object written create-only, and the prefix under which
/// every artefact goes, marked as an artefact folder. Opening one writes
/// (the probe, the mark), so a process that only reads opens an
/// [`ArtifactReader`] instead. Cheap to clone.
#[derive(Clone)]
pub struct ArtifactStore {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) prefix: Path,
}

/// The store as it names itself and the prefix: never the store's own
/// `Debug`, which prints its configuration with the credentials in it
/// (Azure access keys, SAS tokens, GCS bearer tokens).
impl std::fmt::Debug for ArtifactStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        debug_store(f, "ArtifactStore", self.store.as_ref(), &self.prefix)
    }
}

impl ArtifactStore {
    /// Opens the store `url` names ([`open_url`]) to publish to: it must
    /// prove it refuses to replace an object ([`prove_create_only`]), and
    /// the prefix is marked as an artefact folder. Artefacts go under the
    /// URL's path and then `prefix`. This writes and deletes in the store; a
    /// process that only reads opens an [`ArtifactReader`].
    pub async fn open(url: &str, prefix: &str) -> Result<ArtifactStore, ArtifactError> {
        Ok(ArtifactStore::open_with_proof(url, prefix).await?.0)
    }

    /// [`open`](ArtifactStore::open), with what the store's probe showed:
    /// how it refused, its clock against this host's, and whether the probe
    /// could be deleted (`fencepost artifact verify` reports it).
    pub async fn open_with_proof(url: &str, prefix: &str) -> Result<(ArtifactStore, CreateOnlyProof), ArtifactError> {
        let (store, base) = open_url(url)?;
        ArtifactStore::new_with_proof(store, &base, prefix).await
    }

    /// A store of the caller's making (a configured builder, a wrapper) to
    /// publish to, once it proved it refuses to replace an object; artefacts
    /// go under `base` and then `prefix`. A `LocalFileSystem` should be
    /// built `with_fsync(true)`, as [`open_url`] builds it, or a crash after
    /// a publish can lose the bytes its pointer names.
    pub async fn new(store: Arc<dyn ObjectStore>, base: &Path, prefix: &str) -> Result<ArtifactStore, ArtifactError> {
        Ok(ArtifactStore::new_with_proof(store, base, prefix).await?.0)
    }

    /// [`new`](ArtifactStore::new), with what the store's probe showed.
    pub async fn new_with_proof(
        store: Arc<dyn ObjectStore>,
        base: &Path,
        prefix: &str,
    ) -> Result<(ArtifactStore, CreateOnlyProof), ArtifactError> {
        let prefix = join_prefix(base, prefix)?;
        let proof = prove_create_only(store.as_ref(), &prefix).await?;
        mark(store.as_ref(), &prefix).await?;
        Ok((ArtifactStore { store, prefix }, proof))
    }

    /// A handle on the same store and prefix that only reads.
    pub fn reader(&self) -> ArtifactReader {
        ArtifactReader {
            store: self.store.clone(),
            prefix: self.prefix.clone(),
        }
    }

    /// The path every artefact of this store is under.
    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// The object store itself.
    pub fn object_store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }
}

#[cfg(test)]
mod tests {
    use object_store::azure::MicrosoftAzureBuilder;

    use super::*;

    #[test]
    fn a_store_s_debug_names_the_store_and_prefix_and_never_its_credentials() {
        // "topsecret", base64: the builder keeps the decoded bytes.
        let azure = MicrosoftAzureBuilder::new()
            .with_account("acct")
            .with_container_name("reports")
            .with_access_key("dG9wc2VjcmV0")
            .build()
            .unwrap();
        let store = ArtifactStore {
            store: Arc::new(azure),
            prefix: Path::from("fenced/daily"),
        };
        for debug in [format!("{store:?}"), format!("{:?}", store.reader())] {
            assert!(
                debug.contains("MicrosoftAzure { account: acct, container: reports }"),
                "{debug}"
            );
            assert!(debug.contains("fenced/daily"), "{debug}");
            let secret: String = b"topsecret".iter().map(|b| format!("{b}, ")).collect();
            for leak in ["AccessKey", "dG9wc2VjcmV0", secret.trim_end_matches(", ")] {
                assert!(!debug.contains(leak), "{leak} in {debug}");
            }
        }
    }
}
