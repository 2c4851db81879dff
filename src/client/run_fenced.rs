//! Holding a lease around a piece of work: acquire, keep it renewed, stop the
//! work when the lease is lost, publish under the same lease, release.

use std::future::Future;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::{Acquire, Client, Error, Lease, Publish, RefusalReason, Release, Renew};

/// How a [`Client::run_fenced`] ended, when no server or network failure got
/// in the way (those are `Err`).
#[derive(Debug)]
pub enum Fenced<E> {
    /// The work's result is the resource's publication.
    Published {
        /// The generation it was published under.
        generation: i64,
        /// The operation id of the publish.
        operation_id: Uuid,
    },
    /// The work finished but the fence refused its result.
    Refused(RefusalReason),
    /// The lease was lost while the work ran; the work was cancelled and
    /// nothing was published.
    Lost(LostReason),
    /// The work itself failed; nothing was published.
    Failed(E),
    /// Someone else holds the lease; the work never started.
    Busy {
        /// The holder's expiry, on the server clock.
        until: OffsetDateTime,
    },
    /// The key has no fence row; the work never started.
    NotProvisioned,
}

/// Why a lease was given up as lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LostReason {
    /// A renewal answered `Lost`: the lease expired or someone took over.
    Renewal,
    /// No renewal was confirmed before the lease would have ended, so a
    /// successor may already hold it.
    Unconfirmed {
        /// The last error a renewal attempt met, if any.
        last_error: Option<String>,
    },
}

/// How long before the local deadline of an unconfirmed lease `run_fenced`
/// cancels the work (at most a tenth of the lease). The local deadline is the
/// earliest the server's lease can end, often by well under a millisecond: a
/// timer firing late, or a busy runtime, would otherwise let the work see
/// the cancel after the lease has ended.
const CANCEL_AHEAD: Duration = Duration::from_millis(100);

/// What ended the renewals before the work finished.
enum Loss {
    Lost(LostReason),
    Failed(Error),
}

impl Client {
    /// Runs `work` under a lease on `key` and publishes its result with that
    /// same lease.
    ///
    /// The lease is taken once (no waiting: `Busy` is returned as is), then
    /// renewed in the background about every third of `length`. If a renewal
    /// answers `Lost`, or none is confirmed by 100 ms (a tenth of a shorter
    /// lease) before the lease would end, judged on the local clock from when
    /// each request was sent, the token passed to `work` is cancelled; `work`
    /// should stop when it sees that. Its result is then dropped unpublished.
    /// A work that finishes in time is published under the lease it ran
    /// under; a lease is never re-acquired for old work. Finally the lease is
    /// released, bounded by the configured release timeout; a failed release
    /// is logged, not returned.
    ///
    /// A publish whose reply is lost is replayed with the same operation id, so
    /// a result is published at most once and is not dropped for a lost reply.
    ///
    /// `Err` means the server or the network failed: acquiring, a renewal
    /// that failed for a reason that retrying will not fix, or the publish
    /// when its replays were lost too (an [`Error::OutcomeUnknown`] names the
    /// operation id to resolve).
    ///
    /// A work that does not stop within the configured cancel grace after its
    /// token was cancelled is dropped. The token is also cancelled when
    /// `run_fenced` returns or its future is dropped, so tasks the work
    /// spawned never outlive the lease unknowingly. Dropping the future stops
    /// everything without releasing; the lease then simply expires.
    pub async fn run_fenced<F, Fut, E>(&self, key: &str, length: Duration, work: F) -> Result<Fenced<E>, Error>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<String, E>>,
    {
        // A lost reply to an acquire that took the lease is confirmed by a
        // retry with the same owner; past one lease length it would have
        // expired anyway.
        let deadline = Instant::now() + length;
        let lease = match self.acquire_retrying(key, Uuid::new_v4(), length, deadline).await? {
            Acquire::Acquired(lease) => lease,
            Acquire::Busy { until, .. } => return Ok(Fenced::Busy { until }),
            Acquire::NotProvisioned => return Ok(Fenced::NotProvisioned),
        };
        let cancel = CancellationToken::new();
        let _cancel_on_exit = cancel.clone().drop_guard();
        let held = self.hold(&lease, work(cancel.clone()), &cancel).await;
        // After a renewal answered `Lost` there is nothing left to release.
        if !matches!(held, Ok(Fenced::Lost(LostReason::Renewal))) {
            self.release_quietly(&lease).await;
        }
        held
    }

    async fn hold<E>(
        &self,
        lease: &Lease,
        work: impl Future<Output = Result<String, E>>,
        cancel: &CancellationToken,
    ) -> Result<Fenced<E>, Error> {
        let finished = {
            let renewals = self.keep_renewed(lease.clone());
            tokio::pin!(work, renewals);
            tokio::select! {
                // A loss seen together with a finished work wins: the work's
                // result may have been made without the lease.
                biased;
                loss = &mut renewals => {
                    cancel.cancel();
                    // Let the work wind down on its own terms, within the grace;
                    // its result is not published, whatever it is.
                    let _ = tokio::time::timeout(self.config.cancel_grace, work).await;
                    return match loss {
                        Loss::Lost(reason) => Ok(Fenced::Lost(reason)),
                        Loss::Failed(error) => Err(error),
                    };
                }
                result = &mut work => result,
            }
            // The renewals end with this block, so a renewal in flight gives
            // its connection back before the publish needs one.
        };
        let payload = match finished {
            Ok(payload) => payload,
            Err(error) => return Ok(Fenced::Failed(error)),
        };
        // The publish needs time to arrive before the lease ends. With less
        // than half of it left on the local clock (a slow renewal, a busy
        // runtime), renew first; if the lease runs out anyway, the fence
        // refuses the publish, which is the point.
        let mut lease = lease.clone();
        if lease.remaining() < lease.length() / 2
            && let Ok(Renew::Lost) = self.renew(&mut lease).await
        {
            return Ok(Fenced::Lost(LostReason::Renewal));
        }
        let operation_id = Uuid::new_v4();
        Ok(match self.publish_resolved(&lease, operation_id, &payload).await? {
            // `AlreadyPublished` answers a replay of a publish whose reply was
            // lost: this operation committed.
            Publish::Published | Publish::AlreadyPublished => Fenced::Published {
                generation: lease.generation(),
                operation_id,
            },
            Publish::Refused(reason) => Fenced::Refused(reason),
        })
    }

    /// Publishes, and while the outcome stays unknown, or a transient error
    /// (a deadlock, an exhausted pool) got in the way, replays the same
    /// operation id until the lease would end locally. A replay is always
    /// safe: a committed publish answers `AlreadyPublished`, and one that never
    /// arrived is judged afresh. Past the lease's end the fence would refuse a
    /// first arrival anyway, so the last error is returned then.
    async fn publish_resolved(&self, lease: &Lease, operation_id: Uuid, payload: &str) -> Result<Publish, Error> {
        let mut pause = Duration::from_millis(50);
        let mut tried_once_more = false;
        loop {
            match self.publish(lease, operation_id, payload).await {
                Err(error) if error.is_transient() && !tried_once_more => {
                    // One replay even past the deadline: it can only confirm a
                    // commit or be refused, never publish under a dead lease.
                    tried_once_more = Instant::now() + pause >= lease.local_deadline();
                    tracing::debug!(key = lease.key(), %operation_id, %error, "publish not confirmed; replaying");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                other => return other,
            }
        }
    }

    /// Renews until the lease is lost; never returns while it is held.
    async fn keep_renewed(&self, mut lease: Lease) -> Loss {
        let period = lease.length() / 3;
        let retry_pause = (period / 4).max(Duration::from_millis(50));
        let ahead = CANCEL_AHEAD.min(lease.length() / 10);
        let mut next = lease.local_deadline() - lease.length() + period;
        let mut last_error = None;
        loop {
            tokio::time::sleep_until(next).await;
            let deadline = lease.local_deadline() - ahead;
            let attempt = tokio::time::timeout_at(deadline, self.renew(&mut lease)).await;
            match attempt {
                Err(_) => {
                    let waited = "no renewal was answered before the lease would end".to_string();
                    return Loss::Lost(LostReason::Unconfirmed {
                        last_error: last_error.or(Some(waited)),
                    });
                }
                Ok(Ok(Renew::Renewed { .. })) => {
                    last_error = None;
                    next = lease.local_deadline() - lease.length() + period;
                }
                Ok(Ok(Renew::Lost)) => return Loss::Lost(LostReason::Renewal),
                Ok(Err(error)) if error.is_transient() => {
                    tracing::debug!(key = lease.key(), %error, "renewal failed; retrying");
                    last_error = Some(error.to_string());
                    next = (Instant::now() + retry_pause).min(deadline);
                }
                Ok(Err(error)) => return Loss::Failed(error),
            }
        }
    }

    /// Releases at the end of `run_fenced`. The outcome of the run is already
    /// decided, so a failure here is logged, and the lease simply expires.
    async fn release_quietly(&self, lease: &Lease) {
        let timeout = self.config.release_timeout;
        match tokio::time::timeout(timeout, self.release(lease)).await {
            Ok(Ok(Release::Released)) => {}
            Ok(Ok(Release::NotHolder)) => {
                tracing::debug!(
                    key = lease.key(),
                    generation = lease.generation(),
                    "lease had already ended"
                );
            }
            Ok(Err(error)) => tracing::warn!(
                key = lease.key(),
                generation = lease.generation(),
                %error,
                "release failed; the lease will expire on its own"
            ),
            Err(_) => tracing::warn!(
                key = lease.key(),
                generation = lease.generation(),
                timeout_ms = timeout.as_millis() as u64,
                "release did not finish in time; the lease will expire on its own"
            ),
        }
    }
}
