//! The deploy lock: one deployment per database at a time.

use std::time::{Duration, Instant};

use super::read::{parse_state, state_query};
use super::session::Session;
use crate::deploy::error::{DeployError, LockHolder};
use crate::deploy::sql::{DEPLOY_LOCK_HOLDER, release_deploy_lock, take_deploy_lock};
use crate::deploy::state::ServerState;
use crate::tsql::literal;

/// Waits up to `timeout` for the session-scoped deploy lock and, once it is
/// granted, reads the deployed state (hashing the definitions of `shipped`)
/// in the same request: the one round trip a deploy with nothing to do
/// spends before its permission scripts. Returns how long it waited, and the
/// state. The lock belongs to the session, so it also ends if the deploying
/// process dies.
pub(super) async fn lock_and_read_state(
    session: &mut Session<'_>,
    timeout: Duration,
    shipped: &[String],
) -> Result<(Duration, ServerState), DeployError> {
    const CONTEXT: &str = "taking the deploy lock and reading the deployed state";
    let started = Instant::now();
    // The wait is timed on the server, around sp_getapplock alone: the time
    // the request takes also counts reading the state. The state query runs
    // through sp_executesql so that it is compiled only once the lock is
    // granted: compiled with the batch, before the timer starts, its catalog
    // views can take seconds of a fresh session (Babelfish) that the deploy
    // spent waiting all the same.
    let sql = format!(
        "DECLARE @LockRequested datetime2 = SYSUTCDATETIME();
{}
SELECT DATEDIFF(millisecond, @LockRequested, SYSUTCDATETIME()) AS LockWaitMilliseconds;
IF @Status IN (0, 1)
    EXEC sys.sp_executesql {};",
        take_deploy_lock(timeout),
        literal(&state_query(shipped))
    );
    let mut results = match session.run(&sql).await {
        Ok(results) => results,
        Err(error) => {
            // The lock may have been granted before the state query failed:
            // give it back. The first error is the one worth reporting.
            let _ = release(session).await;
            return Err(DeployError::server(CONTEXT)(error));
        }
    };
    let first = |results: &[Vec<tiberius::Row>], set: usize| {
        results
            .get(set)
            .and_then(|rows| rows.first())
            .and_then(|row| row.get::<i32, usize>(0))
    };
    let status = first(&results, 0);
    let waited = first(&results, 1)
        .and_then(|ms| u64::try_from(ms).ok())
        .map_or_else(|| started.elapsed(), Duration::from_millis);
    match status {
        Some(0 | 1) => {
            results.drain(..results.len().min(2));
            match parse_state(results, CONTEXT) {
                Ok(state) => Ok((waited, state)),
                Err(error) => {
                    let _ = release(session).await;
                    Err(error)
                }
            }
        }
        Some(-1) => Err(DeployError::LockTimeout {
            waited,
            holder: holder(session).await,
        }),
        other => Err(DeployError::unexpected(
            "taking the deploy lock",
            format_args!("sp_getapplock answered {other:?}"),
        )),
    }
}

/// The session holding the deploy lock, when the engine shows application
/// locks (SQL Server does, to a login with VIEW SERVER STATE; Babelfish has
/// no `sys.dm_tran_locks`). Any failure to tell is `None`: the timeout is the
/// error worth reporting.
async fn holder(session: &mut Session<'_>) -> Option<LockHolder> {
    let rows = session.run(DEPLOY_LOCK_HOLDER).await.ok()?;
    let row = rows.iter().flatten().next()?;
    let text = |i: usize| row.get::<&str, usize>(i).unwrap_or("?").trim().to_string();
    Some(LockHolder {
        session_id: row.get::<i32, usize>(0)?,
        login: text(1),
        host: text(2),
        program: text(3),
    })
}

/// Releases the deploy lock, first rolling back any transaction a script
/// left open, which is then an error: its work never committed.
pub(super) async fn release(session: &mut Session<'_>) -> Result<(), DeployError> {
    let rows = session
        .run(&release_deploy_lock())
        .await
        .map_err(DeployError::server("releasing the deploy lock"))?;
    let open = rows.iter().flatten().find_map(|row| row.get::<i32, usize>(0));
    match open {
        Some(0) => Ok(()),
        Some(open) => Err(DeployError::TransactionLeftOpen { open }),
        None => Err(DeployError::unexpected(
            "releasing the deploy lock",
            "no transaction count came back",
        )),
    }
}
