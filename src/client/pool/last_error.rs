//! The last failure to open a connection, kept for every caller that gives up
//! waiting: bb8 tells such a caller only "timed out", and the operator needs
//! the server's reason (a refused login, a database in failover).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

/// A failed attempt: its whole cause chain, rendered once, and when it ended.
#[derive(Clone, Debug)]
struct Failure {
    reason: String,
    at: Instant,
}

/// Shared by the managers of a client's pools. Each attempt to connect
/// records its failure, or clears the last one when it succeeds: what is kept
/// is the current state of the server as the pool last saw it, so a caller
/// that gives up while connections keep failing hears why, and one that gives
/// up while the pool is merely busy is not told about an old failure.
#[derive(Clone, Default)]
pub(crate) struct LastConnectError(Arc<Mutex<Option<Failure>>>);

impl LastConnectError {
    pub(crate) fn record(&self, error: &(dyn std::error::Error + 'static)) {
        let failure = Failure {
            reason: chain(error),
            at: Instant::now(),
        };
        if let Ok(mut last) = self.0.lock() {
            *last = Some(failure);
        }
    }

    pub(crate) fn clear(&self) {
        if let Ok(mut last) = self.0.lock() {
            *last = None;
        }
    }

    /// The last failure and how long ago it ended, unless a connection has
    /// opened since. Read, not taken: every waiter that gives up hears it.
    pub(crate) fn describe(&self) -> Option<String> {
        let failure = self.0.lock().ok()?.clone()?;
        let ago = Instant::now().saturating_duration_since(failure.at);
        Some(format!(
            "{} (the last attempt to connect, {} ago)",
            failure.reason,
            seconds(ago)
        ))
    }
}

impl std::fmt::Debug for LastConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LastConnectError")
    }
}

/// An error and its sources, `: `-separated, as anyhow's `{:#}` prints them:
/// the reason a caller reads is a string, so the chain is rendered here.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn seconds(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot get an access token")]
    struct Outer(#[source] std::io::Error);

    #[tokio::test(start_paused = true)]
    async fn a_failure_is_kept_with_its_causes_for_every_reader_until_a_connection_opens() {
        let last = LastConnectError::default();
        assert_eq!(last.describe(), None);
        last.record(&Outer(std::io::Error::other("the identity endpoint answered 500")));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let expected =
            "cannot get an access token: the identity endpoint answered 500 (the last attempt to connect, 1.5 s ago)";
        assert_eq!(last.describe().as_deref(), Some(expected));
        assert_eq!(
            last.describe().as_deref(),
            Some(expected),
            "a second waiter hears it too"
        );
        last.clear();
        assert_eq!(last.describe(), None);
    }
}
