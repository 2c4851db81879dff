//! Holding a lease set around a piece of work, as
//! [`run_fenced`](super::Client::run_fenced) holds one lease: acquire every
//! key, keep the set renewed, stop the work when any key is lost, publish
//! under every key exactly once, release.

use std::future::Future;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::set_renewal::SetLost;
use super::set_settle::UnsettledSet;
use super::settle::Unresolved;
use super::span;
use super::{
    AcquireSet, Client, Error, KeyPublish, KeyRefusal, LeaseSet, LostReason, PublishSet, RefusalReason, RenewSet,
};

/// How a [`Client::run_fenced_set`] ended. A failure that published nothing
/// is an `Err` instead; one that may have published is
/// [`FencedSet::Unknown`]. New outcomes may be added: match with a
/// catch-all arm.
#[derive(Debug)]
#[must_use = "a refused, lost or unknown publish is a value, not an error: look at it"]
#[non_exhaustive]
pub enum FencedSet<E> {
    /// Each key's payload is its publication, under the set's generations.
    Published {
        /// The set it was published under: each key's generation.
        set: LeaseSet,
        /// Each key with the operation id of its publish, in lock order.
        operation_ids: Vec<(String, Uuid)>,
    },
    /// The work finished but the fence refused its result (nothing was
    /// written); each key with its refusal, or `None` for a key that alone
    /// would have been accepted.
    Refused(Vec<(String, Option<RefusalReason>)>),
    /// A key was lost while the work ran; the work was cancelled and
    /// nothing was published.
    Lost(SetLost),
    /// The work itself failed; nothing was published.
    Failed(E),
    /// The set was not granted (a key busy or not provisioned); each key
    /// with why. The work never started.
    NotAcquired(Vec<(String, KeyRefusal)>),
    /// Another transaction held a key's fence row longer than `AcquireSet`
    /// waits for it; nothing was granted and the work never started.
    RowHeld,
    /// The work finished and its publish may have committed, but no reply
    /// said so; settle it with [`Client::settle_set`].
    Unknown(Box<UnsettledSet>),
}

impl<E> FencedSet<E> {
    /// The outcome's name, as spans record it: `Published`, `Refused`,
    /// `Lost`, `Failed`, `NotAcquired`, `RowHeld` or `Unknown`.
    fn name(&self) -> &'static str {
        match self {
            FencedSet::Published { .. } => "Published",
            FencedSet::Refused(_) => "Refused",
            FencedSet::Lost(_) => "Lost",
            FencedSet::Failed(_) => "Failed",
            FencedSet::NotAcquired(_) => "NotAcquired",
            FencedSet::RowHeld => "RowHeld",
            FencedSet::Unknown(_) => "Unknown",
        }
    }
}

impl Client {
    /// Runs `work` under a lease set on `keys` and publishes its result
    /// under every key with that same set, as
    /// [`run_fenced`](Client::run_fenced) does for one key.
    ///
    /// The set is taken once with [`acquire_set`](Client::acquire_set),
    /// without waiting, as `run_fenced` takes its lease: a busy key answers
    /// [`FencedSet::NotAcquired`]. A lost reply to the acquire is confirmed
    /// by a retry with the same owner. A [`LeaseSetGuard`](super::LeaseSetGuard)
    /// renews the set; when any key is lost, the token passed to `work` is
    /// cancelled, and the work is given the configured cancel grace to stop
    /// before it is dropped. The work returns each key's payload (every key
    /// once, in any order); they are published under the set in one
    /// `PublishSet` that also gives the set back, each key with a fresh
    /// operation id. A publish whose reply is lost is sent again with the
    /// same operation ids (a committed one answers `AlreadyPublished` for
    /// every key, so the result is published exactly once); when no replay
    /// is answered by the end of the set, the answer is
    /// [`FencedSet::Unknown`], settled by [`Client::settle_set`]. Unless the
    /// publish was accepted, the set is released at the end, bounded by the
    /// release timeout. Dropping the future releases it in the background.
    pub async fn run_fenced_set<F, Fut, E>(
        &self,
        keys: &[&str],
        length: std::time::Duration,
        work: F,
    ) -> Result<FencedSet<E>, Error>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<Vec<(String, String)>, E>>,
    {
        let span = span::run_fenced_set_span(keys);
        // On the heap, as run_fenced's: the state machine is large.
        let ran = Box::pin(self.run_fenced_set_in(keys, length, work))
            .instrument(span.clone())
            .await;
        if let Ok(fenced) = &ran {
            span.record("fencepost.outcome", fenced.name());
        }
        ran
    }

    async fn run_fenced_set_in<F, Fut, E>(
        &self,
        keys: &[&str],
        length: std::time::Duration,
        work: F,
    ) -> Result<FencedSet<E>, Error>
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = Result<Vec<(String, String)>, E>>,
    {
        let set = match self.acquire_set(keys, length).await? {
            AcquireSet::Acquired(set) => set,
            AcquireSet::Refused(refused) => return Ok(FencedSet::NotAcquired(refused)),
            AcquireSet::RowHeld => return Ok(FencedSet::RowHeld),
        };
        let mut guard = self.guard_set(set);
        let cancel = guard.token();
        let _cancel_on_exit = cancel.clone().drop_guard();
        let work = work(cancel.clone());
        tokio::pin!(work);
        let finished = tokio::select! {
            // A loss seen together with a finished work wins: the work's
            // result may have been made without the set.
            biased;
            _ = guard.lost() => None,
            result = &mut work => Some(result),
        };
        // Stopping the renewals also waits for one in flight to give its
        // connection back before the publish needs one.
        guard.stop_renewing().await;
        let payloads = match (finished, guard.lost_reason()) {
            (Some(Ok(payloads)), None) => payloads,
            (Some(Err(error)), None) => {
                guard.release_quietly().await;
                return Ok(FencedSet::Failed(error));
            }
            (finished, lost) => {
                cancel.cancel();
                // A finished `async` block panics when polled again.
                if finished.is_none() {
                    let _ = tokio::time::timeout(self.config.cancel_grace, work).await;
                }
                guard.release_quietly().await;
                return Ok(FencedSet::Lost(lost.unwrap_or_else(lost_unseen)));
            }
        };
        let published = self.publish_held(&guard.lease_set(), payloads).await;
        match published {
            Ok(FencedSet::Published { .. }) => guard.forget(),
            _ => guard.release_quietly().await,
        }
        published
    }

    /// Publishes `payloads` under `set` and gives it back, replaying a lost
    /// reply with the same operation ids.
    async fn publish_held<E>(&self, set: &LeaseSet, payloads: Vec<(String, String)>) -> Result<FencedSet<E>, Error> {
        // The publish needs time to arrive before the set ends: with less
        // than half of it left on the local clock, renew first.
        let mut set = set.clone();
        if set.leases()[0].remaining() < set.length() / 2
            && let Ok(RenewSet::Lost { lost }) = self.renew_set(&mut set).await
        {
            return Ok(FencedSet::Lost(SetLost {
                key: lost.into_iter().next(),
                reason: LostReason::Renewal,
            }));
        }
        let sent: Vec<(String, Uuid, String)> = payloads
            .into_iter()
            .map(|(key, payload)| (key, Uuid::new_v4(), payload))
            .collect();
        let publishes: Vec<KeyPublish<'_>> = sent
            .iter()
            .map(|(key, operation_id, payload)| KeyPublish {
                key,
                operation_id: *operation_id,
                payload,
            })
            .collect();
        Ok(match self.publish_set_resolved(&set, &publishes).await {
            Ok(PublishSet::Accepted(_)) => {
                let mut operation_ids: Vec<(String, Uuid)> =
                    sent.iter().map(|(key, id, _)| (key.clone(), *id)).collect();
                operation_ids.sort_by_key(|(key, _)| set.keys().position(|k| k == key));
                FencedSet::Published { set, operation_ids }
            }
            Ok(PublishSet::Refused(refused)) => FencedSet::Refused(refused),
            Err(Unresolved::Unknown(reason)) => {
                super::meter::outcome_unknown("unsettled".to_string());
                FencedSet::Unknown(Box::new(UnsettledSet {
                    set,
                    publishes: sent,
                    reason,
                }))
            }
            Err(Unresolved::Failed(error)) => return Err(error),
        })
    }
}

/// A loss that `lost()` resolved with but that no longer reads: never
/// expected, since a loss is recorded once and kept.
fn lost_unseen() -> SetLost {
    SetLost {
        key: None,
        reason: LostReason::Unconfirmed { last_error: None },
    }
}
