//! Publishing an artefact under a held lease: a create-only upload under a
//! name of its own, then its pointer through the ordinary fenced publish.

use std::time::Duration;

use bytes::Bytes;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};
use sha2::{Digest, Sha256};
use tokio::time::Instant;
use uuid::Uuid;

use super::error::ArtifactError;
use super::layout::ArtifactPath;
use super::pointer::{POINTER_FORMAT, Pointer};
use super::store::ArtifactStore;
use crate::client::{Error as ClientError, LeaseGuard, LostReason, Publish, RefusalReason};

/// What a work made: the artefact's bytes and, when the result must not go
/// back to an older source (contract v1.4), the version it was built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Produced {
    /// The artefact's bytes.
    pub bytes: Bytes,
    /// The version of the source it was built from (0 or more).
    pub source_version: Option<i64>,
}

impl Produced {
    /// An artefact without a source version.
    pub fn new(bytes: impl Into<Bytes>) -> Self {
        Produced {
            bytes: bytes.into(),
            source_version: None,
        }
    }

    /// An artefact built from version `source_version` of its source.
    pub fn from_source(bytes: impl Into<Bytes>, source_version: i64) -> Self {
        Produced {
            bytes: bytes.into(),
            source_version: Some(source_version),
        }
    }
}

/// An artefact that is now its resource's publication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishedArtifact {
    /// What was published.
    pub pointer: Pointer,
    /// The generation it was published under.
    pub generation: i64,
    /// The operation id of the publish (also the last segment of its name).
    pub operation_id: Uuid,
}

/// What became of an upload that is not published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Orphan {
    /// It was deleted at once.
    Deleted,
    /// Its delete failed; the sweep removes it once it is older than its grace.
    Left {
        /// Where it is.
        location: String,
        /// Why the delete failed.
        reason: String,
    },
}

/// How a publish through a [`LeaseGuard`] ended. A store or fence failure
/// is an `Err` instead. New outcomes may be added: match with a catch-all arm.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArtifactPublish {
    /// The artefact is the resource's publication.
    Published(PublishedArtifact),
    /// The fence refused the pointer; the upload is an orphan.
    Refused {
        /// Why the fence refused it.
        reason: RefusalReason,
        /// What became of the upload.
        orphan: Orphan,
    },
    /// The lease was lost before the pointer was sent; nothing was published.
    /// `None` when it was lost before the upload, so there is no orphan.
    Lost {
        /// Why the lease was lost.
        reason: LostReason,
        /// What became of the upload, if one was made.
        orphan: Option<Orphan>,
    },
    /// The pointer was sent but no reply said whether it committed. The
    /// upload is kept (the sweep keeps it if it is published). Settle it by
    /// replaying the publish with the same lease, `operation_id` and
    /// `pointer.to_payload()`: `AlreadyPublished` if it committed.
    Unknown {
        /// The operation id of the publish.
        operation_id: Uuid,
        /// The pointer that was sent.
        pointer: Pointer,
        /// Why the reply was lost.
        reason: String,
    },
    /// The upload took longer than the lease's length, so its pointer was
    /// not sent: an upload is published within one lease length of its
    /// start, which is what lets the sweep's grace bound it (docs/artifacts.md).
    UploadTooSlow {
        /// How long the upload took.
        took: Duration,
        /// What became of the upload.
        orphan: Orphan,
    },
}

impl ArtifactStore {
    /// Uploads `produced` create-only under this lease's name for it and
    /// publishes its pointer under the same lease, which stays held.
    ///
    /// Nothing is published when the upload fails (an `Err`). A refused
    /// publish leaves an orphan, deleted at once on a best-effort basis. A
    /// publish whose outcome is not known (an `Err` of the fence call) may
    /// have committed, so its upload is left alone: the sweep takes it only
    /// if no publication points to it.
    pub async fn publish(&self, guard: &LeaseGuard, produced: Produced) -> Result<ArtifactPublish, ArtifactError> {
        self.publish_with(
            guard,
            produced,
            async |operation_id, payload, source_version| match source_version {
                Some(version) => guard.publish_versioned(operation_id, payload, version).await,
                None => guard.publish(operation_id, payload).await,
            },
        )
        .await
    }

    /// [`publish`](ArtifactStore::publish), giving the lease back with an
    /// accepted publish in the same call
    /// ([`LeaseGuard::publish_and_release`]).
    pub async fn publish_and_release(
        &self,
        guard: LeaseGuard,
        produced: Produced,
    ) -> Result<ArtifactPublish, ArtifactError> {
        let lease = guard.lease();
        // Shared by the loss check and the publish, which takes the guard
        // (a std Mutex, never held across an await, keeps the future Send).
        let held = std::sync::Mutex::new(Some(guard));
        let lost = || {
            let held = held.lock().unwrap_or_else(|e| e.into_inner());
            held.as_ref().and_then(LeaseGuard::lost_reason)
        };
        self.publish_inner(
            lease.key(),
            lease.generation(),
            lease.length(),
            lost,
            produced,
            async |operation_id, payload, source_version| {
                let taken = held.lock().unwrap_or_else(|e| e.into_inner()).take();
                let guard = taken.expect("the pointer is published once");
                match source_version {
                    Some(version) => {
                        guard
                            .publish_versioned_and_release(operation_id, payload, version)
                            .await
                    }
                    None => guard.publish_and_release(operation_id, payload).await,
                }
            },
        )
        .await
    }

    async fn publish_with(
        &self,
        guard: &LeaseGuard,
        produced: Produced,
        send: impl AsyncFnOnce(Uuid, &str, Option<i64>) -> Result<Publish, ClientError>,
    ) -> Result<ArtifactPublish, ArtifactError> {
        let lease = guard.lease();
        self.publish_inner(
            lease.key(),
            lease.generation(),
            lease.length(),
            || guard.lost_reason(),
            produced,
            send,
        )
        .await
    }

    /// The steps both publishes share; `lost` says whether the lease was
    /// seen lost, `send` publishes the pointer.
    pub(crate) async fn publish_inner(
        &self,
        key: &str,
        generation: i64,
        length: Duration,
        lost: impl Fn() -> Option<LostReason>,
        produced: Produced,
        send: impl AsyncFnOnce(Uuid, &str, Option<i64>) -> Result<Publish, ClientError>,
    ) -> Result<ArtifactPublish, ArtifactError> {
        if let Some(reason) = lost() {
            return Ok(ArtifactPublish::Lost { reason, orphan: None });
        }
        let operation_id = Uuid::new_v4();
        let path = ArtifactPath {
            key: key.to_string(),
            generation,
            operation_id,
        }
        .to_path(&self.prefix);
        let started = Instant::now();
        let size = produced.bytes.len() as u64;
        let sha256 = hex::encode(Sha256::digest(&produced.bytes));
        let options = PutOptions {
            // Never an overwrite: the name is this publish's alone, and a
            // store that let a second write through was refused by the probe.
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let put = self
            .store
            .put_opts(&path, PutPayload::from_bytes(produced.bytes), options)
            .await
            .map_err(|source| ArtifactError::Store {
                action: "upload",
                path: path.to_string(),
                source,
            })?;
        if let Some(reason) = lost() {
            let orphan = Some(self.delete_orphan(&path).await);
            return Ok(ArtifactPublish::Lost { reason, orphan });
        }
        let took = started.elapsed();
        if took > length {
            let orphan = self.delete_orphan(&path).await;
            return Ok(ArtifactPublish::UploadTooSlow { took, orphan });
        }
        let pointer = Pointer {
            format: POINTER_FORMAT.to_string(),
            location: path.to_string(),
            size,
            sha256,
            e_tag: put.e_tag,
            version: put.version,
            source_version: produced.source_version,
        };
        // A lost reply may hide a publish that committed: the upload stays,
        // and the sweep keeps it if it is published.
        let answer = match send(operation_id, &pointer.to_payload(), produced.source_version).await {
            Ok(answer) => answer,
            Err(ClientError::OutcomeUnknown { reason, .. }) => {
                return Ok(ArtifactPublish::Unknown {
                    operation_id,
                    pointer,
                    reason,
                });
            }
            Err(error) => return Err(error.into()),
        };
        match answer {
            Publish::Published | Publish::AlreadyPublished => Ok(ArtifactPublish::Published(PublishedArtifact {
                pointer,
                generation,
                operation_id,
            })),
            Publish::Refused(reason) => {
                let orphan = self.delete_orphan(&path).await;
                Ok(ArtifactPublish::Refused { reason, orphan })
            }
        }
    }

    /// Deletes an upload the fence will never point to; a failure leaves it
    /// to the sweep.
    async fn delete_orphan(&self, path: &object_store::path::Path) -> Orphan {
        match self.store.delete(path).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Orphan::Deleted,
            Err(error) => {
                tracing::warn!(location = %path, %error, "an unpublished artefact was left for the sweep");
                Orphan::Left {
                    location: path.to_string(),
                    reason: error.to_string(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures_util::TryStreamExt;
    use object_store::ObjectStore;
    use object_store::memory::InMemory;
    use object_store::path::Path;

    use super::*;

    const LEASE: Duration = Duration::from_secs(30);

    async fn store() -> ArtifactStore {
        ArtifactStore::new(Arc::new(InMemory::new()), &Path::from("base"), "fenced")
            .await
            .unwrap()
    }

    /// The objects in the store but the prefix's marker.
    async fn objects(store: &ArtifactStore) -> Vec<String> {
        let listed: Vec<_> = store.store.list(None).try_collect().await.unwrap();
        let marker = crate::artifact::marker::marker_path(&store.prefix);
        listed
            .into_iter()
            .filter(|m| m.location != marker)
            .map(|m| m.location.to_string())
            .collect()
    }

    #[tokio::test]
    async fn an_accepted_pointer_names_the_uploaded_bytes_under_the_lease_s_own_name() {
        let store = store().await;
        let mut sent = None;
        let answer = store
            .publish_inner(
                "report:daily",
                7,
                LEASE,
                || None,
                Produced::from_source(b"big".to_vec(), 3),
                async |operation_id, payload: &str, source_version| {
                    sent = Some((operation_id, payload.to_string(), source_version));
                    Ok(Publish::Published)
                },
            )
            .await
            .unwrap();
        let ArtifactPublish::Published(published) = answer else {
            panic!("{answer:?}")
        };
        let (operation_id, payload, source_version) = sent.unwrap();
        assert_eq!(published.operation_id, operation_id);
        assert_eq!(source_version, Some(3));
        assert_eq!(Pointer::from_payload(&payload).unwrap(), published.pointer);
        assert_eq!(
            published.pointer.location,
            format!("base/fenced/report_3Adaily/7/{operation_id}")
        );
        assert_eq!(published.pointer.size, 3);
        assert_eq!(published.pointer.sha256, hex::encode(Sha256::digest(b"big")));
        assert_eq!(published.pointer.source_version, Some(3));
        assert_eq!(objects(&store).await, vec![published.pointer.location.clone()]);
        assert_eq!(
            store.follow("report:daily", &published.pointer).await.unwrap(),
            Bytes::from_static(b"big")
        );
    }

    #[tokio::test]
    async fn a_refused_pointer_leaves_no_object_behind() {
        let store = store().await;
        let answer = store
            .publish_inner(
                "k",
                1,
                LEASE,
                || None,
                Produced::new(b"stale".to_vec()),
                async |_, _: &str, _| Ok(Publish::Refused(RefusalReason::Superseded)),
            )
            .await
            .unwrap();
        assert_eq!(
            answer,
            ArtifactPublish::Refused {
                reason: RefusalReason::Superseded,
                orphan: Orphan::Deleted
            }
        );
        assert!(objects(&store).await.is_empty());
    }

    #[tokio::test]
    async fn a_publish_of_unknown_outcome_keeps_its_upload_for_the_sweep_to_judge() {
        let store = store().await;
        let answer = store
            .publish_inner(
                "k",
                1,
                LEASE,
                || None,
                Produced::new(b"maybe".to_vec()),
                async |operation_id, _: &str, _| {
                    Err(ClientError::OutcomeUnknown {
                        operation_id,
                        reason: "the connection was reset".into(),
                    })
                },
            )
            .await
            .unwrap();
        let ArtifactPublish::Unknown { pointer, reason, .. } = answer else {
            panic!("{answer:?}")
        };
        assert_eq!(reason, "the connection was reset");
        assert_eq!(objects(&store).await, vec![pointer.location]);
    }

    #[tokio::test]
    async fn a_lease_lost_before_the_upload_uploads_and_publishes_nothing() {
        let store = store().await;
        let answer = store
            .publish_inner(
                "k",
                1,
                LEASE,
                || Some(LostReason::Renewal),
                Produced::new(b"late".to_vec()),
                async |_, _: &str, _| -> Result<Publish, ClientError> { panic!("a lost lease published") },
            )
            .await
            .unwrap();
        assert_eq!(
            answer,
            ArtifactPublish::Lost {
                reason: LostReason::Renewal,
                orphan: None
            }
        );
        assert!(objects(&store).await.is_empty());
    }

    #[tokio::test]
    async fn a_failed_upload_publishes_nothing() {
        // A local folder that is a file: every upload under it fails.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("blocked"), b"").unwrap();
        let local = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let store = ArtifactStore {
            store: Arc::new(local),
            prefix: Path::from("blocked"),
        };
        let answer = store
            .publish_inner(
                "k",
                1,
                LEASE,
                || None,
                Produced::new(b"x".to_vec()),
                async |_, _: &str, _| -> Result<Publish, ClientError> { panic!("a failed upload published") },
            )
            .await;
        assert!(
            matches!(answer, Err(ArtifactError::Store { action: "upload", .. })),
            "{answer:?}"
        );
    }
}
