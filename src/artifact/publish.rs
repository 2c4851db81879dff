//! Publishing an artefact under a held lease: a create-only upload under a
//! name of its own, then its pointer through the ordinary fenced publish.

use std::time::Duration;

use bytes::Bytes;
use object_store::ObjectStoreExt;
use sha2::{Digest, Sha256};
use tokio::time::Instant;
use uuid::Uuid;

use super::error::ArtifactError;
use super::fence::{Fence, Held, Releasing};
use super::layout::ArtifactPath;
use super::limits::check_name;
use super::outcome::{Orphan, PublishedArtifact};
use super::pointer::{POINTER_FORMAT, Pointer};
use super::settle::UnsettledArtifact;
use super::store::ArtifactStore;
use crate::client::{LeaseGuard, LostReason, Publish, RefusalReason, Unresolved, Unsettled};

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

/// How a publish through a [`LeaseGuard`] ended. A store or fence failure
/// that published nothing is an `Err` instead; one that may have published
/// is `Unknown`, never an `Err`. New outcomes may be added: match with a
/// catch-all arm.
#[derive(Debug)]
#[must_use = "a refused, lost or unknown publish is a value, not an error: look at it"]
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
    /// upload is kept. It carries what settles it: pass it to
    /// [`ArtifactStore::settle`], which replays the same publish (lease,
    /// operation id, pointer, source version) and answers for good.
    Unknown(Box<UnsettledArtifact>),
    /// The upload, counted until the pointer was about to be sent, took
    /// longer than the lease's length, so its pointer was not sent: an
    /// upload is published within one lease length of its start or not at
    /// all.
    UploadTooSlow {
        /// How long the upload took.
        took: Duration,
        /// What became of the upload.
        orphan: Orphan,
    },
}

impl ArtifactStore {
    /// Uploads `produced` create-only under this lease's name for it and
    /// publishes its pointer under the same lease, which stays held: one
    /// send, as [`LeaseGuard::publish`] does.
    ///
    /// A key whose artefacts' names no store takes is refused before the
    /// upload ([`ArtifactError::KeyTooLong`]). Nothing is published when the
    /// upload fails (an `Err`). A refused publish leaves an orphan, deleted
    /// at once on a best-effort basis. A publish whose reply was lost may
    /// have committed: it answers [`ArtifactPublish::Unknown`], which
    /// [`settle`](ArtifactStore::settle) settles for good, and its upload is
    /// left alone. While the guard holds the lease, a settle may commit at
    /// any time, so the sweep keeps the upload on the database's word (the
    /// lease is held), however old it is.
    pub async fn publish(&self, guard: &LeaseGuard, produced: Produced) -> Result<ArtifactPublish, ArtifactError> {
        self.publish_inner(&mut Held(guard), produced).await
    }

    /// [`publish`](ArtifactStore::publish), giving the lease back with an
    /// accepted publish in the same call
    /// ([`LeaseGuard::publish_and_release`]); one send. The guard's renewals
    /// stop once the upload is in, and the pointer is sent only if the
    /// upload is still within one lease length of its start by then. A
    /// lease the publish did not end is released in the background, as a
    /// dropped guard's is.
    pub async fn publish_and_release(
        &self,
        guard: LeaseGuard,
        produced: Produced,
    ) -> Result<ArtifactPublish, ArtifactError> {
        self.publish_inner(&mut Releasing::once(guard), produced).await
    }

    /// The steps every publish shares; `fence` says whether the lease was
    /// lost and sends the pointer.
    pub(crate) async fn publish_inner(
        &self,
        fence: &mut impl Fence,
        produced: Produced,
    ) -> Result<ArtifactPublish, ArtifactError> {
        let lease = fence.lease();
        check_name(&self.prefix, lease.key())?;
        if let Some(reason) = fence.lost() {
            return Ok(ArtifactPublish::Lost { reason, orphan: None });
        }
        let operation_id = Uuid::new_v4();
        let path = ArtifactPath {
            key: lease.key().to_string(),
            generation: lease.generation(),
            operation_id,
        }
        .to_path(&self.prefix);
        let started = Instant::now();
        let size = produced.bytes.len() as u64;
        let sha256 = hex::encode(Sha256::digest(&produced.bytes));
        let put = self.upload(&path, produced.bytes).await?;
        if let Some(reason) = fence.ready().await {
            let orphan = Some(self.delete_orphan(&path).await);
            return Ok(ArtifactPublish::Lost { reason, orphan });
        }
        // Measured once the lease is ready for the pointer (a publish that
        // gives the lease back has stopped its renewals, which may wait for
        // one in flight): the pointer goes out within one lease length of
        // the upload's start, or not at all.
        let took = started.elapsed();
        if took > lease.length() {
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
        let payload = pointer.to_payload();
        match fence.send(operation_id, &payload, produced.source_version).await {
            Ok(Publish::Published | Publish::AlreadyPublished) => Ok(ArtifactPublish::Published(PublishedArtifact {
                pointer,
                generation: lease.generation(),
                operation_id,
            })),
            Ok(Publish::Refused(reason)) => {
                let orphan = self.delete_orphan(&path).await;
                Ok(ArtifactPublish::Refused { reason, orphan })
            }
            // A lost reply may hide a publish that committed: the upload
            // stays, with what settles it.
            Err(Unresolved::Unknown(reason)) => Ok(ArtifactPublish::Unknown(Box::new(UnsettledArtifact {
                publish: Unsettled {
                    lease: fence.lease(),
                    operation_id,
                    payload,
                    source_version: produced.source_version,
                    reason,
                },
                pointer,
                releases: fence.releases(),
            }))),
            Err(Unresolved::Failed(error)) => Err(error.into()),
        }
    }

    /// Deletes an upload the fence will never point to; a failure leaves it
    /// to the sweep.
    pub(crate) async fn delete_orphan(&self, path: &object_store::path::Path) -> Orphan {
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
    use time::OffsetDateTime;

    use super::*;
    use crate::client::{Error as ClientError, Lease};

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

    /// A lease on `key` at `generation`, for a fresh owner.
    fn lease(key: &str, generation: i64) -> Lease {
        Lease::new(
            key,
            Uuid::new_v4(),
            generation,
            LEASE,
            OffsetDateTime::UNIX_EPOCH,
            Instant::now(),
        )
    }

    /// A fence that answers as told and records what was sent.
    struct Scripted {
        lease: Lease,
        /// Seen lost before the upload.
        lost: Option<LostReason>,
        /// Seen lost once the upload is in.
        lost_when_ready: Option<LostReason>,
        /// How long getting ready takes (stopping the renewals).
        ready_takes: Duration,
        answer: Option<Result<Publish, Unresolved>>,
        sent: Option<(Uuid, String, Option<i64>)>,
    }

    impl Scripted {
        fn answering(lease: Lease, answer: Result<Publish, Unresolved>) -> Self {
            Scripted {
                lease,
                lost: None,
                lost_when_ready: None,
                ready_takes: Duration::ZERO,
                answer: Some(answer),
                sent: None,
            }
        }

        /// A fence that must never be sent to.
        fn silent(lease: Lease) -> Self {
            Scripted {
                answer: None,
                ..Scripted::answering(lease, Ok(Publish::Published))
            }
        }
    }

    impl Fence for Scripted {
        fn lease(&self) -> Lease {
            self.lease.clone()
        }

        fn lost(&self) -> Option<LostReason> {
            self.lost.clone()
        }

        async fn ready(&mut self) -> Option<LostReason> {
            tokio::time::sleep(self.ready_takes).await;
            self.lost_when_ready.clone()
        }

        fn releases(&self) -> bool {
            true
        }

        async fn send(
            &mut self,
            operation_id: Uuid,
            payload: &str,
            source_version: Option<i64>,
        ) -> Result<Publish, Unresolved> {
            assert!(self.sent.is_none(), "sent twice");
            self.sent = Some((operation_id, payload.to_string(), source_version));
            self.answer.take().expect("this publish was not to be sent")
        }
    }

    #[tokio::test]
    async fn an_accepted_pointer_names_the_uploaded_bytes_under_the_lease_s_own_name() {
        let store = store().await;
        let mut fence = Scripted::answering(lease("report:daily", 7), Ok(Publish::Published));
        let answer = store
            .publish_inner(&mut fence, Produced::from_source(b"big".to_vec(), 3))
            .await
            .unwrap();
        let ArtifactPublish::Published(published) = answer else {
            panic!("{answer:?}")
        };
        let (operation_id, payload, source_version) = fence.sent.unwrap();
        assert_eq!(published.operation_id, operation_id);
        assert_eq!(published.generation, 7);
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
        let mut fence = Scripted::answering(lease("k", 1), Ok(Publish::Refused(RefusalReason::Superseded)));
        let answer = store
            .publish_inner(&mut fence, Produced::new(b"stale".to_vec()))
            .await
            .unwrap();
        assert!(
            matches!(
                answer,
                ArtifactPublish::Refused {
                    reason: RefusalReason::Superseded,
                    orphan: Orphan::Deleted
                }
            ),
            "{answer:?}"
        );
        assert!(objects(&store).await.is_empty());
    }

    #[tokio::test]
    async fn a_publish_of_unknown_outcome_keeps_its_upload_and_carries_what_settles_it() {
        let store = store().await;
        let lease = lease("k", 4);
        let unknown = |operation_id| {
            Err(Unresolved::Unknown(ClientError::OutcomeUnknown {
                operation_id,
                reason: "the connection was reset".into(),
            }))
        };
        let mut fence = Scripted::answering(lease.clone(), unknown(Uuid::nil()));
        let answer = store
            .publish_inner(&mut fence, Produced::from_source(b"maybe".to_vec(), 12))
            .await
            .unwrap();
        let ArtifactPublish::Unknown(unsettled) = answer else {
            panic!("{answer:?}")
        };
        let (operation_id, payload, source_version) = fence.sent.unwrap();
        // The replay must be the same request: lease, operation id, payload
        // and source version.
        assert_eq!(unsettled.lease().owner(), lease.owner());
        assert_eq!(unsettled.lease().generation(), 4);
        assert_eq!(unsettled.operation_id(), operation_id);
        assert_eq!(unsettled.publish.payload(), payload);
        assert_eq!(unsettled.pointer().to_payload(), payload);
        assert_eq!(source_version, Some(12));
        assert_eq!(unsettled.source_version(), Some(12));
        assert!(unsettled.releases());
        assert!(matches!(unsettled.reason(), ClientError::OutcomeUnknown { .. }));
        assert_eq!(objects(&store).await, vec![unsettled.pointer().location.clone()]);
    }

    #[tokio::test]
    async fn a_publish_that_did_not_commit_is_an_error_and_not_unknown() {
        let store = store().await;
        let failed = Err(Unresolved::Failed(ClientError::Unavailable {
            reason: "no connection".into(),
        }));
        let mut fence = Scripted::answering(lease("k", 1), failed);
        let answer = store.publish_inner(&mut fence, Produced::new(b"x".to_vec())).await;
        assert!(
            matches!(answer, Err(ArtifactError::Fence(ClientError::Unavailable { .. }))),
            "{answer:?}"
        );
    }

    #[tokio::test]
    async fn a_lease_lost_before_the_upload_uploads_and_publishes_nothing() {
        let store = store().await;
        let mut fence = Scripted {
            lost: Some(LostReason::Renewal),
            ..Scripted::silent(lease("k", 1))
        };
        let answer = store
            .publish_inner(&mut fence, Produced::new(b"late".to_vec()))
            .await
            .unwrap();
        assert!(
            matches!(
                answer,
                ArtifactPublish::Lost {
                    reason: LostReason::Renewal,
                    orphan: None
                }
            ),
            "{answer:?}"
        );
        assert!(objects(&store).await.is_empty());
    }

    #[tokio::test]
    async fn a_lease_lost_while_the_renewals_stop_sends_nothing_and_deletes_the_upload() {
        let store = store().await;
        let mut fence = Scripted {
            lost_when_ready: Some(LostReason::Renewal),
            ..Scripted::silent(lease("k", 1))
        };
        let answer = store
            .publish_inner(&mut fence, Produced::new(b"late".to_vec()))
            .await
            .unwrap();
        assert!(
            matches!(
                answer,
                ArtifactPublish::Lost {
                    reason: LostReason::Renewal,
                    orphan: Some(Orphan::Deleted)
                }
            ),
            "{answer:?}"
        );
        assert!(objects(&store).await.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_upload_that_outlasts_the_lease_by_the_time_the_renewals_stopped_is_not_sent() {
        // The upload itself is quick; stopping the renewals (waiting for one
        // in flight) takes the rest of the lease and more. The bound counts
        // until the pointer would go out, not until the upload returned.
        let store = store().await;
        let mut fence = Scripted {
            ready_takes: LEASE + Duration::from_secs(1),
            ..Scripted::silent(lease("k", 1))
        };
        let answer = store
            .publish_inner(&mut fence, Produced::new(b"slow".to_vec()))
            .await
            .unwrap();
        let ArtifactPublish::UploadTooSlow { took, orphan } = answer else {
            panic!("{answer:?}")
        };
        assert!(took > LEASE, "{took:?}");
        assert_eq!(orphan, Orphan::Deleted);
        assert!(fence.sent.is_none());
        assert!(objects(&store).await.is_empty());
    }

    #[tokio::test]
    async fn a_key_whose_name_no_store_takes_is_refused_before_the_upload() {
        let store = store().await;
        // 256 letters: a key the fence takes, one segment too long for a
        // local file system.
        let key = "k".repeat(256);
        let mut fence = Scripted::silent(lease(&key, 1));
        let answer = store.publish_inner(&mut fence, Produced::new(b"x".to_vec())).await;
        assert!(
            matches!(
                &answer,
                Err(ArtifactError::KeyTooLong { key: named, length: 256, limit: 255, .. }) if *named == key
            ),
            "{answer:?}"
        );
        assert!(objects(&store).await.is_empty());
    }

    #[tokio::test]
    async fn a_key_escaped_to_255_bytes_is_published_to_a_local_folder() {
        // The longest segment a local file system takes, and the longest
        // escaped key the check lets through.
        let dir = tempfile::tempdir().unwrap();
        let local = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let store = ArtifactStore {
            store: Arc::new(local),
            prefix: Path::from("p"),
        };
        let key = ":".repeat(85);
        let mut fence = Scripted::answering(lease(&key, i64::MAX), Ok(Publish::Published));
        let answer = store
            .publish_inner(&mut fence, Produced::new(b"x".to_vec()))
            .await
            .unwrap();
        let ArtifactPublish::Published(published) = answer else {
            panic!("{answer:?}")
        };
        assert_eq!(
            store.follow(&key, &published.pointer).await.unwrap(),
            Bytes::from_static(b"x")
        );
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
        let mut fence = Scripted::silent(lease("k", 1));
        let answer = store.publish_inner(&mut fence, Produced::new(b"x".to_vec())).await;
        assert!(
            matches!(answer, Err(ArtifactError::Store { action: "upload", .. })),
            "{answer:?}"
        );
    }
}
