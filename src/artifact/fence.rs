//! How an artefact's pointer reaches the fence: through a guard the caller
//! keeps holding, or giving the lease back with an accepted publish, once or
//! replayed until the lease's end.

use uuid::Uuid;

use crate::client::{Client, Error as ClientError, Lease, LeaseGuard, LostReason, Publish, Unresolved};

/// The lease side of one artefact publish, as
/// [`publish_inner`](super::store::ArtifactStore::publish_inner) drives it:
/// `lost` before the upload, `ready` after it, then `send` once.
pub(crate) trait Fence {
    /// The lease the artefact is published under, as last confirmed.
    fn lease(&self) -> Lease;

    /// Why the lease was seen lost, if it was.
    fn lost(&self) -> Option<LostReason>;

    /// Gets the lease ready for the pointer, once the upload is in, and says
    /// whether it was lost by then. A publish that gives the lease back
    /// stops its renewals here, so the time it took counts against the
    /// upload's bound before anything is sent.
    async fn ready(&mut self) -> Option<LostReason>;

    /// Whether an accepted publish gives the lease back.
    fn releases(&self) -> bool;

    /// Sends the pointer. `Unresolved::Unknown` when it may have committed.
    async fn send(
        &mut self,
        operation_id: Uuid,
        payload: &str,
        source_version: Option<i64>,
    ) -> Result<Publish, Unresolved>;
}

/// A single send's error, sorted: only an unanswered publish may have
/// committed.
fn sorted(answer: Result<Publish, ClientError>) -> Result<Publish, Unresolved> {
    answer.map_err(|error| match error {
        ClientError::OutcomeUnknown { .. } => Unresolved::Unknown(error),
        error => Unresolved::Failed(error),
    })
}

/// A guard the caller keeps: it renews throughout, and the lease stays held
/// after the publish.
pub(crate) struct Held<'g>(pub(crate) &'g LeaseGuard);

impl Fence for Held<'_> {
    fn lease(&self) -> Lease {
        self.0.lease()
    }

    fn lost(&self) -> Option<LostReason> {
        self.0.lost_reason()
    }

    async fn ready(&mut self) -> Option<LostReason> {
        self.0.lost_reason()
    }

    fn releases(&self) -> bool {
        false
    }

    async fn send(
        &mut self,
        operation_id: Uuid,
        payload: &str,
        source_version: Option<i64>,
    ) -> Result<Publish, Unresolved> {
        sorted(match source_version {
            Some(version) => self.0.publish_versioned(operation_id, payload, version).await,
            None => self.0.publish(operation_id, payload).await,
        })
    }
}

/// A guard given up with the publish: its renewals stop once the upload is
/// in, and an accepted publish gives the lease back in the same call.
pub(crate) struct Releasing<'c> {
    /// `None` once the pointer was sent.
    guard: Option<LeaseGuard>,
    /// The lease, kept for after the guard was handed over.
    lease: Lease,
    /// Replays a publish whose reply was lost, or that met a transient
    /// error, until the lease's end, as [`Client::run_fenced`] does; `None`
    /// sends once.
    resolve: Option<&'c Client>,
}

impl<'c> Releasing<'c> {
    /// Sends once, as [`LeaseGuard::publish_and_release`] does.
    pub(crate) fn once(guard: LeaseGuard) -> Self {
        Releasing {
            lease: guard.lease(),
            guard: Some(guard),
            resolve: None,
        }
    }

    /// Replays through `client` until the lease's end.
    pub(crate) fn resolving(guard: LeaseGuard, client: &'c Client) -> Self {
        Releasing {
            lease: guard.lease(),
            guard: Some(guard),
            resolve: Some(client),
        }
    }

    /// Gives back a lease the publish did not end (none was sent, or it was
    /// refused or its outcome is unknown), bounded by the client's release
    /// timeout; a failure is logged and the lease expires.
    pub(crate) async fn finish(mut self) {
        if let Some(guard) = self.guard.take() {
            guard.release_quietly().await;
        }
    }
}

impl Fence for Releasing<'_> {
    fn lease(&self) -> Lease {
        self.guard
            .as_ref()
            .map_or_else(|| self.lease.clone(), LeaseGuard::lease)
    }

    fn lost(&self) -> Option<LostReason> {
        self.guard.as_ref().and_then(LeaseGuard::lost_reason)
    }

    async fn ready(&mut self) -> Option<LostReason> {
        let guard = self.guard.as_mut()?;
        // Also waits for a renewal in flight, which may move the expiry on:
        // the lease as it stands after this is the one the pointer goes with.
        guard.stop_renewing().await;
        self.lease = guard.lease();
        guard.lost_reason()
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
        let Some(client) = self.resolve else {
            let guard = self.guard.take().expect("the pointer is sent once");
            // The guard releases a lease the publish did not end when it is
            // dropped, in the background.
            return sorted(match source_version {
                Some(version) => {
                    guard
                        .publish_versioned_and_release(operation_id, payload, version)
                        .await
                }
                None => guard.publish_and_release(operation_id, payload).await,
            });
        };
        let answer = client
            .publish_resolved(&self.lease, operation_id, payload, source_version)
            .await;
        if matches!(answer, Ok(Publish::Published | Publish::AlreadyPublished))
            && let Some(guard) = self.guard.take()
        {
            // Given back by the publish itself.
            guard.forget();
        }
        answer
    }
}
