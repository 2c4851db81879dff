//! The handover signal: a waiter learns of a release as soon as it happens,
//! from the engine's lock queue, instead of at its next poll.
//!
//! While a [`LeaseGuard`](super::LeaseGuard) holds a lease (from its 10th
//! millisecond: a quicker tenure costs no signal), its client keeps an
//! exclusive session application lock (`sp_getapplock`) named after the key,
//! on one of the few sessions all its guards share (see `signal_holder`),
//! and lets go of it only once the fence row was given back: in the same
//! request as the guard's release, which is sent on that session (see
//! `signal_loan`), or after the lease was lost or the guard ended. The
//! waiter at the head of the key's queue (see `queue`) blocks on a shared
//! request for that lock inside the same batch as its `Acquire`, on a
//! session of its own, so the engine wakes it the moment the holder lets
//! go, and it asks the fence at once, in the same request.
//!
//! The lock is only a wake-up call. The fence row stays the only authority:
//! a waiter woken by the lock still asks `Acquire`, which may answer `Busy`
//! (a holder without a guard, one whose session ended and freed the lock
//! while its lease runs to its end, a frozen one, a waiter that lost the
//! race). The waiter then polls, at the pace it always did, until it sees the
//! signal held again. No wait on the lock outlasts the pause a poll would
//! have slept, so losing the signal degrades to polling, never to a wrong
//! grant or a later one.

use std::pin::Pin;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::time::Instant;
use uuid::Uuid;

use super::Client;
use super::config::ClientConfig;
use super::pool::{Manager, Session};
use super::signal_holder::SignalHandle;
use crate::connection::ConnectError;
use crate::tsql::after_applock;

/// What every signal's lock name starts with.
const RESOURCE_PREFIX: &str = "fencepost:lease:";

/// The fewest sessions a client's waiting acquires may block on at once,
/// whatever its pool size.
const MIN_SESSIONS: u32 = 4;

/// The application lock that signals the lease on `key`:
/// `fencepost:lease:` and the SHA-256 of the key's UTF-8 bytes in lower-case
/// hex. `sp_getapplock` names are at most 255 characters and compared as
/// binary, and a key has up to 256; the hash keeps every key exact and the
/// name 80 characters long. Another language's client that keeps the same
/// lock under the same name wakes this client's waiters, and is woken by its
/// guards.
pub(crate) fn resource(key: &str) -> String {
    format!("{RESOURCE_PREFIX}{}", hex::encode(Sha256::digest(key.as_bytes())))
}

/// How many sessions `config`'s client may keep open for its waiting
/// acquires (its guards' signals share a few of their own).
pub(crate) fn sessions(config: &ClientConfig) -> u32 {
    config
        .signal_sessions
        .unwrap_or_else(|| config.max_connections.max(MIN_SESSIONS))
}

/// The pool of the waiters' signal sessions, as `pool::build` makes the
/// others, each session warmed up as it opens.
pub(crate) fn pool(config: &ClientConfig, manager: Manager) -> bb8::Pool<Manager> {
    let warm_up = WarmUp {
        server: manager.connection_string.server(),
    };
    bb8::Pool::builder()
        .max_size(sessions(config))
        .test_on_check_out(true)
        .connection_timeout(config.checkout_timeout)
        .connection_customizer(Box::new(warm_up))
        .build_unchecked(manager)
}

/// Calls `Acquire` once on each new signal session, for a key nobody
/// provisioned (`NotProvisioned`, nothing written): Babelfish compiles a
/// procedure on a session's first call of it, about half a second, which a
/// waiter must not pay between its wake-up and its grant, nor add to its
/// pause. It takes and lets go of an application lock nobody holds first:
/// a Babelfish session's first `sp_getapplock` takes 17 to 24 ms, which a
/// waiter would read as a signal let go of while it waited.
#[derive(Debug)]
struct WarmUp {
    /// The server the sessions are opened on, for the error of a failed
    /// warm-up.
    server: String,
}

impl bb8::CustomizeConnection<Session, ConnectError> for WarmUp {
    fn on_acquire<'a>(
        &'a self,
        session: &'a mut Session,
    ) -> Pin<Box<dyn Future<Output = Result<(), ConnectError>> + Send + 'a>> {
        Box::pin(async move {
            let key = format!("fencepost:signal-warm-up:{}", Uuid::new_v4());
            let owner = Uuid::new_v4();
            let seconds = 1i32;
            // A session whose warm-up failed is never pooled: its reply may
            // be half read, and a session that cannot run `Acquire` is of no
            // use to a waiter. The pool opens another in its place within
            // the checkout's bound, or the waiter polls.
            exchange(session, WARM_UP, &[&key, &owner, &seconds])
                .await
                .map(drop)
                .map_err(|driver| {
                    tracing::debug!(error = %driver, "warming up a signal session failed; closing it");
                    ConnectError::Other {
                        server: self.server.clone(),
                        driver,
                    }
                })
        })
    }
}

const WARM_UP: &str = concat!(
    "DECLARE @Warm int;
EXEC @Warm = sp_getapplock @Resource = N'fencepost:signal-warm-up', @LockMode = N'Shared', @LockOwner = N'Session', @LockTimeout = 1000;
IF @Warm >= 0 EXEC sp_releaseapplock @Resource = N'fencepost:signal-warm-up', @LockOwner = N'Session';
",
    after_applock!("@Warm"),
    "
EXEC fence_api.Acquire @ResourceKey = @P1, @Owner = @P2, @LeaseSeconds = @P3;"
);

/// The least time a waiting attempt gives its checkout of a signal session,
/// whatever it may wait: enough for the check of an idle session, not for
/// opening one (which goes on in the background for the next attempt).
pub(super) const CHECKOUT_GRACE: Duration = Duration::from_millis(50);

/// Whether a granted signal was held by someone when the wait began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waited {
    /// Granted at once: nobody held it.
    Free,
    /// Granted once its holder let go of it (SQL Server answers 1; Babelfish
    /// answers 0, so a grant that took longer than [`HELD_WAIT`] on the
    /// server clock counts too).
    AfterRelease,
}

/// A grant later than this after the request was queued on a lock somebody
/// held: an uncontended grant takes a fraction of it.
pub(super) const HELD_WAIT: Duration = Duration::from_millis(1);

/// How a waiting attempt's wait on the signal ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Woke {
    /// The lock was free, or was let go of during the wait: no guard holds
    /// it now.
    Granted(Waited),
    /// Someone held it for the whole wait: a guard holds the lease, and will
    /// let go of the lock when it releases.
    Held,
    /// No signal session was to be had within the wait; the attempt was a
    /// plain `Acquire` after it.
    NoSession,
    /// The waiter was not the head of the key's queue within the wait (see
    /// `queue`); the attempt was a plain `Acquire` after it, a poll.
    Behind,
}

impl Client {
    /// Warns, once per client, when every waiter's signal session is in
    /// use: from then on further waiting acquires poll.
    pub(super) fn warn_if_signals_ran_out(&self) {
        let state = self.signals.state();
        if state.connections < sessions(&self.config) || state.idle_connections > 0 {
            return;
        }
        if !self.signals_ran_out.swap(true, std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(
                signal_sessions = state.connections,
                "every handover signal session is in use (one per waiting acquire): further waiters poll, \
                 about half a second a handover; raise ClientConfig::signal_sessions"
            );
        }
    }

    /// Raises the signal of the lease on `key` after
    /// [`RAISE_AFTER`](super::signal_holder::RAISE_AFTER), on one of the
    /// sessions every guard of this client shares (see `signal_holder`),
    /// until the handle lowers it; not at all if the handle abandons it
    /// first (the guard began giving the lease back: its release wakes a
    /// waiter soon, and a tenure that ends this quickly costs no request
    /// beside its own calls). Raising costs the caller nothing: a lease is
    /// never held up for its signal, and one that could not be raised leaves
    /// waiters to poll.
    pub(crate) fn raise_signal(&self, key: &str) -> SignalHandle {
        // A fake has no sessions to hold a lock on: its waiters poll.
        #[cfg(feature = "fake")]
        if self.as_fake().is_some() {
            return SignalHandle::inert();
        }
        self.signal_holders.raise(resource(key))
    }

    /// Requests sent on the sessions this client's guards hold their
    /// signals on: what holding leases costs beside the renewals.
    #[cfg(feature = "bench")]
    pub(crate) fn signal_requests_sent(&self) -> u64 {
        self.signal_holders.requests_sent()
    }
}

/// Runs `statement` on `session` and returns its rows, keeping the session
/// fit for the pool only when the reply was read to its end.
async fn exchange(
    session: &mut Session,
    statement: &str,
    arguments: &[&dyn tiberius::ToSql],
) -> Result<Vec<tiberius::Row>, tiberius::error::Error> {
    session.in_call = true;
    let rows = session
        .connection
        .query(statement, arguments)
        .await?
        .into_first_result()
        .await?;
    session.in_call = false;
    session.last_used = Instant::now();
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_is_named_by_the_hash_of_its_key_and_fits_an_applock_name() {
        // SHA-256 of "report", as any client computes it.
        assert_eq!(
            resource("report"),
            "fencepost:lease:845e91831319e89c4d656bdb80c278ac09a7230d61e5dfd2e1b1fbb436ac8917"
        );
        let longest = "k".repeat(256);
        assert_eq!(resource(&longest).chars().count(), 80);
        assert!(resource(&longest).chars().count() <= 255);
    }

    #[test]
    fn keys_that_differ_in_case_or_trailing_spaces_have_different_signals() {
        assert_ne!(resource("Report"), resource("report"));
        assert_ne!(resource("report "), resource("report"));
    }

    #[test]
    fn a_client_of_one_connection_may_still_signal_and_wait() {
        let mut config = ClientConfig::new(
            crate::connection::ConnectionString::parse("Server=tcp:db,1433;User ID=u;Password=p").unwrap(),
        );
        config.max_connections(1);
        assert_eq!(sessions(&config), MIN_SESSIONS);
        config.max_connections(32);
        assert_eq!(sessions(&config), 32);
    }

    #[tokio::test]
    async fn a_signal_session_whose_warm_up_failed_is_never_handed_out() {
        use crate::client::pool::{LastConnectError, idle_check};
        use crate::connection::stand_in::{Answer, StandIn};
        let stand_in = StandIn::start(Answer::FailEachRequest {
            number: 2812,
            message: "Could not find stored procedure 'fence_api.Acquire'.",
        })
        .await;
        let mut config = ClientConfig::new(
            crate::connection::ConnectionString::parse(&stand_in.ado("User ID=u;Password=p;Database=app")).unwrap(),
        );
        config.checkout_timeout(Duration::from_millis(500));
        let manager = Manager::new(&config, LastConnectError::default(), idle_check(&config));
        let signals = pool(&config, manager);
        match signals.get().await {
            Ok(session) => panic!(
                "a session was handed out after its warm-up failed (in_call: {})",
                session.in_call
            ),
            Err(bb8::RunError::TimedOut | bb8::RunError::User(_)) => {}
        }
        assert!(stand_in.logins() >= 1, "no session was opened and warmed up");
    }
}
