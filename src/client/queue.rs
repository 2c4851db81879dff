//! The waiters' queue: waiters on one key are served in about the order
//! they came, rather than all woken at once by a release and the lease
//! going to whoever asks first.
//!
//! Each key has a second application lock beside its handover signal (see
//! `handover`), `fencepost:queue:` and the same SHA-256 hex. A waiting
//! acquire keeps one signal session for its whole wait, and each of its
//! attempts after the first (every one, for a worker coming back for a key
//! its guard just let go of: see `handed_over`) is one request on it: it
//! asks for the queue lock in Exclusive mode, waiting at most the attempt's
//! pause. The engine grants an application lock's waiters in the order they
//! asked (SQL Server's lock queue; on Babelfish, PostgreSQL's), so the
//! waiter granted it is the one that has waited longest: the head. Only the
//! head blocks on the signal (Shared, for what is left of the pause, as
//! every waiter did before), lets go of it, and asks `Acquire`. A head that
//! acquired lets go of the queue lock right after the answer, which makes
//! the next waiter the head; a head answered `Busy` keeps it across its next
//! attempts (its place), settles for the new holder's signal, and blocks on
//! it.
//!
//! A waiter not granted the queue lock within its pause asks `Acquire` in
//! the same request, as a poll: a head that froze (its process paused with
//! the lock held) leaves everyone behind it polling at the pace they always
//! did, never waiting without bound, and never granted wrongly. The locks
//! decide nothing: the fence row stays the only authority.
//!
//! The queue lock never outlives the wait: a wait that ends (acquired, at
//! its deadline, on an error, or its future dropped) lets go of it, or its
//! session is closed, which lets go of every lock the session held; a
//! session is never returned to the pool holding it.

use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::time::Instant;
use uuid::Uuid;

use super::call::batch_on;
use super::contract::Procedure;
use super::error::FATAL_CLASS;
use super::handover::{CHECKOUT_GRACE, HELD_WAIT, Waited, Woke};
use super::pool::Manager;
use super::span::About;
use super::{Acquire, Client, Error, input, meter};
use crate::tsql::after_applock;

/// What every queue's lock name starts with.
const RESOURCE_PREFIX: &str = "fencepost:queue:";

/// The application lock that queues the waiters on `key`:
/// `fencepost:queue:` and the SHA-256 of the key's UTF-8 bytes in
/// lower-case hex, as the signal's name (see `handover::resource`). Another
/// language's client that asks for it as this one does waits in the same
/// queue.
pub(crate) fn resource(key: &str) -> String {
    format!("{RESOURCE_PREFIX}{}", hex::encode(Sha256::digest(key.as_bytes())))
}

/// A queued attempt in one request. `@P7` says whether this session holds
/// the queue lock already (the head). If not, it asks for it (Exclusive,
/// waiting at most `@P5` ms); once it holds it, it blocks on the signal
/// (Shared, for what is left of `@P5`) and lets go of that at once. Then
/// `Acquire` either way. Its rows: the `Acquire` row, then whether the
/// session holds the queue lock now, how the queue and signal requests ended
/// (sp_getapplock's status; NULL when not asked), how long the signal
/// request took and how long everything before the `Acquire` took, in
/// microseconds on the server clock.
const QUEUED_THEN_ACQUIRE: &str = concat!(
    "DECLARE @Head bit = @P7, @Queue int = NULL, @Signal int = NULL, @Began datetime2(7) = SYSUTCDATETIME(),
    @Asked datetime2(7), @Left int, @SignalWaited int = NULL, @Waited int;
IF @Head = 0
BEGIN
    EXEC @Queue = sp_getapplock @Resource = @P6, @LockMode = N'Exclusive', @LockOwner = N'Session', @LockTimeout = @P5;
    IF @Queue >= 0 SET @Head = 1;
",
    after_applock!("@Queue"),
    "
END;
IF @Head = 1
BEGIN
    SET @Left = @P5 - DATEDIFF(millisecond, @Began, SYSUTCDATETIME());
    IF @Left < 1 SET @Left = 1;
    SET @Asked = SYSUTCDATETIME();
    EXEC @Signal = sp_getapplock @Resource = @P4, @LockMode = N'Shared', @LockOwner = N'Session', @LockTimeout = @Left;
    SET @SignalWaited = DATEDIFF(microsecond, @Asked, SYSUTCDATETIME());
    IF @Signal >= 0 EXEC sp_releaseapplock @Resource = @P4, @LockOwner = N'Session';
",
    after_applock!("@Signal"),
    "
END;
SET @Waited = DATEDIFF(microsecond, @Began, SYSUTCDATETIME());
EXEC fence_api.Acquire @ResourceKey = @P1, @Owner = @P2, @LeaseSeconds = @P3;
SELECT @Head AS Head, @Queue AS Queue, @Signal AS Signal, @SignalWaited AS SignalWaitedMicroseconds,
    @Waited AS WaitedMicroseconds;"
);

/// After a refused attempt: rolls back what the error may have left open
/// (never a session lock) and answers whether the session holds the queue
/// lock `@P1`.
const HOLDS_QUEUE: &str = "IF @@TRANCOUNT > 0 ROLLBACK;
SELECT CASE WHEN APPLOCK_MODE(N'public', @P1, N'Session') = N'NoLock' THEN 0 ELSE 1 END AS Held;";

/// Whether `session` holds `queue`, asked within `timeout`; `None` when it
/// cannot tell, and the session is to be closed. Marks the session as
/// whole again when it answers.
async fn holds_queue(
    session: &mut bb8::PooledConnection<'static, Manager>,
    queue: &str,
    timeout: Duration,
) -> Option<bool> {
    let asked = async {
        let row = session
            .connection
            .query(HOLDS_QUEUE, &[&queue])
            .await?
            .into_row()
            .await?;
        Ok::<_, tiberius::error::Error>(row.and_then(|row| row.get::<i32, _>("Held")))
    };
    match tokio::time::timeout(timeout, asked).await {
        Ok(Ok(Some(held))) => {
            session.in_call = false;
            session.last_used = Instant::now();
            Some(held == 1)
        }
        _ => None,
    }
}

/// Lets go of the queue lock `@P1`.
const LEAVE: &str = "EXEC sp_releaseapplock @Resource = @P1, @LockOwner = N'Session';";

/// A waiter's session and whether it holds the key's queue lock: its place
/// in the queue, kept across the attempts of one wait. Dropped while it
/// holds the lock, its session is closed, never pooled.
#[derive(Default)]
pub(crate) struct Place {
    session: Option<bb8::PooledConnection<'static, Manager>>,
    /// The queue lock this session holds, if it is the head.
    head: Option<String>,
}

impl Place {
    /// Whether this waiter is the head of its key's queue.
    #[cfg(test)]
    pub(crate) fn is_head(&self) -> bool {
        self.head.is_some()
    }

    /// Ends the wait's hold on the queue: lets go of the queue lock on a
    /// task of its own (so the next waiter becomes the head one round trip
    /// later and the caller does not wait for it), then gives the session
    /// back to the pool; a session whose letting go failed is closed.
    pub(crate) fn leave(mut self, call_timeout: Duration) {
        let (Some(mut session), Some(queue)) = (self.session.take(), self.head.take()) else {
            return;
        };
        session.in_call = true;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let sent = async {
                session
                    .connection
                    .query(LEAVE, &[&queue.as_str()])
                    .await?
                    .into_results()
                    .await
            };
            match tokio::time::timeout(call_timeout, sent).await {
                Ok(Ok(_)) => {
                    session.in_call = false;
                    session.last_used = Instant::now();
                }
                Ok(Err(error)) => {
                    tracing::debug!(%error, "letting go of a waiters' queue failed; closing its session");
                }
                Err(_) => tracing::debug!("letting go of a waiters' queue timed out; closing its session"),
            }
        });
    }

    /// Forgets the session, closing it if it holds the queue lock, or may
    /// (a request that failed half way).
    fn close(&mut self) {
        if let Some(session) = self.session.as_mut() {
            session.in_call = true;
        }
        self.session = None;
        self.head = None;
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if self.head.is_some()
            && let Some(session) = self.session.as_mut()
        {
            // Closing the session lets go of every lock it holds.
            session.in_call = true;
        }
    }
}

/// A queued attempt's answer, and the place the wait keeps for its next
/// attempt.
pub(crate) struct Queued {
    pub(crate) answer: Result<(Acquire, Instant, Option<Woke>), Error>,
    pub(crate) place: Place,
}

impl Client {
    /// One queued attempt as `owner`, from `place`: waits up to `wait` for
    /// the head of the queue of `key` and then for its signal to be free,
    /// then asks `Acquire`, in one request on the wait's signal session
    /// (checked out now if the place has none). Answers the acquire, the
    /// local instant its `Acquire` may have started at, how the wait ended,
    /// and the place for the next attempt: still the head after a `Busy`,
    /// and none once acquired (its queue lock let go of).
    pub(crate) async fn acquire_queued(
        &self,
        key: &str,
        owner: Uuid,
        length: Duration,
        wait: Duration,
        mut place: Place,
    ) -> Queued {
        let answer = self.queued_attempt(key, owner, length, wait, &mut place).await;
        if matches!(answer, Ok((Acquire::Acquired(_), ..))) {
            std::mem::take(&mut place).leave(self.config.call_timeout);
        }
        Queued { answer, place }
    }

    async fn queued_attempt(
        &self,
        key: &str,
        owner: Uuid,
        length: Duration,
        wait: Duration,
        place: &mut Place,
    ) -> Result<(Acquire, Instant, Option<Woke>), Error> {
        let key = input::key(key)?;
        let owner = input::owner(owner)?;
        let seconds = input::lease_seconds(length)?;
        let sent_at = Instant::now();
        // The request must end well inside the call timeout.
        let wait = wait.min(self.config.call_timeout / 2);
        let deadline = sent_at + wait;
        // A fake has no sessions to queue on: its waiters poll.
        #[cfg(feature = "fake")]
        if self.as_fake().is_some() {
            tokio::time::sleep_until(deadline).await;
            let (answer, sent_at) = self.acquire_timed(key, owner, length).await?;
            return Ok((answer, sent_at, Some(Woke::NoSession)));
        }
        if place.session.is_none() {
            // Never less than a moment to check out (see CHECKOUT_GRACE).
            let checkout_by = deadline.max(sent_at + CHECKOUT_GRACE);
            let checkout = tokio::time::timeout_at(checkout_by, self.signals.get_owned()).await;
            meter::signal_sessions(&self.signals);
            match checkout {
                Ok(Ok(session)) => place.session = Some(session),
                _ => {
                    self.warn_if_signals_ran_out();
                    tokio::time::sleep_until(deadline).await;
                    let (answer, sent_at) = self.acquire_timed(key, owner, length).await?;
                    return Ok((answer, sent_at, Some(Woke::NoSession)));
                }
            }
        }
        let Some(session) = place.session.as_mut() else {
            unreachable!("a session was just checked out");
        };
        // At least a millisecond: Babelfish 4.2 answers a request that may
        // not wait at all with -999 rather than -1 when someone holds it.
        let millis = i32::try_from(deadline.saturating_duration_since(Instant::now()).as_millis())
            .unwrap_or(i32::MAX)
            .max(1);
        let signal = super::handover::resource(key);
        let queue = resource(key);
        let head = place.head.is_some();
        let arguments: [&dyn tiberius::ToSql; 7] = [&key, &owner, &seconds, &signal, &millis, &queue, &head];
        let exchange = Box::pin(batch_on(
            session,
            &self.config,
            Procedure::Acquire,
            QUEUED_THEN_ACQUIRE,
            &arguments,
            Some(2),
        ));
        let replies = match self
            .observed(Procedure::Acquire, About::key(key).waiting(), exchange)
            .await
        {
            Ok(replies) => replies,
            Err(error) => {
                // A refusal the server answered (Acquire's lock time-out on
                // a fence row a transaction holds, a deadlock) leaves the
                // session whole: the wait answers it `Busy` and tries again,
                // and the head keeps its place if the session can say
                // whether it holds the queue. Otherwise that is not known:
                // the session goes, and the lock with it.
                if matches!(error, Error::Server { class, .. } if class < FATAL_CLASS)
                    && let Some(head) = holds_queue(session, &queue, self.config.call_timeout).await
                {
                    place.head = head.then_some(queue);
                    return Err(error);
                }
                place.close();
                return Err(error);
            }
        };
        let answered = Instant::now();
        let (reply, row) = (&replies[0], &replies[1]);
        let read = || -> Result<_, Error> {
            let head: bool = row.required("Head")?;
            let status: Option<i32> = row.get("Signal")?;
            let signal_waited: Option<i32> = row.get("SignalWaitedMicroseconds")?;
            let waited: i32 = row.required("WaitedMicroseconds")?;
            Ok((head, status, signal_waited, waited))
        };
        let (head, status, signal_waited, waited) = match read() {
            Ok(read) => read,
            Err(error) => {
                place.close();
                return Err(error);
            }
        };
        place.head = head.then_some(queue);
        let micros = |value: i32| Duration::from_micros(u64::try_from(value).unwrap_or(0));
        // The server's own measure of the wait, capped by the local one: the
        // Acquire cannot have started after its answer came back.
        let acquire_sent = sent_at + micros(waited).min(answered.saturating_duration_since(sent_at));
        let woke = match (head, status) {
            (false, _) | (true, None) => Woke::Behind,
            (true, Some(1)) => Woke::Granted(Waited::AfterRelease),
            (true, Some(0)) if signal_waited.map(micros).unwrap_or_default() >= HELD_WAIT => {
                Woke::Granted(Waited::AfterRelease)
            }
            (true, Some(-1)) => Woke::Held,
            // Granted at once, or refused (cancelled, a deadlock victim, an
            // error): no signal to count on.
            (true, Some(_)) => Woke::Granted(Waited::Free),
        };
        let answer = super::api::acquire_answer(reply, key, owner, length, acquire_sent)?;
        Ok((answer, acquire_sent, Some(woke)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_named_by_the_hash_of_its_key_beside_its_signal() {
        assert_eq!(
            resource("report"),
            "fencepost:queue:845e91831319e89c4d656bdb80c278ac09a7230d61e5dfd2e1b1fbb436ac8917"
        );
        assert_eq!(
            resource("report")["fencepost:queue:".len()..],
            super::super::handover::resource("report")["fencepost:lease:".len()..]
        );
        assert!(resource(&"k".repeat(256)).chars().count() <= 255);
    }

    #[test]
    fn an_empty_place_is_not_the_head() {
        assert!(!Place::default().is_head());
    }
}
