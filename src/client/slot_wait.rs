//! Acquiring a slot with a deadline: ask again when the earliest holder's
//! lease ends, and at least every second, so a slot given back early is
//! taken within about a second.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::wait::{Backoff, Retries, later};
use super::{AcquireSlot, Client, Error};

impl Client {
    /// Takes a free slot of `resource`, which has `slots` slots, for
    /// `length`, waiting up to `wait` while every slot is held:
    /// [`acquire_slot`](Client::acquire_slot) with a deadline.
    ///
    /// Every attempt is sent as the same owner, so a retry after a lost
    /// reply confirms the slot it was granted. After a `Busy`, the next
    /// attempt waits for the earliest holder's expiry the server gave
    /// (counted on the local monotonic clock from when the request was sent,
    /// plus jitter), at most a second at a time: a slot given back early is
    /// taken within about a second. (A slot has no single holder to wait
    /// on: any of them letting go frees one, and the handover signal wakes
    /// a waiter only when one particular holder lets go.) `NotProvisioned`
    /// returns at once. An attempt whose reply was lost is confirmed as
    /// [`acquire_waiting`](Client::acquire_waiting) confirms one (also past
    /// the deadline, for a few call timeouts or the lease length); other
    /// transient errors (a deadlock, a failover) are retried until the
    /// deadline, and every other error returns at once. One last attempt is
    /// made at the deadline; if it is still busy, that `Busy` is returned.
    pub async fn acquire_slot_waiting(
        &self,
        resource: &str,
        slots: u32,
        length: Duration,
        wait: Duration,
    ) -> Result<AcquireSlot, Error> {
        let deadline = later(Instant::now(), wait);
        let owner = Uuid::new_v4();
        let mut backoff = Backoff::default();
        loop {
            let sent_at = Instant::now();
            let retries = Retries {
                confirm_until: self.confirm_until(sent_at, length),
                deadline,
            };
            let answer = self
                .acquire_slot_retrying(resource, slots, owner, length, retries)
                .await?;
            let AcquireSlot::Busy { remaining, .. } = answer else {
                return Ok(answer);
            };
            let Some(pause) = backoff.pause_before(deadline, remaining, sent_at) else {
                return Ok(answer);
            };
            tokio::time::sleep(pause).await;
        }
    }
}
