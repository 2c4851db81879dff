//! Holding a lease around a work that makes an artefact: acquire, keep it
//! renewed, stop the work when the lease is lost, upload and publish the
//! pointer under the same lease, release.

use std::future::Future;
use std::time::Duration;

use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use super::error::ArtifactError;
use super::fence::Releasing;
use super::limits::check_name;
use super::outcome::{Orphan, PublishedArtifact};
use super::publish::{ArtifactPublish, Produced};
use super::settle::UnsettledArtifact;
use super::store::ArtifactStore;
use crate::client::{Acquire, Client, LostReason, RefusalReason};

/// How an [`ArtifactStore::run_fenced`] ended. A store or fence failure that
/// published nothing is an `Err` instead; one that may have published is
/// `Unknown`, never an `Err`. New outcomes may be added: match with a
/// catch-all arm.
#[derive(Debug)]
#[must_use = "a refused, lost or unknown artefact is a value, not an error: look at it"]
#[non_exhaustive]
pub enum FencedArtifact<E> {
    /// The artefact is the resource's publication.
    Published(PublishedArtifact),
    /// The fence refused the pointer; the upload is an orphan.
    Refused {
        /// Why.
        reason: RefusalReason,
        /// What became of the upload.
        orphan: Orphan,
    },
    /// The lease was lost; nothing was published. `orphan` is `None` when
    /// nothing was uploaded.
    Lost {
        /// Why.
        reason: LostReason,
        /// What became of the upload, if one was made.
        orphan: Option<Orphan>,
    },
    /// The upload took longer than the lease's length; nothing was published.
    UploadTooSlow {
        /// How long it took.
        took: Duration,
        /// What became of the upload.
        orphan: Orphan,
    },
    /// The pointer was sent and each replay until the lease's end failed
    /// too, so no reply said whether it committed (the server or the network
    /// went away). Not an error, because the artefact may well be published;
    /// the lease was given back (or is being), and the upload is kept. It
    /// carries what settles it: pass it to [`ArtifactStore::settle`], whose
    /// answer is final.
    Unknown(Box<UnsettledArtifact>),
    /// The work failed; nothing was uploaded or published.
    Failed(E),
    /// Someone else holds the lease; the work never started.
    Busy {
        /// The holder's expiry, on the server clock.
        until: OffsetDateTime,
    },
    /// The key has no fence row; the work never started.
    NotProvisioned,
}

impl<E> From<ArtifactPublish> for FencedArtifact<E> {
    fn from(publish: ArtifactPublish) -> Self {
        match publish {
            ArtifactPublish::Published(published) => FencedArtifact::Published(published),
            ArtifactPublish::Refused { reason, orphan } => FencedArtifact::Refused { reason, orphan },
            ArtifactPublish::Lost { reason, orphan } => FencedArtifact::Lost { reason, orphan },
            ArtifactPublish::UploadTooSlow { took, orphan } => FencedArtifact::UploadTooSlow { took, orphan },
            ArtifactPublish::Unknown(unsettled) => FencedArtifact::Unknown(unsettled),
        }
    }
}

impl ArtifactStore {
    /// Runs `work` under a lease on `key` of `length`, uploads what it made
    /// create-only under `{prefix}/{key}/{generation}/{operation id}`, and
    /// publishes the pointer with that same lease, giving the lease back in
    /// the same call.
    ///
    /// A key whose artefacts' names no store takes is refused first
    /// ([`ArtifactError::KeyTooLong`]): no lease is taken and the work never
    /// runs. The lease is taken once (`Busy` is returned as is) and renewed
    /// by a [`LeaseGuard`](crate::client::LeaseGuard) while the work and the
    /// upload run. When the lease is lost the token passed to `work` is
    /// cancelled and the work is dropped; nothing is published. Once the
    /// upload is in, the renewals stop, and the pointer is sent only if the
    /// upload is still within one lease length of its start.
    ///
    /// As [`Client::run_fenced`] does, a publish whose reply is lost, or
    /// that met a transient error (a deadlock, an exhausted pool), is
    /// replayed with the same operation id until the lease would end
    /// locally: a lost reply is settled within the lease itself, and an
    /// artefact is published at most once. Only when the replays get no
    /// answer either is the outcome [`FencedArtifact::Unknown`], with what
    /// settles it ([`ArtifactStore::settle`]). A lease the publish did not
    /// end is released before this returns, bounded by the release timeout.
    pub async fn run_fenced<F, Fut, E>(
        &self,
        client: &Client,
        key: &str,
        length: Duration,
        work: F,
    ) -> Result<FencedArtifact<E>, ArtifactError>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<Produced, E>>,
    {
        // Before the lease is taken: the work would be made for nothing.
        check_name(&self.prefix, key)?;
        let lease = match client.acquire(key, length).await? {
            Acquire::Acquired(lease) => lease,
            Acquire::Busy { until, .. } => return Ok(FencedArtifact::Busy { until }),
            Acquire::NotProvisioned => return Ok(FencedArtifact::NotProvisioned),
        };
        let guard = client.guard(lease);
        let token = guard.token();
        let _cancel_on_exit = token.clone().drop_guard();
        let work = work(token);
        let made = tokio::select! {
            // A loss seen together with a finished work wins: its result may
            // have been made without the lease.
            biased;
            reason = guard.lost() => return Ok(FencedArtifact::Lost { reason, orphan: None }),
            made = work => made,
        };
        let produced = match made {
            Ok(produced) => produced,
            Err(error) => {
                // A failed release is the background's to retry; the work's
                // failure is the answer.
                let _ = guard.release().await;
                return Ok(FencedArtifact::Failed(error));
            }
        };
        let mut fence = Releasing::resolving(guard, client);
        let published = self.publish_inner(&mut fence, produced).await;
        fence.finish().await;
        Ok(published?.into())
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use object_store::memory::InMemory;
    use object_store::path::Path;

    use super::*;

    #[tokio::test]
    async fn a_key_whose_name_no_store_takes_never_runs_its_work_or_takes_a_lease() {
        let store = ArtifactStore {
            store: Arc::new(InMemory::new()),
            prefix: Path::from("p"),
        };
        // A server that is never reached: asking it for the lease would end
        // as a fence error after the checkout timeout, not as this refusal.
        let client = Client::unreachable(Duration::from_secs(5));
        let ran = Arc::new(AtomicBool::new(false));
        let work_ran = ran.clone();
        // 86 colons: a key of 86 characters, escaped to 258 bytes.
        let key = ":".repeat(86);
        let run = store
            .run_fenced(&client, &key, Duration::from_secs(30), |_| async move {
                work_ran.store(true, Ordering::SeqCst);
                Ok::<_, Infallible>(Produced::new(b"x".to_vec()))
            })
            .await;
        assert!(
            matches!(
                &run,
                Err(ArtifactError::KeyTooLong { key: named, length: 258, limit: 255, .. }) if *named == key
            ),
            "{run:?}"
        );
        assert!(!ran.load(Ordering::SeqCst), "the work ran for a name no store takes");
    }
}
