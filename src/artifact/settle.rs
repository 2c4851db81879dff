//! Settling an artefact publish whose reply was lost: replaying it, the same
//! request with the same operation id, which the fence answers once and for
//! all.

use uuid::Uuid;

use super::error::ArtifactError;
use super::layout::ArtifactPath;
use super::outcome::{Orphan, PublishedArtifact};
use super::pointer::Pointer;
use super::store::ArtifactStore;
use crate::client::{Client, Error as ClientError, Lease, Publication, Publish, RefusalReason, Unsettled};

/// An artefact publish that may have committed: its pointer was sent (or may
/// have been) and no reply said how it ended. It holds everything the
/// replay needs, the lease, the operation id, the pointer as sent and the
/// source version it carried, and whether the publish gave the lease back;
/// pass it to [`ArtifactStore::settle`]. Its upload is kept meanwhile.
#[derive(Debug)]
pub struct UnsettledArtifact {
    /// The publish as sent: lease, operation id, payload, source version.
    pub(crate) publish: Unsettled,
    /// The pointer the payload spells.
    pub(crate) pointer: Pointer,
    /// Whether an accepted publish gives the lease back.
    pub(crate) releases: bool,
}

impl UnsettledArtifact {
    /// The lease the publish was made under.
    pub fn lease(&self) -> &Lease {
        self.publish.lease()
    }

    /// The operation id of the publish: the last segment of the upload's name.
    pub fn operation_id(&self) -> Uuid {
        self.publish.operation_id()
    }

    /// The pointer that was sent.
    pub fn pointer(&self) -> &Pointer {
        &self.pointer
    }

    /// The source version the publish carried (contract v1.4), if any: the
    /// replay carries the same, so a stale source is refused as it would
    /// have been.
    pub fn source_version(&self) -> Option<i64> {
        self.publish.source_version()
    }

    /// Whether the publish gives the lease back when accepted
    /// ([`ArtifactStore::publish_and_release`], [`ArtifactStore::run_fenced`])
    /// or leaves it held ([`ArtifactStore::publish`]); its replay does the same.
    pub fn releases(&self) -> bool {
        self.releases
    }

    /// The last failure met while trying to learn the outcome.
    pub fn reason(&self) -> &ClientError {
        self.publish.reason()
    }
}

/// How an [`UnsettledArtifact`] was settled, for good: a later call
/// answers the same. New outcomes may be added: match with a catch-all arm.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a refused publish is a value, not an error: look at it"]
#[non_exhaustive]
pub enum SettledArtifact {
    /// The artefact was published: by the send whose reply was lost (the
    /// fence answered `AlreadyPublished`, or, past the replay window, refused
    /// the replay while the publication points to this upload), or by this
    /// replay, the lease still being held. It is (or was, until a later holder published) the
    /// resource's publication.
    Published(PublishedArtifact),
    /// No send committed, and none ever will under this operation id: the
    /// lease has ended or was taken over (an ended lease is never revived),
    /// or the fence refused the pointer for what it is (`StaleSource`,
    /// `GenerationAlreadyPublished`). The upload is an orphan.
    Refused {
        /// Why the fence refused it.
        reason: RefusalReason,
        /// What became of the upload.
        orphan: Orphan,
    },
}

impl ArtifactStore {
    /// Settles a publish that answered
    /// [`ArtifactPublish::Unknown`](super::ArtifactPublish::Unknown) or
    /// [`FencedArtifact::Unknown`](super::FencedArtifact::Unknown) by
    /// replaying it once: same lease, operation id, payload and source
    /// version, and the lease given back with an accepted publish only if
    /// the publish would have given it back. Call it on the store the
    /// publish was made through: a refused publish's upload is deleted from
    /// it (a failed delete leaves it to the sweep, `Orphan::Left`).
    ///
    /// A refused replay's upload is deleted only if the key's publication does
    /// not point to it: past the replay window (the publish's record pruned,
    /// contract v1.6) a publish that did commit is refused when replayed, and
    /// the publication shows it committed, so it settles as published.
    ///
    /// `Err` settles nothing (the server could not be reached, or the reply
    /// was lost again, or the publication could not be read after a refusal)
    /// and deletes nothing: call it again later. A replay never publishes
    /// twice.
    ///
    /// ```no_run
    /// use fencepost::artifact::{ArtifactPublish, ArtifactStore, Produced, SettledArtifact};
    /// use fencepost::client::LeaseGuard;
    /// use fencepost::Client;
    ///
    /// # async fn publish(client: &Client, store: &ArtifactStore, guard: &LeaseGuard, report: Vec<u8>)
    /// #     -> Result<(), Box<dyn std::error::Error>> {
    /// if let ArtifactPublish::Unknown(unsettled) = store.publish(guard, Produced::from_source(report, 1200)).await? {
    ///     match store.settle(client, &unsettled).await? {
    ///         SettledArtifact::Published(published) => println!("published {}", published.pointer.location),
    ///         other => println!("not published: {other:?}"),
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn settle(
        &self,
        client: &Client,
        unsettled: &UnsettledArtifact,
    ) -> Result<SettledArtifact, ArtifactError> {
        let answer = client.replay(&unsettled.publish, unsettled.releases).await?;
        let lease = unsettled.lease();
        let operation_id = unsettled.operation_id();
        Ok(match answer {
            Publish::Published | Publish::AlreadyPublished => SettledArtifact::Published(PublishedArtifact {
                pointer: unsettled.pointer.clone(),
                generation: lease.generation(),
                operation_id,
            }),
            Publish::Refused(reason) => {
                let upload = ArtifactPath {
                    key: lease.key().to_string(),
                    generation: lease.generation(),
                    operation_id,
                };
                // Past the replay window (PruneOutcomes deleted the record)
                // a publish that did commit is judged afresh and refused,
                // while the fence row still points to its upload: the
                // publication decides. An error reading it returns before
                // anything is deleted, so doubt keeps the upload.
                if is_the_publication(client.read_publication(lease.key()).await?, &upload) {
                    return Ok(SettledArtifact::Published(PublishedArtifact {
                        pointer: unsettled.pointer.clone(),
                        generation: lease.generation(),
                        operation_id,
                    }));
                }
                // Named by its identity under this store's prefix, as the
                // upload was: the pointer's location is spelt from the root
                // of the store it was published through.
                SettledArtifact::Refused {
                    reason,
                    orphan: self.delete_orphan(&upload.to_path(&self.prefix)).await,
                }
            }
        })
    }
}

/// Whether `publication` points to `upload`: a pointer naming the same key,
/// generation and operation id, whatever store root it was spelt under.
fn is_the_publication(publication: Publication, upload: &ArtifactPath) -> bool {
    let Publication::Found {
        generation, payload, ..
    } = publication
    else {
        return false;
    };
    generation == upload.generation
        && Pointer::from_payload(&payload)
            .ok()
            .and_then(|pointer| ArtifactPath::from_location(&pointer.location))
            .is_some_and(|published| published == *upload)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use object_store::memory::InMemory;
    use object_store::path::Path;
    use object_store::{ObjectStoreExt, PutPayload};

    use super::*;

    #[tokio::test]
    async fn a_replay_that_gets_no_answer_settles_nothing_and_keeps_the_upload() {
        let store = ArtifactStore {
            store: Arc::new(InMemory::new()),
            prefix: Path::from("p"),
        };
        let lease = Lease::for_test(Duration::from_secs(30));
        let operation_id = Uuid::new_v4();
        let path = ArtifactPath {
            key: lease.key().to_string(),
            generation: lease.generation(),
            operation_id,
        }
        .to_path(&store.prefix);
        store.store.put(&path, PutPayload::from_static(b"maybe")).await.unwrap();
        let unsettled = UnsettledArtifact {
            publish: Unsettled {
                lease,
                operation_id,
                payload: "{}".to_string(),
                source_version: Some(3),
                reason: ClientError::OutcomeUnknown {
                    operation_id,
                    reason: "the connection was reset".into(),
                },
            },
            pointer: Pointer::from_payload(
                r#"{"format":"fencepost.artifact/1","location":"p/k/1/x","size":5,"sha256":"00"}"#,
            )
            .unwrap(),
            releases: true,
        };
        let client = Client::unreachable(Duration::from_millis(100));
        let answer = store.settle(&client, &unsettled).await;
        assert!(matches!(answer, Err(ArtifactError::Fence(_))), "{answer:?}");
        assert!(store.store.head(&path).await.is_ok(), "an unsettled upload was deleted");
    }
}
