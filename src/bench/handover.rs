//! `handover`: how soon a waiter holds what its holder let go of early, the
//! time from the release's reply to the waiter's grant. Workers are pairs:
//! a holder, and a waiter that starts waiting right after the holder took
//! the key.
//!
//! - `applock_handover`: two sessions handing over an exclusive
//!   `sp_getapplock` session lock, the engine's wait queue (a baseline).
//! - `handover`: the holder's lease in a [`LeaseGuard`](crate::client::LeaseGuard),
//!   which raises the handover signal; the waiter in `acquire_waiting`.
//! - `handover_polling`: the same with a holder that releases without a
//!   guard, so no signal: the waiter polls, as every waiter once did.
//!
//! Requests are the waiter's alone: what waiting costs the server.

use std::time::Duration;

use tokio::time::Instant;

use super::BenchError;
use super::runner::{Step, Worker};
use crate::client::{Acquire, Lease, Release};
use crate::tsql::literal;
use crate::{Client, Connection};

/// The scenario names, in the order they run.
pub(crate) const HANDOVER_SCENARIOS: [&str; 3] = ["applock_handover", "handover", "handover_polling"];

/// The least time a holder keeps the key before it lets go: ample for the
/// waiter to be waiting, and for a guard to have raised its signal.
const HOLD: Duration = Duration::from_millis(100);
/// Up to this much more, at random: a release lands anywhere in a polling
/// waiter's second, as releases do, rather than always at the same point of
/// it. Far short of the lease.
const HOLD_SPREAD: Duration = Duration::from_secs(1);
/// A lease no round outlasts.
const LEASE: Duration = Duration::from_secs(30);
/// How long a waiter waits before the round is an error.
const WAIT: Duration = Duration::from_secs(30);

/// How long this round's holder keeps the key.
fn hold() -> Duration {
    use rand::RngExt;
    HOLD + rand::rng().random_range(Duration::ZERO..HOLD_SPREAD)
}

/// `handover` or `handover_polling` for one pair.
pub(crate) struct Handover {
    pub holder: Client,
    pub waiter: Client,
    pub key: String,
    /// Whether the holder keeps its lease in a guard, which signals.
    pub guarded: bool,
}

impl Handover {
    fn name(&self) -> &'static str {
        if self.guarded { "handover" } else { "handover_polling" }
    }

    /// Holds the lease for [`hold`] and gives it back; answers when the
    /// release's reply came.
    async fn hold_and_release(&self, lease: Lease) -> Result<Instant, BenchError> {
        let name = self.name();
        let released = if self.guarded {
            let guard = self.holder.guard(lease);
            tokio::time::sleep(hold()).await;
            guard.release().await
        } else {
            tokio::time::sleep(hold()).await;
            self.holder.release(&lease).await
        };
        match released.map_err(BenchError::client(name))? {
            Release::Released => Ok(Instant::now()),
            other => Err(BenchError::unexpected(name, format!("release answered {other:?}"))),
        }
    }
}

impl Worker for Handover {
    async fn operation(&mut self) -> Result<Vec<Step>, BenchError> {
        let name = self.name();
        let lease = match self
            .holder
            .acquire(&self.key, LEASE)
            .await
            .map_err(BenchError::client(name))?
        {
            Acquire::Acquired(lease) => lease,
            other => {
                return Err(BenchError::unexpected(
                    name,
                    format!("the holder's acquire answered {other:?}"),
                ));
            }
        };
        let sent = self.waiter.requests_sent();
        let waiting = async {
            let answer = self.waiter.acquire_waiting(&self.key, LEASE, WAIT).await;
            (answer, Instant::now())
        };
        let (released, (answer, taken)) = tokio::join!(self.hold_and_release(lease), waiting);
        let released = released?;
        let requests = self.waiter.requests_sent() - sent;
        let lease = match answer.map_err(BenchError::client(name))? {
            Acquire::Acquired(lease) => lease,
            other => {
                return Err(BenchError::unexpected(
                    name,
                    format!("the waiter's acquire answered {other:?}"),
                ));
            }
        };
        let elapsed = taken.saturating_duration_since(released);
        match self.waiter.release(&lease).await.map_err(BenchError::client(name))? {
            Release::Released => Ok(vec![Step { elapsed, requests }]),
            other => Err(BenchError::unexpected(
                name,
                format!("the waiter's release answered {other:?}"),
            )),
        }
    }
}

/// `applock_handover`: the holder's session takes an exclusive session lock,
/// the waiter's blocks on it, the holder lets go after [`hold`].
pub(crate) struct ApplockHandover {
    pub holder: Connection,
    pub waiter: Connection,
    take: String,
    give_back: String,
}

impl ApplockHandover {
    pub(crate) fn new(holder: Connection, waiter: Connection, key: &str) -> ApplockHandover {
        let resource = literal(key);
        ApplockHandover {
            holder,
            waiter,
            take: format!(
                "DECLARE @r int; EXEC @r = sp_getapplock @Resource = {resource}, @LockMode = N'Exclusive', \
                 @LockOwner = N'Session', @LockTimeout = {}; SELECT @r AS Result;",
                WAIT.as_millis()
            ),
            give_back: format!("EXEC sp_releaseapplock @Resource = {resource}, @LockOwner = N'Session';"),
        }
    }
}

const APPLOCK: &str = "applock_handover";

/// Takes the lock on `conn` with `take`.
async fn take(conn: &mut Connection, take: &str) -> Result<(), BenchError> {
    let row = conn
        .simple_query(take)
        .await
        .map_err(BenchError::server(APPLOCK))?
        .into_row()
        .await
        .map_err(BenchError::server(APPLOCK))?;
    match row.and_then(|r| r.get::<i32, _>(0)) {
        Some(0 | 1) => Ok(()),
        other => Err(BenchError::unexpected(
            APPLOCK,
            format!("sp_getapplock answered {other:?}"),
        )),
    }
}

async fn give_back(conn: &mut Connection, give_back: &str) -> Result<(), BenchError> {
    conn.simple_query(give_back)
        .await
        .map_err(BenchError::server(APPLOCK))?
        .into_results()
        .await
        .map_err(BenchError::server(APPLOCK))?;
    Ok(())
}

impl Worker for ApplockHandover {
    async fn operation(&mut self) -> Result<Vec<Step>, BenchError> {
        let Self {
            holder,
            waiter,
            take: taking,
            give_back: giving,
        } = self;
        take(holder, taking).await?;
        let waiting = async {
            take(waiter, taking).await?;
            Ok::<_, BenchError>(Instant::now())
        };
        let holding = async {
            tokio::time::sleep(hold()).await;
            give_back(holder, giving).await?;
            Ok::<_, BenchError>(Instant::now())
        };
        let (taken, released) = tokio::join!(waiting, holding);
        let elapsed = taken?.saturating_duration_since(released?);
        give_back(waiter, giving).await?;
        // The waiter's one request, as the fence's waiter counts its own.
        Ok(vec![Step { elapsed, requests: 1 }])
    }
}
