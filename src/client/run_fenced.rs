//! Holding a lease around a piece of work: acquire, keep it renewed, stop the
//! work when the lease is lost, publish under the same lease, release.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::built::Built;
use super::guard::Ending;
use super::settle::{Unresolved, Unsettled};
use super::span;
use super::{Acquire, Client, Error, LeaseGuard, LostReason, Publish, RefusalReason, Renew, input};

/// How a [`Client::run_fenced`] ended. A server or network failure that
/// published nothing is an `Err` instead; one that may have published is
/// [`Fenced::Unknown`], never an `Err`. New outcomes may be added: match with
/// a catch-all arm.
#[derive(Debug)]
#[must_use = "a refused, lost or unknown publish is a value, not an error: look at it"]
#[non_exhaustive]
pub enum Fenced<E> {
    /// The work's result is the resource's publication.
    Published {
        /// The generation it was published under.
        generation: i64,
        /// The operation id of the publish.
        operation_id: Uuid,
    },
    /// The work finished but the fence refused its result. After
    /// `StaleSource` (a newer source was published meanwhile) the lease was
    /// released, as after every refusal.
    Refused(RefusalReason),
    /// The lease was lost while the work ran; the work was cancelled and
    /// nothing was published.
    Lost(LostReason),
    /// The work itself failed; nothing was published.
    Failed(E),
    /// Someone else holds the lease, or another transaction held its fence
    /// row longer than `Acquire` waits for it; the work never started.
    Busy {
        /// The holder's expiry, or the moment of the answer when that is
        /// unknown (see [`Acquire::Busy`]).
        until: OffsetDateTime,
    },
    /// The key has no fence row; the work never started.
    NotProvisioned,
    /// The work finished and its publish may have committed, but no reply
    /// said so: each replay failed too (the server or the network went away).
    /// Not an error, because the result may well be published; settle it
    /// with [`Client::settle`], whose answer is final.
    Unknown(Box<Unsettled>),
}

impl<E> Fenced<E> {
    /// The outcome's name, as spans record it: `Published`, `Refused`,
    /// `Lost`, `Failed`, `Busy`, `NotProvisioned` or `Unknown`.
    fn name(&self) -> &'static str {
        match self {
            Fenced::Published { .. } => "Published",
            Fenced::Refused(_) => "Refused",
            Fenced::Lost(_) => "Lost",
            Fenced::Failed(_) => "Failed",
            Fenced::Busy { .. } => "Busy",
            Fenced::NotProvisioned => "NotProvisioned",
            Fenced::Unknown(_) => "Unknown",
        }
    }
}

impl Client {
    /// Runs `work` under a lease on `key` and publishes its result with that
    /// same lease.
    ///
    /// The lease is taken once (no waiting: `Busy` is returned as is, also
    /// when another transaction held the fence row longer than `Acquire`
    /// waits for it, which granted nothing) and held by a [`LeaseGuard`],
    /// which renews it in the background. When the guard finds the lease
    /// lost, the token passed to `work` is cancelled; `work` should stop when
    /// it sees that. Its result is then dropped unpublished. A work that
    /// finishes in time is published under the lease it ran under; a lease is
    /// never re-acquired for old work. An accepted publish gives the lease
    /// back in the same call, so a quick work costs two round trips: acquire
    /// and publish. Otherwise the lease is released at the end, bounded by
    /// the configured release timeout; a failed release is logged, not
    /// returned.
    ///
    /// A publish whose reply is lost is replayed with the same operation id, so
    /// a result is published at most once and is not dropped for a lost reply.
    /// When the replays cannot get an answer either, by the end of the lease,
    /// the answer is [`Fenced::Unknown`], which carries the lease, the
    /// operation id and the payload, and the lease is released (bounded by
    /// the release timeout). [`Client::settle`] then tells for good whether
    /// it committed. While no publish was sent at all (no connection could
    /// be had), the replays stop sooner: after three checkout and call
    /// timeouts (2 min 15 s by default), never past the lease, whatever its
    /// length, and `run_fenced` returns that error, since nothing was
    /// published.
    ///
    /// `Err` means the server or the network failed and nothing was
    /// published: acquiring, a renewal that failed for a reason that retrying
    /// will not fix, or a publish that never reached the server or that the
    /// server answered as not committed. A publish that may have committed is
    /// never an `Err`.
    ///
    /// A work that does not stop within the configured cancel grace after its
    /// token was cancelled is dropped. The token is also cancelled when
    /// `run_fenced` returns or its future is dropped, so tasks the work
    /// spawned never outlive the lease unknowingly. Dropping the future at
    /// any point before the lease was given back (also during the publish or
    /// the closing release) releases the lease in the background.
    ///
    /// The work returns its payload as a `String`, or as a [`Built`] that
    /// also names the version of the source it was built from (contract
    /// v1.4): the publish is then refused as
    /// [`RefusalReason::StaleSource`] if a newer source was published.
    ///
    /// ```no_run
    /// # async fn service(client: fencepost::Client) -> Result<(), fencepost::client::Error> {
    /// use std::time::Duration;
    ///
    /// use fencepost::client::Fenced;
    /// use fencepost::CancellationToken;
    ///
    /// async fn rebuild(stop: CancellationToken) -> Result<String, std::io::Error> {
    ///     // Long work that checks `stop` between its steps.
    ///     Ok(String::from("{\"rows\":42}"))
    /// }
    ///
    /// match client.run_fenced("report:daily", Duration::from_secs(30), rebuild).await? {
    ///     Fenced::Published { generation, .. } => println!("published under generation {generation}"),
    ///     Fenced::Unknown(unsettled) => println!("settled: {:?}", client.settle(&unsettled).await?),
    ///     other => println!("nothing published: {other:?}"),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_fenced<F, Fut, P, E>(&self, key: &str, length: Duration, work: F) -> Result<Fenced<E>, Error>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<P, E>>,
        P: Into<Built>,
    {
        let span = span::run_fenced_span(key);
        // On the heap: the whole run's state machine is large, and a caller's
        // stack (a test thread's 2 MiB in a debug build) need not hold it.
        let ran = Box::pin(self.run_fenced_in(key, length, work))
            .instrument(span.clone())
            .await;
        if let Ok(fenced) = &ran {
            span.record("fencepost.outcome", fenced.name());
            if let Fenced::Published { generation, .. } = fenced {
                span.record("fencepost.generation", generation);
            }
        }
        ran
    }

    async fn run_fenced_in<F, Fut, P, E>(&self, key: &str, length: Duration, work: F) -> Result<Fenced<E>, Error>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<P, E>>,
        P: Into<Built>,
    {
        // Refused before any arithmetic on it, and before a round trip.
        input::key(key)?;
        input::lease_seconds(length)?;
        // A lost reply to an acquire that took the lease is confirmed by a
        // retry with the same owner, for a bounded time.
        let until = self.confirm_until(Instant::now(), length);
        let lease = match self.acquire_retrying(key, Uuid::new_v4(), length, until).await? {
            Acquire::Acquired(lease) => lease,
            Acquire::Busy { until, .. } => return Ok(Fenced::Busy { until }),
            Acquire::NotProvisioned => return Ok(Fenced::NotProvisioned),
        };
        let mut guard = self.guard(lease);
        let cancel = guard.token();
        let _cancel_on_exit = cancel.clone().drop_guard();
        let work = work(cancel.clone());
        let built = async move { work.await.map(Into::into) };
        let held = self.hold(&mut guard, built, &cancel).await;
        // An accepted publish released the lease with it, and after a renewal
        // answered `Lost` there is nothing left to release. Until one of those
        // happened, dropping this future drops the guard, which releases.
        if matches!(held, Ok(Fenced::Published { .. } | Fenced::Lost(LostReason::Renewal))) {
            guard.forget();
        } else {
            guard.release_quietly().await;
        }
        held
    }

    async fn hold<E>(
        &self,
        guard: &mut LeaseGuard,
        work: impl Future<Output = Result<Built, E>>,
        cancel: &CancellationToken,
    ) -> Result<Fenced<E>, Error> {
        tokio::pin!(work);
        let finished = tokio::select! {
            // A loss seen together with a finished work wins: the work's
            // result may have been made without the lease.
            biased;
            _ = guard.lost() => None,
            result = &mut work => Some(result),
        };
        // Stopping the renewals also waits for one in flight to give its
        // connection back before the publish needs one.
        let ending = guard.stop_renewing().await;
        let built = match judge(finished, ending, work, cancel, self.config.cancel_grace).await {
            Verdict::Publish(built) => built,
            Verdict::Failed(error) => return Ok(Fenced::Failed(error)),
            Verdict::Lost => return Ok(Fenced::Lost(guard.lost_reason().unwrap_or(LostReason::Renewal))),
            Verdict::Error(error) => return Err(error),
        };
        // The publish needs time to arrive before the lease ends. With less
        // than half of it left on the local clock (a slow renewal, a busy
        // runtime), renew first; if the lease runs out anyway, the fence
        // refuses the publish, which is the point.
        let mut lease = guard.lease();
        if lease.remaining() < lease.length() / 2
            && let Ok(Renew::Lost) = self.renew(&mut lease).await
        {
            return Ok(Fenced::Lost(LostReason::Renewal));
        }
        let operation_id = Uuid::new_v4();
        let Built {
            payload,
            source_version,
        } = built;
        Ok(
            match self
                .publish_resolved(&lease, operation_id, &payload, source_version)
                .await
            {
                // `AlreadyPublished` answers a replay of a publish whose reply was
                // lost: this operation committed.
                Ok(Publish::Published | Publish::AlreadyPublished) => Fenced::Published {
                    generation: lease.generation(),
                    operation_id,
                },
                Ok(Publish::Refused(reason)) => Fenced::Refused(reason),
                Err(Unresolved::Unknown(reason)) => {
                    super::meter::outcome_unknown("unsettled".to_string());
                    Fenced::Unknown(Box::new(Unsettled {
                        lease,
                        operation_id,
                        payload,
                        source_version,
                        reason,
                    }))
                }
                Err(Unresolved::Failed(error)) => return Err(error),
            },
        )
    }
}

/// What becomes of a work once the renewals have stopped.
enum Verdict<E> {
    /// It finished in time: publish its result.
    Publish(Built),
    /// It failed in time: nothing to publish.
    Failed(E),
    /// The lease was lost: its result, if any, is dropped.
    Lost,
    /// A renewal failed for a reason retrying will not fix.
    Error(Error),
}

/// Judges a work by how it and the renewals ended (`finished` is `None`
/// while it still runs). A work still running when the lease was lost is
/// cancelled and given `grace` to wind down on its own terms; its result is
/// not published, whatever it is. A finished work is never polled again.
async fn judge<E>(
    finished: Option<Result<Built, E>>,
    ending: Option<Ending>,
    work: Pin<&mut impl Future<Output = Result<Built, E>>>,
    cancel: &CancellationToken,
    grace: Duration,
) -> Verdict<E> {
    let running = finished.is_none();
    let verdict = match (finished, ending) {
        (Some(Ok(payload)), None | Some(Ending::Stopped)) => return Verdict::Publish(payload),
        (Some(Err(error)), None | Some(Ending::Stopped)) => return Verdict::Failed(error),
        (_, Some(Ending::Failed(error))) => Verdict::Error(error),
        (_, _) => Verdict::Lost,
    };
    cancel.cancel();
    // A finished `async` block panics when polled again.
    if running {
        let _ = tokio::time::timeout(grace, work).await;
    }
    verdict
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use std::task::{Context, Poll};

    use super::*;
    use crate::client::Parameter;

    /// A work that finishes on its first poll and panics if polled again, as
    /// an `async` block does ("resumed after completion").
    #[derive(Default)]
    struct FinishesOnce {
        finished: bool,
    }

    impl Future for FinishesOnce {
        type Output = Result<Built, Infallible>;

        fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            assert!(!self.finished, "a finished work was polled again");
            self.finished = true;
            Poll::Ready(Ok(Built::from("result")))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_work_that_finished_as_the_lease_was_lost_is_not_polled_again() {
        // The schedule of a renewal task that found the lease lost on another
        // thread just as the work finished: the work is ready, and stopping
        // the renewals then reports the loss.
        let endings = [
            Ending::Lost(LostReason::Renewal),
            Ending::Failed(Error::Unavailable { reason: "down".into() }),
        ];
        for ending in endings {
            let mut work = std::pin::pin!(FinishesOnce::default());
            let finished = work.as_mut().await;
            let cancel = CancellationToken::new();
            let verdict = judge(Some(finished), Some(ending), work, &cancel, Duration::from_secs(10)).await;
            assert!(matches!(verdict, Verdict::Lost | Verdict::Error(_)));
            assert!(cancel.is_cancelled(), "the work's token outlived the lease");
        }
    }

    #[tokio::test]
    async fn an_endless_lease_is_refused_before_any_arithmetic() {
        let client = Client::unreachable(Duration::from_millis(100));
        let error = client
            .run_fenced("k", Duration::MAX, |_| async { Ok::<_, Infallible>(String::new()) })
            .await
            .unwrap_err();
        assert_eq!(error.parameter(), Some(Parameter::LeaseSeconds), "{error}");
    }

    #[tokio::test]
    async fn an_unreachable_server_ends_a_run_within_a_checkout_not_a_lease() {
        // Nothing was ever sent, so no lease can have been granted: there is
        // nothing to confirm with the same owner, and an hour's lease must not
        // mean an hour of retries.
        let client = Client::unreachable(Duration::from_millis(200));
        let run = client.run_fenced("k", Duration::from_secs(3600), |_| async {
            Ok::<_, Infallible>(String::new())
        });
        let ended = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("run_fenced kept retrying a server it never reached");
        let error = ended.unwrap_err();
        assert!(
            matches!(error, Error::Unavailable { .. } | Error::Connect(_)),
            "{error:?}"
        );
    }
}
