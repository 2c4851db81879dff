//! One renewal of a guard's lease, sent again on a second connection when the
//! first attempt is slow to answer, with the first left running. A connection
//! that went silent (a half-open socket after a failover, a stalled network
//! path) looks exactly like a slow one until a timeout ends it, and replacing
//! it costs a login, which on a busy server can take longer than a short lease
//! has left. Cancelling the silent attempt first and only then logging in
//! again, as a plain timeout-and-retry does, spends the time twice; starting
//! the second attempt while the first may still answer spends it once.

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::time::Instant;

use super::{Client, Error, Lease, Renew};

/// Attempts in flight at once: the renewal pool's size, so a second attempt
/// never waits for a connection the first one holds.
pub(crate) const MAX_IN_FLIGHT: usize = 2;

/// The shortest wait before a second attempt, however little time is left:
/// below it an answer is usually only a little late, not lost.
const MIN_HEDGE_DELAY: Duration = Duration::from_millis(250);

/// How one renewal ended.
pub(crate) enum Renewal {
    /// Confirmed: the lease as renewed.
    Renewed(Lease),
    /// The server answered `Lost`.
    Lost,
    /// An attempt failed for a reason retrying will not fix.
    Failed(Error),
    /// No attempt was confirmed by the deadline.
    Unanswered { last_error: Option<String> },
}

/// How long an attempt started now waits alone before a second one joins
/// it: a quarter of the time left until `give_up`, so the second attempt has
/// three quarters of it for its login and its call.
fn hedge_delay(now: Instant, give_up: Instant) -> Duration {
    (give_up.saturating_duration_since(now) / 4).max(MIN_HEDGE_DELAY)
}

/// Renews `lease` once, by `give_up` or not at all. Whichever attempt answers
/// first decides; an attempt still running then is dropped, and the pool
/// discards its connection, since it was in the middle of a call. After an
/// error worth retrying, with no attempt left running, the next one starts
/// `retry_pause` later.
pub(crate) async fn renew_hedged(client: &Client, lease: &Lease, give_up: Instant, retry_pause: Duration) -> Renewal {
    let started = Instant::now();
    let mut in_flight: FuturesUnordered<_> = [attempt(client, lease.clone())].into_iter().collect();
    let mut last_error = None;
    let mut next_start = started + hedge_delay(started, give_up);
    loop {
        tokio::select! {
            biased;
            Some((answer, renewed)) = in_flight.next() => match answer {
                Ok(Renew::Renewed { .. }) => return Renewal::Renewed(renewed),
                Ok(Renew::Lost) => return Renewal::Lost,
                Err(error) if error.is_transient() => {
                    tracing::debug!(key = lease.key(), %error, "renewal failed; retrying");
                    last_error = Some(error.to_string());
                    if in_flight.is_empty() {
                        next_start = next_start.min(Instant::now() + retry_pause);
                    }
                }
                Err(error) => return Renewal::Failed(error),
            },
            () = tokio::time::sleep_until(give_up) => {
                let running = in_flight.len();
                let silent = (running > 0).then(|| format!(
                    "{running} renewal attempt(s), each on its own connection, got no reply within {} ms",
                    started.elapsed().as_millis()
                ));
                return Renewal::Unanswered { last_error: last_error.or(silent) };
            }
            () = tokio::time::sleep_until(next_start), if in_flight.len() < MAX_IN_FLIGHT => {
                let now = Instant::now();
                if !in_flight.is_empty() {
                    tracing::debug!(key = lease.key(), "renewal unanswered; trying another connection beside it");
                }
                in_flight.push(attempt(client, lease.clone()));
                next_start = now + hedge_delay(now, give_up);
            }
        }
    }
}

/// One attempt, answering with the lease as it renewed it.
async fn attempt(client: &Client, mut lease: Lease) -> (Result<Renew, Error>, Lease) {
    let answer = client.renew(&mut lease).await;
    (answer, lease)
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
        let lease = Lease::new(
            "k",
            uuid::Uuid::new_v4(),
            1,
            Duration::from_secs(30),
            time::OffsetDateTime::UNIX_EPOCH,
            Instant::now(),
        );
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
}
