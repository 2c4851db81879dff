//! Reading a resource's artefact: follow the published pointer to the
//! artefact it names, and prove the bytes are the ones published.
//!
//! A pointer's location is spelt from the root of the publisher's store,
//! which need not be the reader's (one opened `file:///var/reports`, the
//! other a `LocalFileSystem` rooted at `/var/reports`). So the reader goes
//! by the artefact's identity, its (key, generation, operation id), and
//! looks for it under its own prefix first, then at the location as spelt.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetResult, ObjectStoreExt};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::error::ArtifactError;
use super::layout::ArtifactPath;
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
    /// is followed: an upload nobody published is never found. A pointer
    /// that names anything but an artefact of `key` of the published
    /// generation is [`ArtifactError::Corrupt`] and not followed; a missing
    /// object is [`ArtifactError::Missing`]; bytes whose size or SHA-256
    /// differ from the pointer's are `Corrupt`, never data.
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
        let bytes = self.follow_published(key, Some(generation), &pointer).await?;
        Ok(Artifact {
            pointer,
            generation,
            published_at,
            bytes,
        })
    }

    /// The bytes of the artefact `pointer` (published for `key`) names, once
    /// their size and SHA-256 match the pointer's: for a pointer the caller
    /// already holds. A pointer that names no artefact of `key` is
    /// [`ArtifactError::Corrupt`] and not followed (its generation is not
    /// checked here: [`read_artifact`](ArtifactReader::read_artifact) knows
    /// the published one). A missing object is [`ArtifactError::Missing`],
    /// other bytes `Corrupt`.
    pub async fn follow(&self, key: &str, pointer: &Pointer) -> Result<Bytes, ArtifactError> {
        self.follow_published(key, None, pointer).await
    }

    /// [`follow`](ArtifactReader::follow), the artefact required to be of
    /// `generation` when it is given.
    async fn follow_published(
        &self,
        key: &str,
        generation: Option<i64>,
        pointer: &Pointer,
    ) -> Result<Bytes, ArtifactError> {
        let places = self
            .places(key, generation, pointer)
            .map_err(|what| ArtifactError::Corrupt {
                key: key.to_string(),
                location: pointer.location.clone(),
                what,
            })?;
        // S3 answers a missing object with 403, not 404, to a reader that
        // may not list the bucket: a refusal at one place is no reason not
        // to look at the next, and is the answer only if none holds it.
        let mut refused = None;
        for path in &places {
            let got = match self.store.get(path).await {
                Ok(got) => got,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(source @ object_store::Error::PermissionDenied { .. }) => {
                    refused.get_or_insert_with(|| read_failed(path, source));
                    continue;
                }
                Err(source) => return Err(read_failed(path, source)),
            };
            return checked(key, path, pointer, got).await;
        }
        Err(refused.unwrap_or_else(|| ArtifactError::Missing {
            key: key.to_string(),
            location: pointer.location.clone(),
        }))
    }

    /// Where the artefact `pointer` names may be, in the order to look:
    /// under this reader's prefix as the pointer spells it, as fencepost
    /// spells it now (fencepost 0.1.0 kept upper-case letters), then the
    /// location itself. Why not, when the pointer names no artefact of
    /// `key` (of `generation`, when given): a pointer is followed only to
    /// what a publish of that key could have uploaded.
    fn places(&self, key: &str, generation: Option<i64>, pointer: &Pointer) -> Result<Vec<Path>, String> {
        let location =
            Path::parse(&pointer.location).map_err(|e| format!("its location is not an object path: {e}"))?;
        let identity = ArtifactPath::from_location(&pointer.location).ok_or_else(|| {
            "its location does not end in an artefact's name ({escaped key}/{generation}/{operation id})".to_string()
        })?;
        if identity.key != key {
            return Err(format!(
                "its location names an artefact of the key `{}`, not of this one",
                identity.key
            ));
        }
        if let Some(published) = generation.filter(|g| *g != identity.generation) {
            return Err(format!(
                "its location names an artefact of generation {}, but generation {published} published it",
                identity.generation
            ));
        }
        let parts: Vec<_> = location.parts().collect();
        let as_spelt: Path = self
            .prefix
            .parts()
            .chain(parts[parts.len() - 3..].iter().cloned())
            .collect();
        // The pointer's own spelling first: it is where the publisher wrote,
        // whichever spelling of the key that fencepost used.
        let mut places = vec![as_spelt];
        for place in [identity.to_path(&self.prefix), location] {
            if !places.contains(&place) {
                places.push(place);
            }
        }
        Ok(places)
    }
}

fn read_failed(path: &Path, source: object_store::Error) -> ArtifactError {
    ArtifactError::Store {
        action: "read",
        path: path.to_string(),
        source,
    }
}

/// The body of `got` (the object at `path`), once it is the pointer's: its
/// size is checked against the store's metadata before the body is
/// downloaded, so a wrong object is never pulled into memory in full.
async fn checked(key: &str, path: &Path, pointer: &Pointer, got: GetResult) -> Result<Bytes, ArtifactError> {
    let corrupt = |what: String| ArtifactError::Corrupt {
        key: key.to_string(),
        location: path.to_string(),
        what,
    };
    if got.meta.size != pointer.size {
        return Err(corrupt(format!(
            "{} bytes, the pointer says {}",
            got.meta.size, pointer.size
        )));
    }
    let bytes = got.bytes().await.map_err(|source| read_failed(path, source))?;
    // The body may still differ from what the metadata said.
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
