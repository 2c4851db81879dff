//! Applying one migration: batch by batch (split on `GO`), inside one
//! transaction with its history row, every result of every batch read so that
//! no server error is lost. A migration is recorded only when every batch
//! left that transaction intact. The history is refinery's table, with
//! refinery's checksum: the rows are the ones its runner would write.

use std::time::Duration;

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::session::Session;
use crate::deploy::error::DeployError;
use crate::deploy::sql::{
    MIGRATION_MARKER, SESSION_OPTIONS, begin_migration, bootstrap, commit_migration, commit_migration_alone,
};
use crate::deploy::upgrade;
use crate::source::MigrationSource;
use crate::tsql::{is_lock_timeout, literal, split_batches};

/// Creates schema `fence` and the migration history when missing, before
/// the first migration of a deploy.
pub(crate) async fn create_history(session: &mut Session<'_>) -> Result<(), DeployError> {
    let batches = split_batches(&bootstrap()).map_err(|e| unexpected(&e.to_string()))?;
    session.run_script("fencepost's migration history", &batches).await
}

/// Applies one migration, whose statements wait at most `lock_timeout` for
/// a lock: in one transaction, checking after every batch that the batch left
/// that transaction as it found it, and recording the migration in the batch
/// that commits; or, for one marked `-- fencepost: no-transaction`, batch by
/// batch in autocommit. What a failure left open is rolled back.
pub(crate) async fn apply(
    session: &mut Session<'_>,
    shipped: &MigrationSource,
    lock_timeout: Duration,
) -> Result<(), DeployError> {
    let lock_timeout_ms = i64::try_from(lock_timeout.as_millis()).unwrap_or(i64::from(i32::MAX));
    let result = if shipped.is_transactional() {
        let begin = format!(
            "{}\nCREATE TABLE {MIGRATION_MARKER} (Opened bit NOT NULL);",
            begin_migration(lock_timeout_ms)
        );
        if let Err(error) = session.run(&begin).await {
            session.roll_back().await;
            return Err(DeployError::server("starting a migration transaction")(error));
        }
        apply_in_transaction(session, shipped, lock_timeout_ms).await
    } else {
        apply_without_transaction(session, shipped, lock_timeout_ms).await
    };
    if result.is_err() {
        session.roll_back().await;
    }
    result
}

async fn apply_in_transaction(
    session: &mut Session<'_>,
    shipped: &MigrationSource,
    lock_timeout_ms: i64,
) -> Result<(), DeployError> {
    let file = format!("migrations/{}", shipped.file());
    if let Some(step) = upgrade::before(shipped) {
        let context = format!("preparing the data for {file}");
        session.run(step).await.map_err(DeployError::server(context))?;
    }
    for (index, batch) in upgrade::batches_as_run(shipped).iter().enumerate() {
        for _ in 0..batch.repeat {
            let ran = session.run_batch(&file, index + 1, batch).await;
            ran.map_err(|e| lock_timed_out(e, lock_timeout_ms))?;
            let state = session.transaction_state().await?;
            if let Some(problem) = state.problem_inside_migration() {
                return Err(DeployError::TransactionMisuse {
                    file,
                    batch: index + 1,
                    line: batch.line,
                    problem,
                });
            }
        }
    }
    record(session, shipped, true).await
}

/// Runs a migration marked `-- fencepost: no-transaction` batch by batch
/// in autocommit, checking after each that it left no transaction open,
/// and records it, in a transaction of its own, only after the last.
async fn apply_without_transaction(
    session: &mut Session<'_>,
    shipped: &MigrationSource,
    lock_timeout_ms: i64,
) -> Result<(), DeployError> {
    let file = format!("migrations/{}", shipped.file());
    session
        .run(&format!("{SESSION_OPTIONS}\nSET LOCK_TIMEOUT {};", lock_timeout_ms))
        .await
        .map_err(DeployError::server("setting the session options"))?;
    let mut done = 0;
    for (index, batch) in upgrade::batches_as_run(shipped).iter().enumerate() {
        let step = async {
            for _ in 0..batch.repeat {
                let ran = session.run_batch(&file, index + 1, batch).await;
                ran.map_err(|e| lock_timed_out(e, lock_timeout_ms))?;
                let state = session.transaction_state().await?;
                if let Some(problem) = state.problem_outside_any() {
                    return Err(DeployError::TransactionMisuse {
                        file: file.clone(),
                        batch: index + 1,
                        line: batch.line,
                        problem,
                    });
                }
            }
            Ok(())
        };
        if let Err(cause) = step.await {
            return Err(partly_applied(shipped, done, cause));
        }
        done += 1;
    }
    let recorded = record(session, shipped, false);
    recorded.await.map_err(|cause| partly_applied(shipped, done, cause))
}

/// Writes the history row and commits: inside the migration's
/// transaction (dropping the marker with it), or, for a migration that
/// ran without one, in a transaction of its own.
async fn record(session: &mut Session<'_>, shipped: &MigrationSource, in_transaction: bool) -> Result<(), DeployError> {
    let m = shipped.migration();
    let applied_on = OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .map_err(|e| unexpected(&e.to_string()))?;
    let applied_on = literal(&applied_on);
    let commit = if in_transaction {
        let drop_marker = format!("DROP TABLE {MIGRATION_MARKER};\n");
        commit_migration(m.version(), m.name(), &applied_on, m.checksum(), &drop_marker)
    } else {
        format!(
            "{}\nSET LOCK_TIMEOUT -1;",
            commit_migration_alone(m.version(), m.name(), &applied_on, m.checksum())
        )
    };
    session
        .run(&commit)
        .await
        .map(drop)
        .map_err(DeployError::server(format!("recording migration {}", shipped.name())))
}

/// `error`, as a migration lock timeout when the server ended the batch for
/// waiting longer than `lock_timeout_ms` for a lock.
fn lock_timed_out(error: DeployError, lock_timeout_ms: i64) -> DeployError {
    match error {
        DeployError::BatchFailed {
            file,
            batch,
            line,
            message,
        } if server_error_of(&message).is_some_and(|(number, text)| is_lock_timeout(number, text)) => {
            DeployError::MigrationLockTimeout {
                file,
                batch,
                line,
                seconds: lock_timeout_ms as f64 / 1000.0,
                message,
            }
        }
        other => other,
    }
}

/// The number and text of a server error as `batch_failed` renders it
/// (`error N: text`).
fn server_error_of(message: &str) -> Option<(u32, &str)> {
    let (number, text) = message.strip_prefix("error ")?.split_once(": ")?;
    Some((number.parse().ok()?, text))
}

/// `cause`, saying that what a migration without a transaction ran before
/// its batch `done + 1` failed stays applied.
fn partly_applied(shipped: &MigrationSource, done: usize, cause: DeployError) -> DeployError {
    DeployError::PartlyApplied {
        name: shipped.name(),
        batch: done + 1,
        cause: Box::new(cause),
    }
}

fn unexpected(what: &str) -> DeployError {
    DeployError::unexpected("applying migrations", what)
}
