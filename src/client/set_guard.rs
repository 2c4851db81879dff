//! The value a held lease set lives in, as a [`LeaseGuard`](super::LeaseGuard)
//! is for one lease: it renews the set in the background, says when any key
//! of it is lost, fences transactions by the whole set, and gives the set
//! back when released or dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::set_renewal::{HeldSet, SetLost, keep_set_renewed};
use super::signal_holder::SignalHandle;
use super::{
    BeginFenced, Client, Error, FencedOutcome, FencedTx, KeyPublish, LeaseSet, LostReason, PublishSet, Release,
    fenced_transaction, fenced_tx,
};
use super::{meter, span};

/// A held lease set, renewed in the background with one `RenewSet` about
/// every third of its length until it is released, dropped, or lost. Made
/// by [`Client::guard_set`].
///
/// The set is lost as a whole when any key is: a renewal answered `Lost`
/// for a key (expired, or taken over), or no renewal was confirmed some
/// margin before the set would end on the local clock (the margin a
/// [`LeaseGuard`](super::LeaseGuard) keeps). Then [`lost`](Self::lost)
/// resolves with the reason and the key, and [`token`](Self::token) is
/// cancelled. The guard never re-acquires. The keys not lost stay held
/// until released (or they run out): releasing or dropping the guard gives
/// them back.
///
/// While it holds the set, the guard raises each key's handover signal as
/// a single guard does, so a waiter on any one key is woken as soon as the
/// set is given back.
///
/// Dropping the guard stops the renewals and releases the set in the
/// background, bounded by the client's release timeout.
#[must_use = "dropping the guard releases the set"]
pub struct LeaseSetGuard {
    client: Client,
    state: watch::Receiver<HeldSet>,
    /// Stops the renewal task.
    stop: CancellationToken,
    /// Cancelled when the set is lost, released or dropped.
    ended: CancellationToken,
    /// Each key's handover signal, lowered once the set is given back or lost.
    signals: Arc<[SignalHandle]>,
    /// Held by each renewal and by each fenced transaction of this guard,
    /// so a renewal never waits on the row locks of its own holder.
    row: Arc<Mutex<()>>,
    /// Set while a fenced transaction of this guard is open.
    transaction_open: Arc<AtomicBool>,
    /// `None` once the renewals were stopped.
    renewals: Option<JoinHandle<()>>,
    /// Whether keys of the set may still be held by this guard: cleared only
    /// once the set was given back for sure.
    needs_release: bool,
}

impl Client {
    /// Keeps every key of `set` renewed in the background and returns the
    /// guard that holds it. Must be called inside a tokio runtime.
    pub fn guard_set(&self, set: LeaseSet) -> LeaseSetGuard {
        meter::guards_held(1.0);
        let span = span::renewals_span(&set.leases()[0]);
        let signals: Arc<[SignalHandle]> = set.keys().map(|key| self.raise_signal(key)).collect();
        let (sender, state) = watch::channel(HeldSet { set, lost: None });
        let stop = CancellationToken::new();
        let ended = CancellationToken::new();
        let row = Arc::new(Mutex::new(()));
        // Made before the task starts: an abort before its first poll drops
        // the report with it, and that too is a loss.
        let report = SetReport {
            state: sender,
            ended: ended.clone(),
            signals: signals.clone(),
            loss: Some(died("it panicked or was aborted")),
        };
        let task = renew_until_stopped(self.clone(), report, stop.clone(), row.clone());
        LeaseSetGuard {
            client: self.clone(),
            state,
            stop,
            ended,
            signals,
            row,
            transaction_open: Arc::new(AtomicBool::new(false)),
            renewals: Some(tokio::spawn(task.instrument(span))),
            needs_release: true,
        }
    }
}

impl LeaseSetGuard {
    /// The set as last confirmed: its expiry and local deadline move with
    /// each renewal.
    pub fn lease_set(&self) -> LeaseSet {
        self.state.borrow().set.clone()
    }

    /// Why the set was lost, and which key, if it was.
    pub fn lost_reason(&self) -> Option<SetLost> {
        self.state.borrow().lost.clone()
    }

    /// Resolves when the set is lost; never while every key is held.
    pub async fn lost(&self) -> SetLost {
        let mut state = self.state.clone();
        let lost = match state.wait_for(|held| held.lost.is_some()).await {
            Ok(held) => held.lost.clone(),
            Err(_) => None,
        };
        match lost {
            Some(lost) => lost,
            // The renewals stopped without a loss: the guard is being released.
            None => std::future::pending().await,
        }
    }

    /// A token cancelled when the set is lost, released or dropped: hand it
    /// to work that must stop when the set ends.
    pub fn token(&self) -> CancellationToken {
        self.ended.child_token()
    }

    /// Begins a transaction fenced by every key of the set
    /// (`AssertHolderSet` at the begin and again in the batch that commits),
    /// by the rules of [`LeaseGuard::begin_fenced`](super::LeaseGuard::begin_fenced):
    /// the renewals wait for it, it lasts at most until the set's local
    /// deadline, and one is open per guard at a time.
    pub async fn begin_fenced(&self) -> Result<BeginFenced<'_>, Error> {
        let state = self.state.clone();
        let current = Box::new(move || state.borrow().set.leases()[0].clone());
        let Some(claim) = fenced_tx::Claim::take(&self.row, &self.transaction_open, current) else {
            return Err(Error::FencedTransactionOpen { call: "begin_fenced" });
        };
        fenced_tx::begin_set(&self.client, &self.lease_set(), Some(claim)).await
    }

    /// Runs `work` in a transaction fenced by the whole set
    /// ([`begin_fenced`](Self::begin_fenced)) and commits only if the work
    /// succeeds and every key is still held at the commit, as
    /// [`LeaseGuard::fenced_transaction`](super::LeaseGuard::fenced_transaction)
    /// does for one lease. A key lost before the commit answers
    /// `Refused`, with everything the work wrote rolled back.
    pub async fn fenced_transaction<T, E>(
        &self,
        work: impl AsyncFnOnce(&mut FencedTx<'_>) -> Result<T, E>,
    ) -> Result<FencedOutcome<T, E>, Error> {
        let span = span::fenced_transaction_span(&self.lease_set().leases()[0]);
        fenced_transaction::traced(
            async { fenced_transaction::around(self.begin_fenced().await?, work).await },
            span,
        )
        .await
    }

    /// Publishes under every key of the set, as [`Client::publish_set`]
    /// does; the set stays held and renewed. Refused with
    /// [`Error::FencedTransactionOpen`] while this guard's fenced
    /// transaction is open, whose locks the publish would wait on.
    pub async fn publish_set(&self, publishes: &[KeyPublish<'_>]) -> Result<PublishSet, Error> {
        self.outside_transaction("publish_set")?;
        self.client.publish_set(&self.lease_set(), publishes).await
    }

    /// Publishes under every key and gives the set back in the same call,
    /// as [`Client::publish_set_and_release`] does, after stopping the
    /// renewals. A refusal, an error, or a future dropped before the answer
    /// leaves the set to be released in the background, as a dropped guard
    /// does. An unknown outcome ([`Error::OutcomeUnknown`]) is settled by
    /// sending the same publishes again under [`lease_set`](Self::lease_set),
    /// taken before this call: `AlreadyPublished` for each key if it
    /// committed, otherwise a refusal, since a released key is never revived.
    pub async fn publish_set_and_release(mut self, publishes: &[KeyPublish<'_>]) -> Result<PublishSet, Error> {
        self.stop_renewing().await;
        let answer = self.client.publish_set_and_release(&self.lease_set(), publishes).await;
        if matches!(answer, Ok(PublishSet::Accepted(_))) {
            self.needs_release = false;
        }
        answer
    }

    /// Stops the renewals and gives back every key the set still holds,
    /// each answered as [`Client::release_set`] answers it (a key taken
    /// over is `NotHolder`). If the call fails, or this future is dropped
    /// before it answers, the set is released in the background.
    pub async fn release(mut self) -> Result<Vec<(String, Release)>, Error> {
        self.stop_renewing().await;
        self.ended.cancel();
        let answer = self.client.release_set(&self.lease_set()).await;
        if answer.is_ok() {
            self.needs_release = false;
        }
        answer
    }

    /// Stops the renewals and releases, bounded by the release timeout; a
    /// failure is logged, and the set runs out on its own.
    pub(crate) async fn release_quietly(mut self) {
        self.stop_renewing().await;
        if self.client.release_set_quietly(&self.lease_set()).await {
            self.needs_release = false;
        }
    }

    /// Forgets the set without releasing it, after an accepted
    /// publish-and-release gave it back.
    pub(crate) fn forget(mut self) {
        self.stopping();
        self.renewals = None;
        self.needs_release = false;
    }

    /// Stops the renewals, waiting until a renewal in flight has given its
    /// connection back. The set stays held until released or dropped.
    pub(crate) async fn stop_renewing(&mut self) {
        if let Some(renewals) = self.renewals.take() {
            self.stopping();
            // A task that panicked or was aborted already reported a loss.
            let _ = renewals.await;
        }
    }

    /// Refuses `call` while this guard's fenced transaction holds the rows.
    fn outside_transaction(&self, call: &'static str) -> Result<(), Error> {
        if self.transaction_open.load(Ordering::Acquire) {
            return Err(Error::FencedTransactionOpen { call });
        }
        Ok(())
    }

    /// Stops the renewals, and each signal not raised yet: the set is being
    /// given back.
    fn stopping(&self) {
        self.stop.cancel();
        for signal in self.signals.iter() {
            signal.abandon();
        }
    }
}

impl Drop for LeaseSetGuard {
    fn drop(&mut self) {
        meter::guards_held(-1.0);
        self.stopping();
        self.ended.cancel();
        let renewals = self.renewals.take();
        let signals = self.signals.clone();
        if !self.needs_release {
            lower(&signals);
            return;
        }
        let set = self.lease_set();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(owner = %set.owner(), "set guard dropped outside a runtime; the set will expire");
            lower(&signals);
            return;
        };
        let client = self.client.clone();
        runtime.spawn(async move {
            // The renewal task ends first, so that this release is not sent
            // beside a renewal of this guard's own.
            if let Some(renewals) = renewals {
                let _ = renewals.await;
            }
            client.release_set_quietly(&set).await;
            lower(&signals);
        });
    }
}

impl std::fmt::Debug for LeaseSetGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseSetGuard")
            .field("set", &self.lease_set())
            .field("lost", &self.lost_reason())
            .finish_non_exhaustive()
    }
}

fn lower(signals: &[SignalHandle]) {
    for signal in signals {
        signal.lower();
    }
}

/// The renewal task: renews until stopped or lost, and tells the guard.
async fn renew_until_stopped(client: Client, mut report: SetReport, stop: CancellationToken, row: Arc<Mutex<()>>) {
    report.loss = tokio::select! {
        biased;
        _ = stop.cancelled() => None,
        lost = keep_set_renewed(&client, &report.state, &row) => Some(lost),
    };
}

/// What the renewal task tells the guard when it ends, however it ends: a
/// panic or an abort drops it too, and reads as a loss.
struct SetReport {
    state: watch::Sender<HeldSet>,
    ended: CancellationToken,
    signals: Arc<[SignalHandle]>,
    loss: Option<SetLost>,
}

impl Drop for SetReport {
    fn drop(&mut self) {
        if let Some(lost) = self.loss.take() {
            meter::lease_lost(match lost.reason {
                LostReason::Renewal => "renewal",
                _ => "unconfirmed",
            });
            self.state.send_modify(|held| {
                held.lost.get_or_insert(lost);
            });
            self.ended.cancel();
            lower(&self.signals);
        }
    }
}

/// The loss recorded when the renewal task itself failed.
fn died(how: &str) -> SetLost {
    SetLost {
        key: None,
        reason: LostReason::Unconfirmed {
            last_error: Some(format!("the renewal task ended abnormally: {how}")),
        },
    }
}

impl Client {
    /// Releases a set whose outcome no longer depends on it, and says
    /// whether the server answered. A failure is logged, and the set simply
    /// expires.
    pub(crate) async fn release_set_quietly(&self, set: &LeaseSet) -> bool {
        let timeout = self.config.release_timeout;
        match tokio::time::timeout(timeout, self.release_set(set)).await {
            Ok(Ok(_)) => return true,
            Ok(Err(error)) => {
                tracing::warn!(owner = %set.owner(), %error, "set release failed; the set will expire on its own")
            }
            Err(_) => tracing::warn!(
                owner = %set.owner(),
                timeout_ms = timeout.as_millis() as u64,
                "set release did not finish in time; the set will expire on its own"
            ),
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::client::Lease;

    #[tokio::test(start_paused = true)]
    async fn a_set_renewal_task_that_died_counts_as_lost_and_fires_the_token() {
        let client = Client::unreachable(Duration::from_millis(100));
        let hour = Duration::from_secs(3600);
        let set = LeaseSet::new(vec![Lease::for_test_key("a", hour), Lease::for_test_key("b", hour)]);
        let guard = client.guard_set(set);
        let token = guard.token();
        // What a panic in the task also ends in: a JoinError, not a stop.
        guard.renewals.as_ref().expect("renewing").abort();
        let lost = tokio::time::timeout(Duration::from_secs(60), guard.lost())
            .await
            .expect("lost() never resolved after the renewal task died");
        assert_eq!(lost.key, None);
        assert!(matches!(lost.reason, LostReason::Unconfirmed { .. }), "{lost:?}");
        assert!(token.is_cancelled(), "the token outlived the renewals");
    }
}
