//! The first attempt of a wait for a key this client's guard has just let
//! go of: the queue's head is given its turn before the worker asks again.
//!
//! A release wakes the head of its key's queue (see `queue`), whose
//! `Acquire` the engine runs a moment after the release commits. A worker
//! that releases a key and at once waits for it again would race that
//! `Acquire` with a plain one of its own, win it on most cycles, and leave
//! those who waited to wait ever longer. So that worker's first attempt asks
//! first, in the same request, whether the key has a queue: when someone
//! holds or waits for the queue's lock, it gives the head 25 ms to take the
//! lease, then asks `Acquire`. A head woken by the release takes it within
//! that time; the worker is then `Busy` and joins the queue behind those
//! who came before it. A key with no queue costs one lock granted and let
//! go of, no wait. The head start only orders the waiters: the fence row
//! alone grants, and the worker still takes a lease the head did not ask
//! for in time (a head that froze). Which keys were let go of lately is
//! `handed_over`'s.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::call::{batch_on, checkout};
use super::contract::Procedure;
use super::span::About;
use super::{Acquire, Client, Error, input, queue};
use crate::tsql::after_applock;

/// The first attempt in one request: a shared request for the queue's lock
/// `@P4`, waiting at most 25 ms, is granted at once when nobody queues
/// (and let go of at once), and waits out the head start while a waiter
/// holds it (the head) or waits for it; then `Acquire`. Its row is
/// `Acquire`'s. A lock wait, not `WAITFOR`, which Babelfish 4.2 lacks. 25 ms
/// is many times a woken head's own handover (about 2 ms from a release's
/// commit to its `Acquired` on Babelfish, see docs/measurements.md), with
/// room for a loaded server, and costs the worker nothing when the head
/// takes the lease: it would wait for that tenure anyway. It costs 25 ms
/// once when the head does not ask (it froze).
const AFTER_THE_HEAD_THEN_ACQUIRE: &str = concat!(
    "DECLARE @Turn int;
EXEC @Turn = sp_getapplock @Resource = @P4, @LockMode = N'Shared', @LockOwner = N'Session', @LockTimeout = 25;
IF @Turn >= 0 EXEC sp_releaseapplock @Resource = @P4, @LockOwner = N'Session';
",
    after_applock!("@Turn"),
    "
EXEC fence_api.Acquire @ResourceKey = @P1, @Owner = @P2, @LeaseSeconds = @P3;"
);

impl Client {
    /// The first attempt as `owner` of a wait for a key this client has
    /// just handed over: `Acquire`, up to 25 ms later when `key` has waiters
    /// queued. Answers as
    /// [`acquire_timed`](Client::acquire_timed) does, with the instant the
    /// request was sent (the grant, if any, is no earlier).
    pub(crate) async fn acquire_after_the_head(
        &self,
        key: &str,
        owner: Uuid,
        length: Duration,
    ) -> Result<(Acquire, Instant), Error> {
        // A fake has no queue: its first attempt is a plain one.
        #[cfg(feature = "fake")]
        if self.as_fake().is_some() {
            return self.acquire_timed(key, owner, length).await;
        }
        let key = input::key(key)?;
        let owner = input::owner(owner)?;
        let seconds = input::lease_seconds(length)?;
        let queue = queue::resource(key);
        let arguments: [&dyn tiberius::ToSql; 4] = [&key, &owner, &seconds, &queue.as_str()];
        let pool = self.pool_for(Procedure::Acquire);
        let sent_at = Instant::now();
        let exchange = Box::pin(async {
            let mut session = checkout(pool, &self.last_connect_error, &self.config).await?;
            batch_on(
                &mut session,
                &self.config,
                Procedure::Acquire,
                AFTER_THE_HEAD_THEN_ACQUIRE,
                &arguments,
                Some(1),
            )
            .await
        });
        let replies = self.observed(Procedure::Acquire, About::key(key), exchange).await?;
        let answer = super::api::acquire_answer(&replies[0], key, owner, length, sent_at)?;
        Ok((answer, sent_at))
    }
}
