//! The deploy lock: one deployment per database at a time.

use std::time::{Duration, Instant};

use super::error::DeployError;
use super::session::Session;
use super::statements::{release_deploy_lock, take_deploy_lock};

/// Waits up to `timeout` for the session-scoped deploy lock and returns how
/// long it waited. The lock belongs to the session, so it also ends if the
/// deploying process dies.
pub async fn take(session: &mut Session<'_>, timeout: Duration) -> Result<Duration, DeployError> {
    let started = Instant::now();
    let rows = session
        .run(&take_deploy_lock(timeout))
        .await
        .map_err(DeployError::server("taking the deploy lock"))?;
    let status = rows.iter().flatten().find_map(|row| row.get::<i32, usize>(0));
    match status {
        Some(0 | 1) => Ok(started.elapsed()),
        Some(-1) => Err(DeployError::LockTimeout {
            waited: started.elapsed(),
        }),
        other => Err(DeployError::Server {
            context: "taking the deploy lock".into(),
            source: tiberius::error::Error::Protocol(format!("sp_getapplock answered {other:?}").into()),
        }),
    }
}

/// Releases the deploy lock, first rolling back any transaction a script
/// left open, which is then an error: its work never committed.
pub async fn release(session: &mut Session<'_>) -> Result<(), DeployError> {
    let rows = session
        .run(&release_deploy_lock())
        .await
        .map_err(DeployError::server("releasing the deploy lock"))?;
    let open = rows.iter().flatten().find_map(|row| row.get::<i32, usize>(0));
    match open {
        Some(0) => Ok(()),
        Some(open) => Err(DeployError::TransactionLeftOpen { open }),
        None => Err(DeployError::Server {
            context: "releasing the deploy lock".into(),
            source: tiberius::error::Error::Protocol("no transaction count came back".into()),
        }),
    }
}
