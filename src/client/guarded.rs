//! Acquiring and holding as one step: the lease comes back already in its
//! guard, so it cannot be left to expire between the two.

use std::time::Duration;

use time::OffsetDateTime;

use super::{Acquire, Client, Error, LeaseGuard};

/// What [`Client::acquire_guarded`] answered.
#[must_use = "dropping the guard releases the lease"]
#[non_exhaustive]
#[derive(Debug)]
pub enum Guarded {
    /// The lease is held, and renewed by its guard until released or lost.
    Held(LeaseGuard),
    /// Someone else still held it when the wait ran out.
    Busy {
        /// The holder's expiry, or the moment of the answer when that is
        /// unknown (see [`Acquire::Busy`]).
        until: OffsetDateTime,
        /// How long the holder's lease had left when the server judged it.
        remaining: Duration,
    },
    /// No fence row exists for the key; `provision` it first.
    NotProvisioned,
}

impl Client {
    /// Acquires the lease on `key` for `length`, waiting up to `wait` while
    /// it is busy (as [`acquire_waiting`](Client::acquire_waiting)), and
    /// hands it back inside a [`LeaseGuard`] that renews it from the start.
    /// Must be called inside a tokio runtime.
    pub async fn acquire_guarded(&self, key: &str, length: Duration, wait: Duration) -> Result<Guarded, Error> {
        Ok(match self.acquire_waiting(key, length, wait).await? {
            Acquire::Acquired(lease) => Guarded::Held(self.guard(lease)),
            Acquire::Busy { until, remaining } => Guarded::Busy { until, remaining },
            Acquire::NotProvisioned => Guarded::NotProvisioned,
        })
    }
}
