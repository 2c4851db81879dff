//! Acquiring with a deadline: wait for the holder's lease to run out, or
//! for its guard's handover signal, rather than polling at a fixed rate.

use std::time::Duration;

use rand::RngExt;
use tokio::time::Instant;
use uuid::Uuid;

use super::contract::Procedure;
use super::handover::{Waited, Woke};
use super::queue::Place;
use super::{Acquire, Client, Error};

/// The shortest pause between attempts.
const MIN_PAUSE: Duration = Duration::from_millis(20);
/// The longest pause while the holder's expiry looks already past on the
/// local clock (clock skew, or a holder that just renewed).
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// The longest pause between attempts however long the holder's lease: a
/// lease released early is noticed within about this long, not at its
/// expiry.
const RECHECK: Duration = Duration::from_secs(1);
/// How long after a grant its guard raises the handover signal, with room
/// to spare: a waiter that finds no signal where a new tenure began waits
/// this long before it blocks on one (see `handover::RAISE_AFTER`).
pub(super) const SETTLE: Duration = Duration::from_millis(40);
/// The head of a queue settles for a new tenure's signal in steps of this
/// long, up to [`SETTLE`] in all: a guard raises its signal 10 ms after its
/// grant (`signal_holder::RAISE_AFTER`), so the head blocks on it after one
/// step, before a short tenure (a job of 20 ms) has ended, and is woken by
/// its release.
const SETTLE_STEP: Duration = Duration::from_millis(14);
/// How many attempts' worth of time (checkout plus call timeout each) an
/// acquire may spend retrying as the same owner.
const CONFIRM_ATTEMPTS: u32 = 3;

impl Client {
    /// Acquires the lease on `key`, waiting up to `wait` while it is busy.
    ///
    /// After a `Busy`, the next attempt is timed by the lease's `remaining`
    /// time as the server judged it, counted on the local monotonic clock from
    /// when the request was sent (the wall clocks of caller and server are
    /// never compared), plus a random jitter so that waiters do not all
    /// arrive at once. When the lease had already run out (the holder's
    /// expiry is being processed, or it just renewed), the pause grows
    /// exponentially instead. No pause is longer than a second, so a lease
    /// its holder released early is taken within about a second rather than
    /// at its expiry. One last attempt is made at the deadline; if it
    /// is still busy, that `Busy` is returned. `NotProvisioned` and errors
    /// return at once: a failure is never turned into `Busy`. Contention
    /// is not a failure: an attempt that gave up waiting for the fence row,
    /// which another transaction held longer than `Acquire` waits (5 s),
    /// granted nothing and is `Busy` with the holder's end unknown, so the
    /// waiter asks again until its deadline, on every engine.
    ///
    /// Waiters on one key are served in about the order they came. After
    /// its first `Busy`, a waiter joins the key's queue, an application lock
    /// the engine grants in the order it was asked for (see `queue`), and
    /// keeps one signal session for the whole wait. Only the head of the
    /// queue waits for the lease itself: a holder whose lease is in a
    /// [`LeaseGuard`](super::LeaseGuard) holds its handover signal, an
    /// application lock named after the key, and lets go of it right after
    /// its release; the head spends each pause blocked on that lock, in the
    /// same request as its next `Acquire`, so the engine wakes it when the
    /// holder lets go, and it takes the lease about one round trip after the
    /// release. A head answered `Busy` keeps its place; one that acquired
    /// hands it to the next waiter. The locks decide nothing. A head that
    /// finds the signal free while the lease is busy (a holder without a
    /// guard, one whose session ended, a frozen one's successor) settles
    /// for the holder's signal for up to 40 ms, then sleeps its pause and
    /// polls, as above; a waiter that is not the head within its pause (a
    /// head whose process froze) polls with a plain `Acquire`. No wait on a
    /// lock is longer than the pause, so no lease is taken later than polling
    /// would take it, and a waiter sends one request per pause either way.
    ///
    /// The first attempt is a plain `Acquire`, outside the queue: a lease
    /// nobody holds is taken at once, even with waiters queued (a release
    /// whose head has not yet asked, a holder without a guard that woke no
    /// one). That bypass is bounded to one attempt per call, and a head that
    /// loses the lease so keeps its place and blocks on the new holder's
    /// signal. A worker that releases a key in a guard and at once waits for
    /// it again would take that path on almost every cycle, racing the head
    /// its release woke; so when this client's guard let go of the key
    /// within the last 100 ms, having held it long enough to raise its
    /// signal (10 ms), the first attempt is a queued one: the worker goes
    /// behind those who waited, and a key nobody waits for costs it the
    /// queue's lock, granted at once, and one more request to let go of it.
    ///
    /// Every attempt uses the same owner id. An attempt whose reply was lost
    /// (a network error or a timeout) may have taken the lease, so it is
    /// retried as the same owner, which confirms that grant instead of
    /// blocking the key under an owner nobody knows; so is a transient server
    /// error (a deadlock, a failover). A failure before anything was sent (no
    /// connection) returns at once, unless an earlier attempt may have
    /// reached the server. Those retries end after the lease length or after
    /// a few call timeouts, whichever comes first, counted from the attempt's
    /// first send: confirming a grant is not waiting, so a short or zero
    /// `wait` does not cut it short. Other retries (a deadlock, a failover)
    /// also end at the deadline.
    pub async fn acquire_waiting(&self, key: &str, length: Duration, wait: Duration) -> Result<Acquire, Error> {
        // `Duration::MAX` is a natural "for ever"; it must not overflow.
        let deadline = later(Instant::now(), wait);
        let owner = Uuid::new_v4();
        let mut backoff = Backoff::default();
        let started = Instant::now();
        // The wait's session and its place in the key's queue, kept across
        // attempts; let go of however the wait ends (see `queue`).
        let mut place = Place::default();
        // The first attempt is outside the queue: a lease nobody holds is
        // taken at the cost of an `acquire`. A worker coming back for a key
        // its guard has just let go of joins the queue at once instead, so
        // it never races the head its release woke (see `handed_over`).
        let mut next = if self.signal_holders.handed_over_lately(&super::handover::resource(key)) {
            Attempt::Queued(deadline.saturating_duration_since(Instant::now()).min(RECHECK))
        } else {
            Attempt::Plain
        };
        // How long the head has settled for a new tenure's signal since it
        // last saw one; past SETTLE, the holder gives none and is polled.
        let mut settled = Duration::ZERO;
        loop {
            let retries = Retries {
                confirm_until: self.confirm_until(Instant::now(), length),
                deadline,
            };
            let attempt = self
                .acquire_retrying_timed(key, owner, length, retries, next, &mut place)
                .await;
            let (answer, sent_at, woke) = match attempt {
                Ok(answered) => answered,
                Err(error) => {
                    place.leave(self.config.call_timeout);
                    return Err(error);
                }
            };
            let Acquire::Busy { remaining, .. } = answer else {
                if matches!(answer, Acquire::Acquired(_)) {
                    super::meter::handover_wait(started.elapsed());
                }
                place.leave(self.config.call_timeout);
                return Ok(answer);
            };
            let Some(pause) = backoff.pause_before(deadline, remaining, sent_at) else {
                place.leave(self.config.call_timeout);
                return Ok(answer);
            };
            next = match woke {
                // The first Busy: join the queue at once, so the order of
                // the queue is the order the waiters came in. Behind the
                // head, or the head behind a signal held for its whole wait:
                // queue, or block on the signal, again.
                None | Some(Woke::Behind | Woke::Held) => {
                    settled = Duration::ZERO;
                    Attempt::Queued(pause)
                }
                // The head, woken by a release, lost the lease to another
                // caller (one whose first, plain attempt found it free), or
                // found no signal: a new tenure's guard raises its signal a
                // moment after its grant, so settle for a short step and
                // block on it then, keeping its place; a holder that raised
                // none within SETTLE gives none, and is polled.
                Some(Woke::Granted(Waited::AfterRelease)) => {
                    settled = SETTLE_STEP.min(pause);
                    tokio::time::sleep(settled).await;
                    Attempt::Queued(pause - settled)
                }
                Some(Woke::Granted(Waited::Free)) if settled < SETTLE => {
                    let step = SETTLE_STEP.min(pause);
                    settled += step;
                    tokio::time::sleep(step).await;
                    Attempt::Queued(pause - step)
                }
                // No signal to block on: this holder gives none (no guard, a
                // dead one's lease running out), or there is no session to
                // queue on. Poll as without a signal, and learn with that
                // poll whether one was raised.
                Some(Woke::Granted(Waited::Free) | Woke::NoSession) => {
                    tokio::time::sleep(pause).await;
                    Attempt::Queued(Duration::ZERO)
                }
            };
        }
    }
}

/// Until when an acquire tries again as the same owner.
#[derive(Clone, Copy, Debug)]
pub(super) struct Retries {
    /// The end of the retries that confirm a grant whose reply was lost
    /// (see [`Client::confirm_until`]).
    pub(super) confirm_until: Instant,
    /// The end of any other retry: the caller's deadline.
    pub(super) deadline: Instant,
}

impl Retries {
    /// The same end for every retry.
    pub(super) fn until(end: Instant) -> Retries {
        Retries {
            confirm_until: end,
            deadline: end,
        }
    }

    /// When retrying ends, once an attempt may have reached the server
    /// (`reached`) or not.
    pub(super) fn end(self, reached: bool) -> Instant {
        if reached {
            self.confirm_until
        } else {
            self.confirm_until.min(self.deadline)
        }
    }
}

/// How [`Client::acquire_waiting`] makes its next attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attempt {
    /// A plain `Acquire`.
    Plain,
    /// Queued for at most this long: waits to be the head of the key's
    /// queue, then blocks on the handover signal, then `Acquire`, in one
    /// request (see `queue`).
    Queued(Duration),
}

impl Client {
    /// Acquires once as `owner`, retrying as [`retry_acquire`] allows with
    /// the same owner until `until` (see [`confirm_until`](Client::confirm_until)):
    /// the contract makes that retry idempotent, so a lost reply never leaves
    /// the lease held by an owner nobody knows.
    pub(crate) async fn acquire_retrying(
        &self,
        key: &str,
        owner: Uuid,
        length: Duration,
        until: Instant,
    ) -> Result<Acquire, Error> {
        let mut place = Place::default();
        Ok(self
            .acquire_retrying_timed(key, owner, length, Retries::until(until), Attempt::Plain, &mut place)
            .await?
            .0)
    }

    /// [`acquire_retrying`](Client::acquire_retrying), with the instant the
    /// answered attempt's `Acquire` was sent and, when `first` is a queued
    /// attempt, how its wait ended; `place` is the wait's place in the queue,
    /// kept for its next attempt. Retries are plain: a lost reply is
    /// confirmed at once.
    async fn acquire_retrying_timed(
        &self,
        key: &str,
        owner: Uuid,
        length: Duration,
        retries: Retries,
        first: Attempt,
        place: &mut Place,
    ) -> Result<(Acquire, Instant, Option<Woke>), Error> {
        let mut pause = MIN_PAUSE;
        let mut reached = false;
        let mut attempt = first;
        loop {
            let this = std::mem::replace(&mut attempt, Attempt::Plain);
            let sent_at = Instant::now();
            let answered = self.attempt_to_its_end(key, owner, length, this, place).await;
            match answered {
                // Another transaction held the fence row longer than Acquire
                // waits for it, and this attempt's own transaction rolled
                // back: nothing was granted, so this is contention, never an
                // error, on either engine: Busy, the holder's end unknown.
                // Unless an earlier attempt's reply was lost: only an answer
                // to the same owner confirms or rules out its grant, so that
                // is asked again below.
                Err(error) if error.gave_up_waiting_for_the_row() && !reached => {
                    return Ok((Acquire::busy_end_unknown(), sent_at, None));
                }
                // The queue's or the signal's part of the batch failed (an
                // engine or a grant that refuses application locks, a reply
                // of another shape): its Acquire may have run, so ask again
                // at once, plainly, as the same owner. The locks are only
                // wake-up calls.
                Err(error) if matches!(this, Attempt::Queued(_)) && signal_failed(&error) => {
                    tracing::debug!(key, %owner, %error, "a waiting attempt failed; asking again without the signal");
                    reached = true;
                }
                Err(error)
                    if retry_acquire(&error, &mut reached) && later(Instant::now(), pause) < retries.end(reached) =>
                {
                    tracing::debug!(key, %owner, %error, "acquire failed; retrying with the same owner");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_BACKOFF);
                }
                other => return other,
            }
        }
    }

    /// One attempt, run to its end on a task of its own. A caller that stops
    /// waiting for it (a timeout around `acquire_waiting`, a `select!` at
    /// shutdown) must not leave a grant behind for an owner nobody holds: a
    /// queued attempt's request waits for the queue and the holder's signal
    /// and runs its Acquire when they are let go of, and a request the client
    /// stopped reading goes on on the server (Babelfish reads no Attention in
    /// the middle of a request, and notices a closed connection only when it
    /// answers). The task reads the answer whatever the caller does, and
    /// gives back, as a dropped guard would, a lease it took for a caller
    /// that is gone; a place in the queue it holds for such a caller is let
    /// go of with its session. A reply lost on the wire stays what it is:
    /// such a grant runs out at the lease's end.
    async fn attempt_to_its_end(
        &self,
        key: &str,
        owner: Uuid,
        length: Duration,
        attempt: Attempt,
        place: &mut Place,
    ) -> Result<(Acquire, Instant, Option<Woke>), Error> {
        let (client, key) = (self.clone(), key.to_string());
        match attempt {
            Attempt::Plain => {
                self.to_its_end(Procedure::Acquire, async move {
                    client
                        .acquire_timed(&key, owner, length)
                        .await
                        .map(|(answer, sent_at)| (answer, sent_at, None))
                })
                .await
            }
            Attempt::Queued(wait) => {
                let taken = std::mem::take(place);
                let queued = self
                    .to_its_end(Procedure::Acquire, async move {
                        client.acquire_queued(&key, owner, length, wait, taken).await
                    })
                    .await;
                *place = queued.place;
                queued.answer
            }
        }
    }

    /// The end of the retries of an acquire started at `start`: a few
    /// attempts' worth of checkout and call timeouts, so a server that stays
    /// down ends the call in minutes, and never past the lease length, after
    /// which a grant whose reply was lost has expired anyway.
    pub(crate) fn confirm_until(&self, start: Instant, length: Duration) -> Instant {
        let attempt = self.config.checkout_timeout.saturating_add(self.config.call_timeout);
        later(start, attempt.saturating_mul(CONFIRM_ATTEMPTS).min(length))
    }
}

/// Whether an acquire that failed with `error` is tried again as the same
/// owner; `reached` remembers whether any attempt so far may have reached the
/// server.
pub(crate) fn retry_acquire(error: &Error, reached: &mut bool) -> bool {
    match error {
        // Sent, perhaps granted: only the same owner can find out.
        Error::Network { .. } => {
            *reached = true;
            true
        }
        // The server answered and granted nothing; a deadlock, a failover or
        // another transaction's hold on the fence row passes.
        _ if error.server_number().is_some() => error.is_transient() || error.gave_up_waiting_for_the_row(),
        // Nothing was sent this time. Retrying matters only to confirm an
        // earlier attempt's grant; otherwise the caller hears of it at once.
        _ => *reached && error.is_transient(),
    }
}

/// Whether a waiting attempt's `error` may be the signal's own, not the
/// fence's: any server error but the contract's refusals, and a reply of
/// another shape. A deadlock or a failover is the retry's to handle.
fn signal_failed(error: &Error) -> bool {
    match error {
        Error::Server { .. } => !error.is_transient(),
        Error::UnexpectedReply { .. } => true,
        _ => false,
    }
}

/// `instant + duration`, or a far-future instant where that sum would not be
/// representable (a wait "for ever" is `Duration::MAX`), as tokio's own
/// timeouts do.
pub(crate) fn later(instant: Instant, duration: Duration) -> Instant {
    const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);
    instant
        .checked_add(duration)
        .or_else(|| instant.checked_add(FAR))
        .unwrap_or(instant)
}

/// Chooses the pause before the next attempt.
#[derive(Default)]
pub(super) struct Backoff {
    /// Attempts in a row that found the holder's expiry already past locally.
    stale: u32,
}

impl Backoff {
    /// The pause before the next attempt of a waiter whose last attempt,
    /// sent at `sent_at`, found the lease busy for `remaining` more (server
    /// clock): [`next`](Self::next), at most [`RECHECK`] and never past
    /// `deadline`; `None` once the deadline has come.
    pub(super) fn pause_before(
        &mut self,
        deadline: Instant,
        remaining: Duration,
        sent_at: Instant,
    ) -> Option<Duration> {
        let now = Instant::now();
        let left = deadline.saturating_duration_since(now);
        if left.is_zero() {
            return None;
        }
        let pause = self.next(remaining, now.saturating_duration_since(sent_at), &mut rand::rng());
        Some(pause.min(RECHECK).min(left))
    }

    /// `remaining` is the lease's time left as the server judged it, and
    /// `since_sent` how long ago (local monotonic clock) that request left:
    /// the pause ends at `sent_at + remaining`, plus jitter.
    pub(super) fn next(&mut self, remaining: Duration, since_sent: Duration, rng: &mut impl rand::Rng) -> Duration {
        let until_expiry = remaining.saturating_sub(since_sent);
        let base = if until_expiry > MIN_PAUSE {
            self.stale = 0;
            until_expiry
        } else {
            self.stale = (self.stale + 1).min(16);
            (MIN_PAUSE * 2u32.saturating_pow(self.stale)).min(MAX_BACKOFF)
        };
        // Up to a quarter more, and at least a little, so waiters spread out.
        let spread = base / 4 + MIN_PAUSE;
        base + rng.random_range(Duration::ZERO..=spread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use time::OffsetDateTime;

    use crate::client::outcome::remaining;

    fn rng() -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(7)
    }

    #[test]
    fn the_pause_waits_for_the_holders_expiry_plus_some_jitter() {
        let pause = Backoff::default().next(Duration::from_secs(2), Duration::ZERO, &mut rng());
        assert!(pause >= Duration::from_secs(2), "{pause:?}");
        assert!(pause <= Duration::from_millis(2520), "{pause:?}");
    }

    #[test]
    fn the_pause_counts_from_when_the_request_was_sent() {
        let pause = Backoff::default().next(Duration::from_secs(2), Duration::from_millis(500), &mut rng());
        assert!(pause >= Duration::from_millis(1500), "{pause:?}");
        assert!(pause < Duration::from_secs(2), "{pause:?}");
    }

    #[test]
    fn a_server_clock_an_hour_ahead_or_behind_does_not_change_the_pause() {
        // The local wall clock plays no part: the server's own two readings
        // give the time left, so only their difference matters.
        let local = OffsetDateTime::now_utc();
        let hour = Duration::from_secs(3600);
        let pauses: Vec<Duration> = [local - hour, local, local + hour]
            .into_iter()
            .map(|server_now| {
                let until = server_now + Duration::from_secs(2);
                Backoff::default().next(remaining(until, server_now), Duration::ZERO, &mut rng())
            })
            .collect();
        assert_eq!(pauses[0], pauses[1]);
        assert_eq!(pauses[1], pauses[2]);
        assert!(pauses[1] >= Duration::from_secs(2) && pauses[1] <= Duration::from_millis(2520));
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_pause_timed_by_a_server_an_hour_ahead_ends_at_the_lease_end_on_the_local_monotonic_clock() {
        // A busy answer judged by a server an hour ahead: the pause is timed
        // from the request's send instant, on tokio's (paused) clock.
        let server_now = OffsetDateTime::now_utc() + Duration::from_secs(3600);
        let until = server_now + Duration::from_secs(3);
        let sent_at = Instant::now();
        tokio::time::advance(Duration::from_millis(400)).await;
        let pause = Backoff::default().next(remaining(until, server_now), sent_at.elapsed(), &mut rng());
        tokio::time::sleep(pause).await;
        let woke = sent_at.elapsed();
        assert!(woke >= Duration::from_secs(3), "{woke:?}");
        assert!(woke <= Duration::from_millis(3770), "{woke:?}");
    }

    #[test]
    fn two_waiters_do_not_wake_at_the_same_instant() {
        let mut r = rng();
        let pauses: Vec<_> = (0..8)
            .map(|_| Backoff::default().next(Duration::from_secs(1), Duration::ZERO, &mut r))
            .collect();
        assert!(pauses.windows(2).any(|w| w[0] != w[1]), "{pauses:?}");
    }

    #[test]
    fn an_expiry_already_past_backs_off_exponentially_to_a_ceiling() {
        let mut backoff = Backoff::default();
        let mut r = rng();
        let pauses: Vec<_> = (0..10)
            .map(|_| backoff.next(Duration::ZERO, Duration::from_millis(5), &mut r))
            .collect();
        assert!(pauses[0] < Duration::from_millis(100), "{pauses:?}");
        assert!(pauses[3] > pauses[0], "{pauses:?}");
        assert!(
            pauses.iter().all(|p| *p <= MAX_BACKOFF + MAX_BACKOFF / 4 + MIN_PAUSE),
            "{pauses:?}"
        );
    }

    #[test]
    fn a_lease_already_past_on_the_server_leaves_zero_remaining() {
        let now = OffsetDateTime::UNIX_EPOCH + Duration::from_secs(60);
        assert_eq!(remaining(OffsetDateTime::UNIX_EPOCH, now), Duration::ZERO);
        assert_eq!(remaining(now + Duration::from_secs(5), now), Duration::from_secs(5));
    }

    #[tokio::test]
    async fn waiting_for_ever_does_not_overflow_the_deadline() {
        let client = Client::unreachable(Duration::from_millis(100));
        let waited = tokio::time::timeout(
            Duration::from_secs(10),
            client.acquire_waiting("k", Duration::from_secs(5), Duration::MAX),
        )
        .await
        .expect("a server never reached is not waited for");
        assert!(waited.is_err(), "{waited:?}");
    }

    fn network() -> Error {
        Error::Network {
            procedure: "fence_api.Acquire",
            reason: "connection reset".into(),
            timed_out: false,
        }
    }

    fn unavailable() -> Error {
        Error::Unavailable {
            reason: "cannot connect".into(),
        }
    }

    #[test]
    fn a_failure_before_sending_is_not_retried_until_an_attempt_may_have_reached_the_server() {
        let mut reached = false;
        assert!(!retry_acquire(&unavailable(), &mut reached), "nothing was ever sent");
        assert!(retry_acquire(&network(), &mut reached), "a lost reply may hide a grant");
        assert!(reached);
        assert!(
            retry_acquire(&unavailable(), &mut reached),
            "the grant a lost reply hid is still to be confirmed"
        );
    }

    #[test]
    fn a_deadlock_is_retried_and_a_refused_input_is_not() {
        let mut reached = false;
        let deadlock = Error::from_server("fence_api.Acquire", 1205, 13, "deadlock victim".into());
        assert!(retry_acquire(&deadlock, &mut reached));
        let refused = Error::from_server("fence_api.Acquire", 50103, 16, "bad length".into());
        assert!(!retry_acquire(&refused, &mut reached));
        let denied = Error::from_server("fence_api.Acquire", 229, 14, "permission denied".into());
        assert!(!retry_acquire(&denied, &mut true));
    }

    #[test]
    fn a_waiting_attempt_refused_by_the_engine_is_asked_again_without_the_signal() {
        let denied = Error::from_server(
            "fence_api.Acquire",
            229,
            14,
            "permission denied on sp_getapplock".into(),
        );
        assert!(signal_failed(&denied));
        let shape = Error::UnexpectedReply {
            procedure: "fence_api.Acquire",
            detail: "1 rows instead of exactly 2".into(),
        };
        assert!(signal_failed(&shape));
        let refused = Error::from_server("fence_api.Acquire", 50103, 16, "bad length".into());
        assert!(!signal_failed(&refused), "the fence's own refusal is the answer");
        let deadlock = Error::from_server("fence_api.Acquire", 1205, 13, "deadlock victim".into());
        assert!(!signal_failed(&deadlock), "a deadlock is retried as before");
        assert!(!signal_failed(&network()));
    }

    #[test]
    fn a_wait_for_the_row_given_up_after_a_lost_reply_is_asked_again_as_the_same_owner() {
        let gave_up = Error::from_server(
            "fence_api.Acquire",
            50129,
            16,
            "Waited 5 seconds for the fence row or its table.".into(),
        );
        assert!(
            retry_acquire(&gave_up, &mut true),
            "the lost reply's grant is still to be confirmed"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn confirming_a_lost_grant_outlasts_the_wait_and_other_retries_do_not() {
        let now = Instant::now();
        let retries = Retries {
            confirm_until: now + Duration::from_secs(30),
            deadline: now,
        };
        assert_eq!(retries.end(true), now + Duration::from_secs(30));
        assert_eq!(retries.end(false), now, "a deadlock is not retried past the wait");
    }

    #[tokio::test(start_paused = true)]
    async fn retries_end_after_a_few_attempts_or_the_lease_length_whichever_is_sooner() {
        let client = Client::unreachable(Duration::from_secs(15));
        let start = Instant::now();
        // Default call timeout 30 s, checkout 15 s: three attempts, 135 s.
        assert_eq!(
            client.confirm_until(start, Duration::from_secs(3600)),
            start + Duration::from_secs(135)
        );
        assert_eq!(
            client.confirm_until(start, Duration::from_secs(30)),
            start + Duration::from_secs(30)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_instant_for_ever_away_is_far_but_representable() {
        let now = Instant::now();
        assert!(later(now, Duration::MAX) > now + Duration::from_secs(86_400 * 365));
        assert_eq!(later(now, Duration::from_secs(1)), now + Duration::from_secs(1));
    }
}
