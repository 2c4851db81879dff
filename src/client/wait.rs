//! Acquiring with a deadline: wait for the holder's lease to run out rather
//! than polling at a fixed rate.

use std::time::Duration;

use rand::RngExt;
use time::OffsetDateTime;
use tokio::time::Instant;
use uuid::Uuid;

use super::{Acquire, Client, Error};

/// The shortest pause between attempts.
const MIN_PAUSE: Duration = Duration::from_millis(20);
/// The longest pause while the holder's expiry looks already past on the
/// local clock (clock skew, or a holder that just renewed).
const MAX_BACKOFF: Duration = Duration::from_secs(2);

impl Client {
    /// Acquires the lease on `key`, waiting up to `wait` while it is busy.
    ///
    /// After a `Busy`, the next attempt is timed from the holder's
    /// `LeaseUntilUtc`, plus a random jitter so that waiters do not all
    /// arrive at once. When that expiry already looks past on the local clock
    /// (the clocks disagree, or the holder renewed), the pause grows
    /// exponentially instead. One last attempt is made at the deadline; if it
    /// is still busy, that `Busy` is returned. `NotProvisioned` and errors
    /// return at once: a failure is never turned into `Busy`.
    ///
    /// Every attempt uses the same owner id, and a transient error (a lost
    /// reply, a timeout, a deadlock) is retried until the deadline, so an
    /// attempt whose reply was lost but which took the lease is confirmed by
    /// the next one instead of blocking the key under an owner nobody knows.
    pub async fn acquire_waiting(&self, key: &str, length: Duration, wait: Duration) -> Result<Acquire, Error> {
        let deadline = Instant::now() + wait;
        let owner = Uuid::new_v4();
        let mut backoff = Backoff::default();
        loop {
            let answer = self.acquire_retrying(key, owner, length, deadline).await?;
            let Acquire::Busy { until } = answer else {
                return Ok(answer);
            };
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(answer);
            }
            let pause = backoff.next(until, OffsetDateTime::now_utc(), &mut rand::rng());
            tokio::time::sleep(pause.min(left)).await;
        }
    }
}

impl Client {
    /// Acquires once as `owner`, retrying transient errors with the same
    /// owner until `deadline`: the contract makes that retry idempotent, so a
    /// lost reply never leaves the lease held by an owner nobody knows.
    pub(crate) async fn acquire_retrying(
        &self,
        key: &str,
        owner: Uuid,
        length: Duration,
        deadline: Instant,
    ) -> Result<Acquire, Error> {
        let mut pause = MIN_PAUSE;
        loop {
            match self.acquire_as(key, owner, length).await {
                Err(error) if error.is_transient() && Instant::now() + pause < deadline => {
                    tracing::debug!(key, %owner, %error, "acquire failed; retrying with the same owner");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_BACKOFF);
                }
                other => return other,
            }
        }
    }
}

/// Chooses the pause before the next attempt.
#[derive(Default)]
struct Backoff {
    /// Attempts in a row that found the holder's expiry already past locally.
    stale: u32,
}

impl Backoff {
    fn next(&mut self, holder_until: OffsetDateTime, now: OffsetDateTime, rng: &mut impl rand::Rng) -> Duration {
        let until_expiry = Duration::try_from(holder_until - now).unwrap_or(Duration::ZERO);
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

    fn rng() -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(7)
    }

    #[test]
    fn the_pause_waits_for_the_holders_expiry_plus_some_jitter() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let pause = Backoff::default().next(now + Duration::from_secs(2), now, &mut rng());
        assert!(pause >= Duration::from_secs(2), "{pause:?}");
        assert!(pause <= Duration::from_millis(2520), "{pause:?}");
    }

    #[test]
    fn two_waiters_do_not_wake_at_the_same_instant() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let until = now + Duration::from_secs(1);
        let mut r = rng();
        let pauses: Vec<_> = (0..8).map(|_| Backoff::default().next(until, now, &mut r)).collect();
        assert!(pauses.windows(2).any(|w| w[0] != w[1]), "{pauses:?}");
    }

    #[test]
    fn an_expiry_already_past_locally_backs_off_exponentially_to_a_ceiling() {
        let now = OffsetDateTime::UNIX_EPOCH + Duration::from_secs(60);
        let mut backoff = Backoff::default();
        let mut r = rng();
        let pauses: Vec<_> = (0..10)
            .map(|_| backoff.next(OffsetDateTime::UNIX_EPOCH, now, &mut r))
            .collect();
        assert!(pauses[0] < Duration::from_millis(100), "{pauses:?}");
        assert!(pauses[3] > pauses[0], "{pauses:?}");
        assert!(
            pauses.iter().all(|p| *p <= MAX_BACKOFF + MAX_BACKOFF / 4 + MIN_PAUSE),
            "{pauses:?}"
        );
    }
}
