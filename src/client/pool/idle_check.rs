//! The check a pooled connection passes before use when it sat idle: after a
//! restart or failover every idle connection may be dead, and a call must not
//! be the one that finds out (a publish would report `OutcomeUnknown` for a
//! request that never arrived).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::session::Session;
use crate::connection::Connection;

/// What to do with a connection taken from the pool.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Used within `idle_check_after`: hand it out, a call stays one round trip.
    Use,
    /// Idle since before another idle connection failed its check: as
    /// suspect as that one, so replaced without spending a ping on it.
    Discard,
    /// Check it with one bounded `SELECT 1`.
    Ping,
}

/// The settings of the check and what it has learnt, shared by the
/// managers of a client's pools.
#[derive(Clone, Debug)]
pub(crate) struct IdleCheck {
    after: Duration,
    timeout: Duration,
    /// When the latest failed check started. A failover that left one idle
    /// connection dead (often half-open: no reply, no reset) left every
    /// connection idle since then dead too; checking each in turn would cost
    /// one bound per connection.
    failed_at: Arc<Mutex<Option<Instant>>>,
}

impl IdleCheck {
    pub(crate) fn new(after: Duration, timeout: Duration) -> Self {
        Self {
            after,
            timeout,
            failed_at: Arc::default(),
        }
    }

    pub(crate) fn verdict(&self, last_used: Instant, now: Instant) -> Verdict {
        if now.saturating_duration_since(last_used) <= self.after {
            return Verdict::Use;
        }
        match *self.failed_at.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(failed_at) if last_used < failed_at => Verdict::Discard,
            _ => Verdict::Ping,
        }
    }

    /// Passes `session` for use, or says why it must be replaced. Sets
    /// `in_call` while the ping is out, so a check abandoned half way (the
    /// caller's checkout timeout) discards the connection.
    pub(crate) async fn check(&self, session: &mut Session) -> Result<(), String> {
        let started = Instant::now();
        match self.verdict(session.last_used, started) {
            Verdict::Use => return Ok(()),
            Verdict::Discard => {
                session.in_call = true;
                return Err("idle since before another idle connection failed its check".into());
            }
            Verdict::Ping => {}
        }
        session.in_call = true;
        let failure = match tokio::time::timeout(self.timeout, ping(&mut session.connection)).await {
            Ok(Ok(())) => {
                session.in_call = false;
                session.last_used = Instant::now();
                return Ok(());
            }
            Ok(Err(error)) => format!("it no longer answers: {error}"),
            Err(_) => format!("it did not answer a ping within {} ms", self.timeout.as_millis()),
        };
        let mut failed_at = self.failed_at.lock().unwrap_or_else(|e| e.into_inner());
        *failed_at = Some(failed_at.map_or(started, |before| before.max(started)));
        Err(failure)
    }
}

/// One `SELECT 1` round trip.
async fn ping(connection: &mut Connection) -> Result<(), tiberius::error::Error> {
    connection.simple_query("SELECT 1").await?.into_results().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn only_a_connection_idle_past_the_threshold_is_checked() {
        let check = IdleCheck::new(Duration::from_secs(5), Duration::from_secs(2));
        let start = Instant::now();
        let after = Duration::from_secs(5);
        assert_eq!(check.verdict(start, start), Verdict::Use);
        assert_eq!(check.verdict(start, start + after), Verdict::Use);
        assert_eq!(
            check.verdict(start, start + after + Duration::from_millis(1)),
            Verdict::Ping
        );
    }

    #[tokio::test(start_paused = true)]
    async fn after_one_failed_check_connections_idle_since_before_it_are_replaced_unchecked() {
        let check = IdleCheck::new(Duration::from_secs(5), Duration::from_secs(2));
        let older = Instant::now();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let newer = Instant::now();
        tokio::time::sleep(Duration::from_secs(10)).await;
        *check.failed_at.lock().unwrap() = Some(Instant::now());
        tokio::time::sleep(Duration::from_secs(1)).await;
        let fresh = Instant::now();
        for idle in [older, newer] {
            assert_eq!(check.verdict(idle, Instant::now()), Verdict::Discard);
        }
        // Opened or used after the failure: trusted as before.
        assert_eq!(check.verdict(fresh, Instant::now()), Verdict::Use);
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(check.verdict(fresh, Instant::now()), Verdict::Ping);
    }
}
