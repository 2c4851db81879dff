//! The value a held lease lives in: it renews in the background, says when the
//! lease is lost, and gives the lease back when released or dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::hedged_renew::Renewal;
use super::signal_holder::SignalHandle;
use super::signal_loan::Loan;
use super::{
    BeginFenced, Client, Error, FencedOutcome, FencedTx, Lease, Publish, Release, fenced_transaction, fenced_tx,
};
use super::{meter, span};

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

impl std::fmt::Display for LostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LostReason::Renewal => f.write_str("a renewal answered Lost: the lease expired or was taken over"),
            LostReason::Unconfirmed { last_error: None } => {
                f.write_str("no renewal was confirmed before the lease would end")
            }
            LostReason::Unconfirmed {
                last_error: Some(error),
            } => write!(f, "no renewal was confirmed in time: {error}"),
        }
    }
}

/// How long before the local deadline of an unconfirmed lease the guard
/// declares it lost: 1% of the lease length, at least 100 ms, and at most a
/// tenth of the lease. The local deadline is the earliest the server's lease
/// can end, and only by the local monotonic clock: a timer firing late, a busy
/// runtime, or the server's wall clock slewed or stepped by NTP (or a resumed
/// VM) can end the lease on the server before it. Those drifts grow with the
/// lease, and so does the margin.
pub(crate) fn loss_margin(length: Duration) -> Duration {
    const FLOOR: Duration = Duration::from_millis(100);
    (length / 100).max(FLOOR).min(length / 10)
}

/// What the renewals share with the guard.
#[derive(Clone)]
struct Held {
    /// The lease as last confirmed.
    lease: Lease,
    /// Set once, when the lease is lost.
    lost: Option<LostReason>,
}

/// How the renewal task ended.
pub(crate) enum Ending {
    /// The guard stopped it.
    Stopped,
    /// The lease was lost.
    Lost(LostReason),
    /// A renewal failed for a reason retrying will not fix; the lease is
    /// treated as lost too.
    Failed(Error),
}

/// A held lease, kept renewed in the background about every third of its
/// length until it is released, dropped, or lost. Made by
/// [`Client::guard`].
///
/// A renewal that has no answer after a quarter of the time left is sent
/// again on a second connection, with the first left running, so a
/// connection that went silent leaves most of the time for the other. That
/// second connection is the client's one spare for all its guards: a guard
/// whose renewals hang holds two renewal connections at most, and never
/// keeps another guard's first attempt from its own.
///
/// If a renewal answers `Lost`, or none is confirmed some margin
/// before the lease would end on the local clock, the lease is lost:
/// [`lost`](LeaseGuard::lost) resolves and [`token`](LeaseGuard::token) is
/// cancelled. The margin is 1% of the lease length, at least 100 ms and at
/// most a tenth of the lease (100 ms up to a 10 s lease, 600 ms for a minute,
/// 36 s for an hour), so the loss is signalled before the server's clock,
/// which judges the lease, can have ended it. The guard never re-acquires.
///
/// Dropping the guard stops the renewals and releases the lease in the
/// background, bounded by the client's release timeout, so a successor can
/// take it at once instead of waiting for it to expire.
///
/// While it holds the lease, a guard also keeps the lease's handover signal
/// raised: an exclusive session application lock named after the key, on
/// one of the two sessions its client keeps for every guard's signal, taken
/// in the background 10 ms after the guard is made, so a quicker tenure
/// costs no signal. The guard's last call (its release, or a publish that
/// releases) is sent on the session holding the signal and lets go of it in
/// the same request, right after the fence row was given back, so a
/// [`acquire_waiting`](Client::acquire_waiting) blocked on it wakes as the
/// release commits, before the release has even answered; a lease lost, or
/// a last call made elsewhere (the session busy, another guard of the client
/// holding the same signal), lets go of it right after. The lock decides
/// nothing: the fence row alone grants the lease.
#[must_use = "dropping the guard releases the lease"]
pub struct LeaseGuard {
    client: Client,
    state: watch::Receiver<Held>,
    /// Stops the renewal task.
    stop: CancellationToken,
    /// Cancelled when the lease is lost, released or dropped.
    ended: CancellationToken,
    /// The handover signal (see `handover`): abandoned (never raised, if not
    /// yet) when the guard begins giving the lease back, and lowered once the
    /// lease is given back for sure, or lost, or at the latest when a dropped
    /// guard's background release ended, never before: a waiter woken while
    /// the lease is still held would only find it busy.
    signal: SignalHandle,
    /// Held by each renewal attempt and by each fenced transaction of this
    /// guard, so a renewal never waits on the row lock of its own holder.
    row: Arc<Mutex<()>>,
    /// Set while a fenced transaction of this guard is open (its
    /// [`Claim`](fenced_tx::Claim)): the guard's other calls on the row are
    /// refused rather than left to wait on their own holder.
    transaction_open: Arc<AtomicBool>,
    /// `None` once the renewals were stopped.
    renewals: Option<JoinHandle<Ending>>,
    /// Whether the lease may still be held by this guard: cleared only once
    /// it is given back for sure (a release answered, an accepted
    /// publish-and-release) or a renewal answered `Lost`. A future dropped
    /// after it stopped the renewals, in the middle of a publish or a
    /// release, leaves it set, and the drop releases in the background.
    needs_release: bool,
}

impl Client {
    /// Keeps `lease` renewed in the background and returns the guard that
    /// holds it. Must be called inside a tokio runtime.
    ///
    /// ```no_run
    /// # async fn rebuild(stop: fencepost::CancellationToken) -> String { String::new() }
    /// # async fn service(client: fencepost::Client) -> Result<(), fencepost::client::Error> {
    /// use std::time::Duration;
    ///
    /// use fencepost::client::{Acquire, Publish};
    ///
    /// if let Acquire::Acquired(lease) = client.acquire("report:daily", Duration::from_secs(30)).await? {
    ///     let guard = client.guard(lease);
    ///     // The token is cancelled if a renewal finds the lease lost.
    ///     let payload = rebuild(guard.token()).await;
    ///     match guard.publish_and_release(uuid::Uuid::new_v4(), &payload).await? {
    ///         Publish::Published => println!("published"),
    ///         other => println!("not published: {other:?}"),
    ///     }
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn guard(&self, lease: Lease) -> LeaseGuard {
        meter::guards_held(1.0);
        let span = span::renewals_span(&lease);
        let stop = CancellationToken::new();
        // A guard that stops renewing is giving the lease back: a signal
        // not raised by then is not raised (see `stop`).
        let signal = self.raise_signal(lease.key());
        let (sender, state) = watch::channel(Held { lease, lost: None });
        let ended = CancellationToken::new();
        let row = Arc::new(Mutex::new(()));
        // Made before the task starts: an abort before its first poll drops
        // the report with it, and that too is a loss.
        let report = Report {
            state: sender,
            ended: ended.clone(),
            signal: signal.clone(),
            loss: Some(died("it panicked or was aborted")),
        };
        let renewals =
            tokio::spawn(renew_until_stopped(self.clone(), report, stop.clone(), row.clone()).instrument(span));
        LeaseGuard {
            client: self.clone(),
            state,
            stop,
            ended,
            signal,
            row,
            transaction_open: Arc::new(AtomicBool::new(false)),
            renewals: Some(renewals),
            needs_release: true,
        }
    }
}

impl LeaseGuard {
    /// The lease as last confirmed: its expiry and local deadline move with
    /// each renewal.
    pub fn lease(&self) -> Lease {
        self.state.borrow().lease.clone()
    }

    /// Why the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.state.borrow().lost.clone()
    }

    /// Resolves when the lease is lost: a renewal answered `Lost`, none
    /// could be confirmed in time, or the renewal task itself died (a panic),
    /// so that nothing renews it any more. Never resolves while the lease is
    /// held.
    pub async fn lost(&self) -> LostReason {
        let mut state = self.state.clone();
        let lost = match state.wait_for(|held| held.lost.is_some()).await {
            Ok(held) => held.lost.clone(),
            Err(_) => None,
        };
        match lost {
            Some(reason) => reason,
            // The renewals stopped without a loss: the guard is being released.
            None => std::future::pending().await,
        }
    }

    /// A token cancelled when the lease is lost, released or dropped: hand it
    /// to work that must stop when the lease ends.
    pub fn token(&self) -> CancellationToken {
        self.ended.child_token()
    }

    /// Begins a transaction fenced by this lease: it holds the fence row's
    /// lock until it ends, so the service's own writes in it commit only
    /// while the lease is held (see [`FencedTx`]). While it is open, this
    /// guard's renewals wait for it instead of queueing on the row's lock,
    /// and renew right after it ends; keep it well shorter than the lease,
    /// or the guard gives the lease up as unconfirmed. One transaction per
    /// guard at a time: a second one, or a publish through this guard, asked
    /// for while it is open answers [`Error::FencedTransactionOpen`] at once
    /// instead of waiting on the row this transaction holds.
    pub async fn begin_fenced(&self) -> Result<BeginFenced<'_>, Error> {
        self.begin(None).await
    }

    /// [`begin_fenced`](LeaseGuard::begin_fenced) for writes built from
    /// version `source_version` of their source, as
    /// [`Client::begin_fenced_versioned_without_guard`] describes.
    pub async fn begin_fenced_versioned(&self, source_version: i64) -> Result<BeginFenced<'_>, Error> {
        self.begin(Some(source_version)).await
    }

    async fn begin(&self, source_version: Option<i64>) -> Result<BeginFenced<'_>, Error> {
        let state = self.state.clone();
        let current = Box::new(move || state.borrow().lease.clone());
        let Some(claim) = fenced_tx::Claim::take(&self.row, &self.transaction_open, current) else {
            return Err(Error::FencedTransactionOpen { call: "begin_fenced" });
        };
        let lease = self.lease();
        fenced_tx::begin(&self.client, &lease, Some(claim), source_version).await
    }

    /// Refuses `call` while this guard's fenced transaction holds the row.
    fn outside_transaction(&self, call: &'static str) -> Result<(), Error> {
        if self.transaction_open.load(Ordering::Acquire) {
            return Err(Error::FencedTransactionOpen { call });
        }
        Ok(())
    }

    /// Runs `work` in a transaction fenced by this lease
    /// ([`begin_fenced`](LeaseGuard::begin_fenced)) and commits only if the
    /// work succeeds. A future that awaits this may not be `Send` when the
    /// work borrows locals (a limit of async closures in today's Rust); in a
    /// spawned task use [`begin_fenced`](LeaseGuard::begin_fenced).
    ///
    /// The service's own rows, written only while the lease is held: the
    /// transaction locks the fence row first, and commits only if the lease
    /// is still this guard's then.
    ///
    /// ```no_run
    /// # async fn service(client: fencepost::Client, lease: fencepost::client::Lease) -> Result<(), fencepost::client::Error> {
    /// use fencepost::client::FencedOutcome;
    ///
    /// let guard = client.guard(lease);
    /// let generation = guard.lease().generation();
    /// let written = guard
    ///     .fenced_transaction(async |tx| {
    ///         tx.execute(
    ///             "INSERT INTO dbo.ReportRow (Generation, Line) VALUES (@P1, @P2)",
    ///             &[&generation, &"total: 42"],
    ///         )
    ///         .await
    ///     })
    ///     .await?;
    /// match written {
    ///     FencedOutcome::Committed(rows) => println!("{rows} row(s) committed under generation {generation}"),
    ///     FencedOutcome::Refused(reason) => println!("a newer holder took over, nothing committed: {reason:?}"),
    ///     FencedOutcome::Failed(error) => println!("the statement failed, rolled back: {error}"),
    ///     other => println!("{other:?}"),
    /// }
    /// guard.release().await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn fenced_transaction<T, E>(
        &self,
        work: impl AsyncFnOnce(&mut FencedTx<'_>) -> Result<T, E>,
    ) -> Result<FencedOutcome<T, E>, Error> {
        let lease = self.lease();
        let span = span::fenced_transaction_span(&lease);
        fenced_transaction::traced(
            async { fenced_transaction::around(self.begin_fenced().await?, work).await },
            span,
        )
        .await
    }

    /// [`fenced_transaction`](LeaseGuard::fenced_transaction) for writes
    /// built from version `source_version` of their source: `Refused(StaleSource)`
    /// when a newer source was already published or committed.
    pub async fn fenced_transaction_versioned<T, E>(
        &self,
        source_version: i64,
        work: impl AsyncFnOnce(&mut FencedTx<'_>) -> Result<T, E>,
    ) -> Result<FencedOutcome<T, E>, Error> {
        let lease = self.lease();
        let span = span::fenced_transaction_span(&lease);
        let run = async { fenced_transaction::around(self.begin_fenced_versioned(source_version).await?, work).await };
        fenced_transaction::traced(run, span).await
    }

    /// Publishes `payload` under this guard's lease, as [`Client::publish`]
    /// does. The lease stays held and renewed: publishing does not end it.
    /// Refused with [`Error::FencedTransactionOpen`] while this guard's
    /// fenced transaction is open, whose lock the publish would wait on.
    pub async fn publish(&self, operation_id: Uuid, payload: &str) -> Result<Publish, Error> {
        self.outside_transaction("publish")?;
        self.client.publish(&self.lease(), operation_id, payload).await
    }

    /// Publishes a result built from version `source_version` of its source,
    /// as [`Client::publish_versioned`] does; the lease stays held.
    pub async fn publish_versioned(
        &self,
        operation_id: Uuid,
        payload: &str,
        source_version: i64,
    ) -> Result<Publish, Error> {
        self.outside_transaction("publish_versioned")?;
        self.client
            .publish_versioned(&self.lease(), operation_id, payload, source_version)
            .await
    }

    /// Publishes `payload` and gives the lease back in the same call, as
    /// [`Client::publish_and_release`] does, after stopping the renewals. A
    /// renewal sent after an accepted publish released the lease would answer
    /// `Lost`, and a published result must never read as a lost lease.
    ///
    /// A refused publish, an error, or a future dropped before the answer
    /// leaves the lease to be released in the background, as a dropped guard
    /// does. An unknown outcome is settled by a replay with the same
    /// operation id under [`lease`](LeaseGuard::lease), taken before this
    /// call: `AlreadyPublished` if it committed, otherwise a refusal, since
    /// a released lease is never revived.
    pub async fn publish_and_release(self, operation_id: Uuid, payload: &str) -> Result<Publish, Error> {
        self.publish_releasing(operation_id, payload, None).await
    }

    /// [`publish_and_release`](LeaseGuard::publish_and_release) for a result
    /// built from version `source_version` of its source
    /// ([`Client::publish_versioned_and_release`]). A `StaleSource` refusal
    /// leaves the lease held, so it is released in the background as after
    /// any refusal.
    pub async fn publish_versioned_and_release(
        self,
        operation_id: Uuid,
        payload: &str,
        source_version: i64,
    ) -> Result<Publish, Error> {
        self.publish_releasing(operation_id, payload, Some(source_version))
            .await
    }

    async fn publish_releasing(
        mut self,
        operation_id: Uuid,
        payload: &str,
        source_version: Option<i64>,
    ) -> Result<Publish, Error> {
        self.stop_renewing().await;
        let loan = self.signal.borrow().await;
        let answer = self
            .client
            .publish_with(&self.lease(), operation_id, payload, true, source_version, loan)
            .await;
        if matches!(answer, Ok(Publish::Published | Publish::AlreadyPublished)) {
            self.needs_release = false;
        }
        answer
    }

    /// Stops the renewals and gives the lease back. A lease already lost to a
    /// successor answers `NotHolder` without a call. If the call fails, or
    /// this future is dropped before it answers, the lease is released in the
    /// background as a dropped guard's is.
    pub async fn release(mut self) -> Result<Release, Error> {
        self.stop_renewing().await;
        self.ended.cancel();
        if self.lost_reason() == Some(LostReason::Renewal) {
            self.needs_release = false;
            return Ok(Release::NotHolder);
        }
        let loan = self.signal.borrow().await;
        let answer = self.client.release_via(&self.lease(), loan).await;
        if answer.is_ok() {
            self.needs_release = false;
        }
        answer
    }

    /// Stops the renewals and releases, bounded by the release timeout; a
    /// failure is logged. A future dropped before the release answered
    /// leaves the release to the background.
    pub(crate) async fn release_quietly(mut self) {
        self.stop_renewing().await;
        if self.lost_reason() == Some(LostReason::Renewal) {
            self.needs_release = false;
            return;
        }
        let loan = self.signal.borrow().await;
        if self.client.release_quietly_via(&self.lease(), loan).await {
            self.needs_release = false;
        }
    }

    /// Stops the renewals, waiting until a renewal in flight has given its
    /// connection back, and returns how they ended (`None` when already
    /// stopped). The lease stays held until released or dropped.
    pub(crate) async fn stop_renewing(&mut self) -> Option<Ending> {
        let renewals = self.renewals.take()?;
        self.stopping();
        Some(match renewals.await {
            Ok(ending) => ending,
            // The task panicked or was aborted: nobody renews any more, so the
            // lease is as good as lost (its `Report` already said so).
            Err(error) => Ending::Lost(self.lost_reason().unwrap_or_else(|| died(&error.to_string()))),
        })
    }

    /// Forgets the lease without releasing it, after it was given back by an
    /// accepted publish-and-release or lost to a successor.
    pub(crate) fn forget(mut self) {
        self.stopping();
        self.renewals = None;
        self.needs_release = false;
    }
}

impl LeaseGuard {
    /// Stops the renewals, and the signal if it is not raised yet: the
    /// lease is being given back.
    fn stopping(&self) {
        self.stop.cancel();
        self.signal.abandon();
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        meter::guards_held(-1.0);
        self.stopping();
        self.ended.cancel();
        let renewals = self.renewals.take();
        let signal = self.signal.clone();
        if !self.needs_release || self.lost_reason() == Some(LostReason::Renewal) {
            signal.lower();
            return;
        }
        let lease = self.lease();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::debug!(
                key = lease.key(),
                "guard dropped outside a runtime; the lease will expire"
            );
            signal.lower();
            return;
        };
        let client = self.client.clone();
        runtime.spawn(async move {
            // The renewal task ends first, so that this release is not sent
            // beside a renewal of this guard's own. A renewal request it
            // abandoned may still run on the server after the release; that
            // is harmless, since a released lease is never renewed.
            if let Some(renewals) = renewals {
                let _ = renewals.await;
            }
            let loan = signal.borrow().await;
            client.release_quietly_via(&lease, loan).await;
            signal.lower();
        });
    }
}

impl std::fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("lease", &self.lease())
            .field("lost", &self.lost_reason())
            .finish_non_exhaustive()
    }
}

/// The renewal task: renews until stopped or lost, and tells the guard.
async fn renew_until_stopped(
    client: Client,
    mut report: Report,
    stop: CancellationToken,
    row: Arc<Mutex<()>>,
) -> Ending {
    let ending = tokio::select! {
        biased;
        _ = stop.cancelled() => Ending::Stopped,
        ending = keep_renewed(&client, &report.state, &row) => ending,
    };
    report.loss = match &ending {
        Ending::Lost(reason) => Some(reason.clone()),
        Ending::Failed(error) => Some(LostReason::Unconfirmed {
            last_error: Some(error.to_string()),
        }),
        Ending::Stopped => None,
    };
    ending
}

/// What the renewal task tells the guard when it ends, however it ends: it
/// reports `loss` on drop, so a panic or an abort, which drops it too, reads
/// as a loss rather than as a quiet stop.
struct Report {
    state: watch::Sender<Held>,
    ended: CancellationToken,
    signal: SignalHandle,
    loss: Option<LostReason>,
}

impl Drop for Report {
    fn drop(&mut self) {
        if let Some(reason) = self.loss.take() {
            meter::lease_lost(match reason {
                LostReason::Renewal => "renewal",
                _ => "unconfirmed",
            });
            self.state.send_modify(|held| {
                held.lost.get_or_insert(reason);
            });
            self.ended.cancel();
            self.signal.lower();
        }
    }
}

/// The loss recorded when the renewal task itself failed.
fn died(how: &str) -> LostReason {
    LostReason::Unconfirmed {
        last_error: Some(format!("the renewal task ended abnormally: {how}")),
    }
}

/// Renews until the lease is lost; never returns while it is held.
async fn keep_renewed(client: &Client, state: &watch::Sender<Held>, row: &Mutex<()>) -> Ending {
    let mut lease = state.borrow().lease.clone();
    let length = lease.length();
    let period = length / 3;
    let retry_pause = (period / 4).max(Duration::from_millis(50));
    let ahead = loss_margin(length);
    loop {
        let give_up = lease.local_deadline() - ahead;
        // On the client's grid of ticks, so the guards due together renew
        // in one call (see `renewal_batch`).
        let next = client
            .renewal_batches
            .tick_of(lease.local_deadline() - length + period, period);
        tokio::time::sleep_until(next.min(give_up)).await;
        // A fenced transaction of this guard holds the row: wait for its
        // commit rather than queue a renewal behind its lock.
        let Ok(_row) = tokio::time::timeout_at(give_up, row.lock()).await else {
            return unconfirmed(None);
        };
        if Instant::now() >= give_up {
            return unconfirmed(None);
        }
        match client.renew_together(&lease, give_up, retry_pause).await {
            Renewal::Renewed(renewed) => {
                lease = renewed;
                state.send_modify(|held| held.lease = lease.clone());
            }
            Renewal::Lost(()) => return Ending::Lost(LostReason::Renewal),
            Renewal::Failed(error) => return Ending::Failed(error),
            Renewal::Unanswered { last_error } => return unconfirmed(last_error),
        }
    }
}

fn unconfirmed(last_error: Option<String>) -> Ending {
    let waited = "no renewal was answered before the lease would end".to_string();
    Ending::Lost(LostReason::Unconfirmed {
        last_error: last_error.or(Some(waited)),
    })
}

impl Client {
    /// Releases a lease whose outcome no longer depends on it, and says
    /// whether the server answered. A failure here is logged, and the lease
    /// simply expires.
    pub(crate) async fn release_quietly(&self, lease: &Lease) -> bool {
        self.release_quietly_via(lease, None).await
    }

    /// [`release_quietly`](Client::release_quietly) on the session `loan`
    /// lent, when there is one (see `signal_loan`).
    pub(crate) async fn release_quietly_via(&self, lease: &Lease, loan: Option<Loan>) -> bool {
        let timeout = self.config.release_timeout;
        match tokio::time::timeout(timeout, self.release_via(lease, loan)).await {
            Ok(Ok(Release::Released)) => return true,
            Ok(Ok(Release::NotHolder)) => {
                tracing::debug!(
                    key = lease.key(),
                    generation = lease.generation(),
                    "lease had already ended"
                );
                return true;
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
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::MAX_LEASE;

    #[test]
    fn the_loss_margin_grows_with_the_lease_between_its_floor_and_a_tenth() {
        let ms = Duration::from_millis;
        let s = Duration::from_secs;
        // A tenth of a lease shorter than a second; the floor up to 10 s.
        assert_eq!(loss_margin(ms(500)), ms(50));
        assert_eq!(loss_margin(s(1)), ms(100));
        assert_eq!(loss_margin(s(10)), ms(100));
        // Then 1%.
        assert_eq!(loss_margin(s(11)), ms(110));
        assert_eq!(loss_margin(s(60)), ms(600));
        assert_eq!(loss_margin(s(3600)), s(36));
        assert_eq!(loss_margin(MAX_LEASE), s(864));
    }

    #[test]
    fn a_lost_reason_reads_as_a_sentence_with_its_cause() {
        assert_eq!(
            LostReason::Renewal.to_string(),
            "a renewal answered Lost: the lease expired or was taken over"
        );
        let unconfirmed = LostReason::Unconfirmed {
            last_error: Some("no connection available: cannot connect to db:1433".into()),
        };
        assert_eq!(
            unconfirmed.to_string(),
            "no renewal was confirmed in time: no connection available: cannot connect to db:1433"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_task_that_died_counts_as_lost() {
        let client = Client::unreachable(Duration::from_millis(100));
        for started in [false, true] {
            let mut guard = client.guard(Lease::for_test(Duration::from_secs(3600)));
            let token = guard.token();
            if started {
                tokio::task::yield_now().await;
            }
            // What a panic in the task also ends in: a JoinError, not a stop.
            guard.renewals.as_ref().expect("renewing").abort();
            let reason = tokio::time::timeout(Duration::from_secs(60), guard.lost())
                .await
                .expect("lost() never resolved after the renewal task died");
            assert!(matches!(reason, LostReason::Unconfirmed { .. }), "{reason:?}");
            assert!(token.is_cancelled(), "the token outlived the renewals");
            assert!(matches!(guard.stop_renewing().await, Some(Ending::Lost(_))));
        }
    }
}
