//! Reading a resource's artefact: follow the published pointer, and prove the
//! bytes are the ones published.

use bytes::Bytes;
use object_store::ObjectStoreExt;
use object_store::path::Path;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::error::ArtifactError;
use super::pointer::Pointer;
use super::reader::ArtifactReader;
use super::store::ArtifactStore;
use crate::client::{Client, Publication};

/// A resource's published artefact, its size and SHA-256 checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Artifact {
    /// The published pointer.
    pub pointer: Pointer,
    /// The generation it was published under.
    pub generation: i64,
    /// When its publish committed, on the server clock.
    pub published_at: OffsetDateTime,
    /// The artefact's bytes.
    pub bytes: Bytes,
}

impl ArtifactStore {
    /// [`ArtifactReader::read_artifact`] on this store.
    pub async fn read_artifact(&self, client: &Client, key: &str) -> Result<Artifact, ArtifactError> {
        self.reader().read_artifact(client, key).await
    }

    /// [`ArtifactReader::follow`] on this store.
    pub async fn follow(&self, key: &str, pointer: &Pointer) -> Result<Bytes, ArtifactError> {
        self.reader().follow(key, pointer).await
    }
}

impl ArtifactReader {
    /// The artefact `key`'s publication points to. Only a published pointer
    /// is followed: an upload nobody published is never found. A missing
    /// object, or bytes whose size or SHA-256 differ from the pointer's, is
    /// an error, never data.
    ///
    /// When the object is missing because the pointer was superseded (and the
    /// old artefact swept) between reading the pointer and the object, the
    /// new pointer is followed once.
    pub async fn read_artifact(&self, client: &Client, key: &str) -> Result<Artifact, ArtifactError> {
        let first = self.read_pointer(client, key).await?;
        match self.fetch(key, first.clone()).await {
            Err(ArtifactError::Missing { .. }) => {
                let again = self.read_pointer(client, key).await?;
                if again.0 == first.0 {
                    return self.fetch(key, first).await;
                }
                self.fetch(key, again).await
            }
            other => other,
        }
    }

    async fn read_pointer(&self, client: &Client, key: &str) -> Result<(i64, OffsetDateTime, Pointer), ArtifactError> {
        match client.read_publication(key).await? {
            Publication::Found {
                generation,
                payload,
                published_at,
                ..
            } => {
                let pointer = Pointer::from_payload(&payload).map_err(|source| ArtifactError::NotAPointer {
                    key: key.to_string(),
                    generation,
                    source,
                })?;
                Ok((generation, published_at, pointer))
            }
            Publication::NothingPublished => Err(ArtifactError::NothingPublished { key: key.to_string() }),
            Publication::NotProvisioned => Err(ArtifactError::NotProvisioned { key: key.to_string() }),
        }
    }

    async fn fetch(
        &self,
        key: &str,
        (generation, published_at, pointer): (i64, OffsetDateTime, Pointer),
    ) -> Result<Artifact, ArtifactError> {
        let bytes = self.follow(key, &pointer).await?;
        Ok(Artifact {
            pointer,
            generation,
            published_at,
            bytes,
        })
    }

    /// The bytes of the object `pointer` (published for `key`) names, once
    /// their size and SHA-256 match the pointer's: for a pointer the caller
    /// already holds. A missing object is [`ArtifactError::Missing`], other
    /// bytes [`ArtifactError::Corrupt`].
    pub async fn follow(&self, key: &str, pointer: &Pointer) -> Result<Bytes, ArtifactError> {
        let corrupt = |what: String| ArtifactError::Corrupt {
            key: key.to_string(),
            location: pointer.location.clone(),
            what,
        };
        let path = Path::parse(&pointer.location).map_err(|e| corrupt(format!("its location is not a path: {e}")))?;
        let read = async { self.store.get(&path).await?.bytes().await };
        let bytes = match read.await {
            Ok(bytes) => bytes,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(ArtifactError::Missing {
                    key: key.to_string(),
                    location: pointer.location.clone(),
                });
            }
            Err(source) => {
                return Err(ArtifactError::Store {
                    action: "read",
                    path: pointer.location.clone(),
                    source,
                });
            }
        };
        if bytes.len() as u64 != pointer.size {
            return Err(corrupt(format!(
                "{} bytes, the pointer says {}",
                bytes.len(),
                pointer.size
            )));
        }
        let sha256 = hex::encode(Sha256::digest(&bytes));
        if sha256 != pointer.sha256.to_ascii_lowercase() {
            return Err(corrupt(format!(
                "SHA-256 {sha256}, the pointer says {}",
                pointer.sha256
            )));
        }
        Ok(bytes)
    }
}
