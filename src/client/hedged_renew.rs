//! One renewal of a guard's lease, sent again on a second connection when the
//! first attempt is slow to answer, with the first left running. A connection
//! that went silent (a half-open socket after a failover, a stalled network
//! path) looks exactly like a slow one until a timeout ends it, and replacing
//! it costs a login, which on a busy server can take longer than a short lease
//! has left. Cancelling the silent attempt first and only then logging in
//! again, as a plain timeout-and-retry does, spends the time twice; starting
//! the second attempt while the first may still answer spends it once.
//!
//! Each guard has one attempt of its own in flight at most, which never
//! waits for another guard's: the renewals pool has room for one connection
//! per guard renewing at that moment. A second attempt beside it takes the
//! client's one spare connection, shared by every guard, and waits while
//! another guard's second attempt holds it. So a guard whose renewals hang
//! (its row locked by another session, a connection gone silent) holds two
//! connections at most, and the others still renew on one each.

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::Semaphore;
use tokio::time::Instant;

use super::{Client, Error, Lease, Renew};

/// Attempts of one guard (or one call renewing many) in flight at once: its
/// own and the spare.
pub(crate) const MAX_IN_FLIGHT: usize = 2;

/// Second attempts in flight at once across all the guards of a client.
pub(crate) const SPARE_ATTEMPTS: usize = 1;

/// The most renewal connections a client opens, a bound it reaches only
/// when that many renewals are in flight at once (it holds one connection
/// in steady use). Past it, a guard's own attempt waits for a connection
/// too, so renewals slow down before they load a struggling server further.
pub(crate) const MAX_RENEWAL_CONNECTIONS: u32 = 32;

/// The client's spare connection for second attempts (see the module).
pub(crate) fn spare() -> Semaphore {
    Semaphore::new(SPARE_ATTEMPTS)
}

/// The shortest wait before a second attempt, however little time is left:
/// below it an answer is usually only a little late, not lost.
const MIN_HEDGE_DELAY: Duration = Duration::from_millis(250);

/// How one renewal of a lease (or, with its own types, of a lease set)
/// ended.
pub(crate) enum Renewal<S = Lease, L = ()> {
    /// Confirmed: the lease (or set) as renewed.
    Renewed(S),
    /// The server answered `Lost` (for a set, naming the keys lost).
    Lost(L),
    /// An attempt failed for a reason retrying will not fix.
    Failed(Error),
    /// No attempt was confirmed by the deadline.
    Unanswered { last_error: Option<String> },
}

/// How long an attempt started now waits alone before a second one joins
/// it: a quarter of the time left until `give_up`, so the second attempt has
/// three quarters of it for its login and its call.
pub(crate) fn hedge_delay(now: Instant, give_up: Instant) -> Duration {
    (give_up.saturating_duration_since(now) / 4).max(MIN_HEDGE_DELAY)
}

/// Renews `lease` once, by `give_up` or not at all, as [`hedged`] does.
pub(crate) async fn renew_hedged(client: &Client, lease: &Lease, give_up: Instant, retry_pause: Duration) -> Renewal {
    let renew_once = |mut lease: Lease| async move {
        let answer = client.renew(&mut lease).await?;
        Ok(match answer {
            Renew::Renewed { .. } => Ok(lease),
            Renew::Lost => Err(()),
        })
    };
    hedged(client, lease, lease.key(), give_up, retry_pause, renew_once).await
}

/// Renews `held` (a lease, or a lease set) once with `renew_once`, by
/// `give_up` or not at all: `renew_once` answers what it renewed, or what
/// the server said was lost. Whichever attempt answers first decides; an
/// attempt still running then is dropped, and the pool discards its
/// connection, since it was in the middle of a call. After an error worth
/// retrying, with no attempt left running, the next one starts
/// `retry_pause` later. `what` names `held` in the log (its `key` field).
pub(crate) async fn hedged<S, L, F, Fut>(
    client: &Client,
    held: &S,
    what: &str,
    give_up: Instant,
    retry_pause: Duration,
    renew_once: F,
) -> Renewal<S, L>
where
    S: Clone,
    F: Fn(S) -> Fut,
    Fut: Future<Output = Result<Result<S, L>, Error>>,
{
    let attempt = |slot: Slot| {
        let renewing = renew_once(held.clone());
        async move {
            let _spare = slot.take(client).await;
            (renewing.await, slot)
        }
    };
    let started = Instant::now();
    let mut in_flight: FuturesUnordered<_> = [attempt(Slot::Own)].into_iter().collect();
    // Whether the guard's own attempt is free for the next one to take.
    let mut own_free = false;
    let mut last_error = None;
    let mut next_start = started + hedge_delay(started, give_up);
    loop {
        tokio::select! {
            biased;
            Some((answer, slot)) = in_flight.next() => {
                own_free |= slot == Slot::Own;
                match answer {
                    Ok(Ok(renewed)) => return Renewal::Renewed(renewed),
                    Ok(Err(lost)) => return Renewal::Lost(lost),
                    Err(error) if error.is_transient() => {
                        tracing::debug!(key = what, %error, "renewal failed; retrying");
                        last_error = Some(error.to_string());
                        if in_flight.is_empty() {
                            next_start = next_start.min(Instant::now() + retry_pause);
                        }
                    }
                    Err(error) => return Renewal::Failed(error),
                }
            }
            () = tokio::time::sleep_until(give_up) => {
                let running = in_flight.len();
                let silent = (running > 0).then(|| format!(
                    "{running} renewal attempt(s) got no reply within {} ms",
                    started.elapsed().as_millis()
                ));
                return Renewal::Unanswered { last_error: last_error.or(silent) };
            }
            () = tokio::time::sleep_until(next_start), if in_flight.len() < MAX_IN_FLIGHT => {
                let now = Instant::now();
                if !in_flight.is_empty() {
                    tracing::debug!(key = what, "renewal unanswered; trying another connection beside it");
                }
                let slot = if std::mem::take(&mut own_free) { Slot::Own } else { Slot::Spare };
                in_flight.push(attempt(slot));
                next_start = now + hedge_delay(now, give_up);
            }
        }
    }
}

/// Which of the guard's two attempts an attempt is (see the module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// The guard's own: it waits for no other guard.
    Own,
    /// The client's spare, shared by every guard: it waits while another
    /// guard's second attempt holds it.
    Spare,
}

impl Slot {
    /// Waits for this slot: the spare is held until what it returns is
    /// dropped, with the attempt; the semaphore is never closed.
    pub(crate) async fn take(self, client: &Client) -> Option<tokio::sync::SemaphorePermit<'_>> {
        match self {
            Slot::Own => None,
            Slot::Spare => client.renewal_spare.acquire().await.ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_second_attempt_waits_a_quarter_of_what_is_left_and_at_least_its_floor() {
        let now = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(hedge_delay(now, now + s(4)), s(1));
        assert_eq!(hedge_delay(now, now + s(40)), s(10));
        assert_eq!(hedge_delay(now, now + Duration::from_millis(400)), MIN_HEDGE_DELAY);
        assert_eq!(hedge_delay(now + s(1), now), MIN_HEDGE_DELAY);
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_server_the_renewal_ends_unanswered_at_its_deadline_with_the_last_error() {
        let client = Client::unreachable(Duration::from_millis(100));
        let lease = Lease::for_test(Duration::from_secs(30));
        let started = Instant::now();
        let give_up = started + Duration::from_secs(3);
        match renew_hedged(&client, &lease, give_up, Duration::from_millis(200)).await {
            Renewal::Unanswered {
                last_error: Some(error),
            } => {
                assert!(error.contains("no connection"), "{error}");
            }
            _ => panic!("expected Unanswered with the connection's error"),
        }
        assert_eq!(
            Instant::now(),
            give_up,
            "it gave up at its deadline, not before or after"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_second_attempt_waits_while_another_guard_holds_the_spare_and_the_first_never_does() {
        // Each attempt waits a minute for a connection: it neither answers
        // nor fails while the test looks.
        let client = Client::unreachable(Duration::from_secs(60));
        for spare_taken in [false, true] {
            let give_up = Instant::now() + Duration::from_secs(8);
            let hedge = hedge_delay(Instant::now(), give_up);
            let held = spare_taken.then(|| client.renewal_spare.clone().try_acquire_owned().unwrap());
            let before = client.requests_sent();
            let renewal = tokio::spawn({
                let (client, lease) = (client.clone(), Lease::for_test(Duration::from_secs(30)));
                async move { renew_hedged(&client, &lease, give_up, Duration::from_millis(200)).await }
            });
            tokio::time::sleep(hedge + Duration::from_millis(100)).await;
            let started = client.requests_sent() - before;
            if spare_taken {
                assert_eq!(
                    started, 1,
                    "the guard's own attempt waits for nobody, its second for the spare"
                );
                drop(held);
                tokio::time::sleep(Duration::from_millis(1)).await;
                assert_eq!(
                    client.requests_sent() - before,
                    2,
                    "the second attempt took the spare once free"
                );
            } else {
                assert_eq!(started, 2, "with the spare free the second attempt starts at once");
            }
            renewal.abort();
            let _ = renewal.await;
        }
    }
}
