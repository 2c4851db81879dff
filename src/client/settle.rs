//! Settling a publish whose reply was lost: replaying it with the same
//! operation id, which the fence answers once and for all.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::wait::later;
use super::{Client, Error, Lease, Publish};

/// A publish-and-release that may have committed: an attempt reached the
/// server (or may have), and no reply said how it ended. Everything it takes
/// to settle it is here; pass it to [`Client::settle`].
#[derive(Debug)]
pub struct Unsettled {
    pub(crate) lease: Lease,
    pub(crate) operation_id: Uuid,
    pub(crate) payload: String,
    pub(crate) source_version: Option<i64>,
    pub(crate) reason: Error,
}

impl Unsettled {
    /// The lease the publish was made under.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The operation id of the publish: a replay must present the same one.
    pub fn operation_id(&self) -> Uuid {
        self.operation_id
    }

    /// The payload the publish carried.
    pub fn payload(&self) -> &str {
        &self.payload
    }

    /// The source version the publish carried (contract v1.4), if any: a
    /// replay carries the same.
    pub fn source_version(&self) -> Option<i64> {
        self.source_version
    }

    /// The last failure met while trying to learn the outcome.
    pub fn reason(&self) -> &Error {
        &self.reason
    }
}

/// Why [`Client::publish_resolved`] gave up.
pub(crate) enum Unresolved {
    /// No attempt can have committed: each one failed before it was sent,
    /// or the server answered that it did not commit.
    Failed(Error),
    /// An attempt may have committed; the last error is the reason.
    Unknown(Error),
}

impl Client {
    /// Settles a publish [`run_fenced`](Client::run_fenced) left
    /// [`Fenced::Unknown`](super::Fenced::Unknown) by replaying it with the
    /// same operation id. Within the replay window (until `PruneOutcomes`
    /// deletes the publish's record, contract v1.6) the answer is final and a
    /// second call gives the same:
    ///
    /// - `AlreadyPublished`: the first send committed; the payload is (or
    ///   was, until a later holder published) the resource's publication;
    /// - `Published`: no earlier send committed and the lease was still held,
    ///   so the payload is published now, once, and the lease released;
    /// - `Refused`: no earlier send committed and the lease has ended (or was
    ///   taken over); an ended lease is never revived, so nothing is or ever
    ///   will be published under this operation id. `Refused(StaleSource)`
    ///   is the one refusal that leaves the lease held (a newer source was
    ///   published meanwhile): release it.
    ///
    /// `Err` settles nothing (the server could not be reached, or a reply was
    /// lost again): call it again later. Within the replay window a replay is
    /// always safe. Past it, the record is gone and the replay is judged as a
    /// new publish of its generation: it never publishes twice, but a send
    /// that did commit is refused (`GenerationAlreadyPublished`, `Superseded`
    /// or `Expired`) like one that did not. Then read the publication
    /// ([`read_publication`](Client::read_publication)): a payload that is
    /// this publish's (same generation and payload) means it committed.
    pub async fn settle(&self, unsettled: &Unsettled) -> Result<Publish, Error> {
        self.replay(unsettled, true).await
    }

    /// [`settle`](Client::settle)'s replay, giving the lease back with an
    /// accepted publish (`release`) or keeping it, as the publish it replays
    /// did: a publish made under a guard the caller still holds is settled
    /// without ending that guard's lease.
    pub(crate) async fn replay(&self, unsettled: &Unsettled, release: bool) -> Result<Publish, Error> {
        let answer = self
            .publish_with(
                &unsettled.lease,
                unsettled.operation_id,
                &unsettled.payload,
                release,
                unsettled.source_version,
                None,
            )
            .await;
        super::meter::outcome_unknown(match &answer {
            Ok(Publish::Published) => "Published".to_string(),
            Ok(Publish::AlreadyPublished) => "AlreadyPublished".to_string(),
            Ok(Publish::Refused(reason)) => reason.to_string(),
            Err(_) => "error".to_string(),
        });
        answer
    }

    /// Publishes and releases; while the outcome stays unknown, or a
    /// transient error (a deadlock, an exhausted pool) got in the way,
    /// replays the same operation id until the lease would end locally, and
    /// once more. A replay is always safe: a committed publish answers
    /// `AlreadyPublished`, and one that never arrived is judged afresh; past
    /// the lease's end the fence refuses a first arrival, never publishes
    /// under a dead lease. Giving up after any attempt may have reached the
    /// server is [`Unresolved::Unknown`], whatever the later attempts met.
    ///
    /// While no attempt was sent at all (no connection could be had), the
    /// replays end sooner, at [`confirm_until`](Client::confirm_until): three
    /// checkout and call timeouts after the first, never past the lease
    /// length. Nothing can have committed then, and a server that stays
    /// away must not hold the caller until a long lease ends.
    pub(crate) async fn publish_resolved(
        &self,
        lease: &Lease,
        operation_id: Uuid,
        payload: &str,
        source_version: Option<i64>,
    ) -> Result<Publish, Unresolved> {
        let attempt = || self.publish_with(lease, operation_id, payload, true, source_version, None);
        self.replays(lease.length(), lease.local_deadline(), attempt).await
    }

    /// Sends `attempt` (a publish that replays by its operation ids) until
    /// it is answered, by the rules of
    /// [`publish_resolved`](Client::publish_resolved), for a lease of
    /// `length` that ends locally at `deadline`.
    pub(crate) async fn replays<T, F: Future<Output = Result<T, Error>>>(
        &self,
        length: Duration,
        deadline: Instant,
        mut attempt: impl FnMut() -> F,
    ) -> Result<T, Unresolved> {
        let mut pause = Duration::from_millis(50);
        let mut tried_once_more = false;
        let mut maybe_sent = false;
        let mut sent = false;
        let unsent_until = self.confirm_until(Instant::now(), length);
        loop {
            let error = match attempt().await {
                Ok(answer) => return Ok(answer),
                Err(error) => error,
            };
            let unknown = matches!(error, Error::OutcomeUnknown { .. });
            maybe_sent |= unknown;
            sent |= !matches!(error, Error::Unavailable { .. } | Error::Connect(_));
            if tried_once_more || !(unknown || error.is_transient()) {
                return Err(if maybe_sent {
                    Unresolved::Unknown(error)
                } else {
                    Unresolved::Failed(error)
                });
            }
            let next = later(Instant::now(), pause);
            if !sent && next >= unsent_until {
                return Err(Unresolved::Failed(error));
            }
            tried_once_more = next >= deadline;
            // The caller's span names the lease or the set.
            tracing::debug!(%error, "publish not confirmed; replaying");
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn replays_that_never_reach_the_server_end_after_a_few_attempts_not_with_an_hour_lease() {
        let client = Client::unreachable(Duration::from_millis(100));
        let lease = Lease::for_test(Duration::from_secs(3600));
        let started = Instant::now();
        let bound = client.confirm_until(started, lease.length());
        let answer = client.publish_resolved(&lease, Uuid::new_v4(), "result", None).await;
        match answer {
            Err(Unresolved::Failed(Error::Unavailable { .. } | Error::Connect(_))) => {}
            Err(Unresolved::Failed(other) | Unresolved::Unknown(other)) => panic!("unexpected end: {other:?}"),
            Ok(answer) => panic!("an unreachable server answered {answer:?}"),
        }
        let ended = Instant::now();
        // Up to its bound, as a server back within it is still reached; a
        // last pause (at most a second) and checkout after it, no more.
        assert!(
            ended >= bound - Duration::from_secs(2),
            "gave up early: {:?}",
            ended - started
        );
        assert!(
            ended <= bound + Duration::from_secs(2),
            "kept replaying: {:?}",
            ended - started
        );
        assert!(
            bound < started + Duration::from_secs(300),
            "the bound is not a few attempts"
        );
    }
}
