//! refinery's migration driver for fencepost: each migration runs batch by
//! batch (split on `GO`), inside one transaction with its history row, and
//! every result of every batch is read so that no server error is lost. A
//! migration is recorded only when every batch left that transaction intact.

use std::collections::HashMap;
use std::time::Instant;

use refinery_core::traits::r#async::{AsyncMigrate, AsyncQuery, AsyncTransaction};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::batch::split_batches;
use super::error::DeployError;
use super::migration::MigrationSource;
use super::session::Session;
use super::state::HISTORY_TABLE;
use super::statements::{
    MIGRATION_MARKER, SESSION_OPTIONS, begin_migration, bootstrap, commit_migration, commit_migration_alone,
};
use super::upgrade;
use crate::tsql::{is_lock_timeout, literal};

/// What the driver tells the caller as it goes.
#[derive(Clone, Debug)]
pub enum MigrationEvent {
    /// A migration is about to run.
    Started(String),
    /// A migration committed.
    Committed {
        /// e.g. `V1__lease_tables`.
        name: String,
        /// How long it took.
        seconds: f64,
    },
}

/// The error refinery sees; the full [`DeployError`] is kept in the driver
/// for the caller, since refinery only passes errors on as text and a box.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct DriverError(String);

/// A refinery driver over a deploy session.
pub struct MigrationDriver<'s, 'c> {
    session: &'s mut Session<'c>,
    /// Shipped migrations by version: refinery hands over a migration's text
    /// and its history insert, and the version in that insert says which one
    /// it is (two migrations may have the same text).
    by_version: HashMap<i32, MigrationSource>,
    on_event: &'s mut (dyn FnMut(MigrationEvent) + Send),
    /// How long a statement of a migration waits for a lock, in milliseconds.
    lock_timeout_ms: i64,
    failure: Option<DeployError>,
    applied: Vec<String>,
}

impl<'s, 'c> MigrationDriver<'s, 'c> {
    /// A driver for `migrations` on `session`, whose statements wait at most
    /// `lock_timeout` for a lock.
    pub fn new(
        session: &'s mut Session<'c>,
        migrations: &[MigrationSource],
        lock_timeout: std::time::Duration,
        on_event: &'s mut (dyn FnMut(MigrationEvent) + Send),
    ) -> Self {
        let by_version = migrations.iter().map(|m| (m.version(), m.clone())).collect();
        Self {
            session,
            by_version,
            on_event,
            lock_timeout_ms: i64::try_from(lock_timeout.as_millis()).unwrap_or(i64::from(i32::MAX)),
            failure: None,
            applied: Vec::new(),
        }
    }

    /// Names of the migrations this driver committed.
    pub fn applied(&self) -> &[String] {
        &self.applied
    }

    /// The error behind the last failure refinery reported, if any.
    pub fn take_failure(&mut self) -> Option<DeployError> {
        self.failure.take()
    }

    /// Runs what refinery sends: a migration with its history row, or the
    /// runner's own bootstrap.
    async fn run(&mut self, queries: &[&str]) -> Result<usize, DeployError> {
        match queries {
            [sql, insert] => match recorded_version(insert) {
                Some(version) => self.apply(version, sql).await.map(|()| 2),
                None => Err(unexpected(&format!("a history row fencepost cannot read: {insert}"))),
            },
            _ => {
                for query in queries {
                    let batches = split_batches(query).map_err(|e| unexpected(&e.to_string()))?;
                    self.session
                        .run_script("fencepost's migration history", &batches)
                        .await?;
                }
                Ok(queries.len())
            }
        }
    }

    /// Applies one migration batch by batch inside one transaction, checks
    /// after every batch that the batch left that transaction as it found
    /// it, and records the migration in the batch that commits.
    async fn apply(&mut self, version: i32, sql: &str) -> Result<(), DeployError> {
        let shipped = match self.by_version.get(&version) {
            Some(m) if m.migration().sql() == Some(sql) => m.clone(),
            _ => {
                return Err(unexpected(&format!(
                    "refinery asked to apply a version {version} that does not ship"
                )));
            }
        };
        (self.on_event)(MigrationEvent::Started(shipped.name()));
        let started = Instant::now();
        let result = if shipped.is_transactional() {
            let begin = format!(
                "{}\nCREATE TABLE {MIGRATION_MARKER} (Opened bit NOT NULL);",
                begin_migration(self.lock_timeout_ms)
            );
            if let Err(error) = self.session.run(&begin).await {
                self.session.roll_back().await;
                return Err(DeployError::server("starting a migration transaction")(error));
            }
            self.apply_in_transaction(&shipped).await
        } else {
            self.apply_without_transaction(&shipped).await
        };
        if result.is_err() {
            self.session.roll_back().await;
        }
        result?;
        (self.on_event)(MigrationEvent::Committed {
            name: shipped.name(),
            seconds: started.elapsed().as_secs_f64(),
        });
        self.applied.push(shipped.name());
        Ok(())
    }

    async fn apply_in_transaction(&mut self, shipped: &MigrationSource) -> Result<(), DeployError> {
        let file = format!("migrations/{}", shipped.file());
        if let Some(step) = upgrade::before(shipped) {
            let context = format!("preparing the data for {file}");
            self.session.run(step).await.map_err(DeployError::server(context))?;
        }
        for (index, batch) in shipped.batches().iter().enumerate() {
            for _ in 0..batch.repeat {
                let ran = self.session.run_batch(&file, index + 1, batch).await;
                ran.map_err(|e| self.lock_timed_out(e))?;
                let state = self.session.transaction_state().await?;
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
        self.record(shipped, true).await
    }

    /// Runs a migration marked `-- fencepost: no-transaction` batch by batch
    /// in autocommit, checking after each that it left no transaction open,
    /// and records it, in a transaction of its own, only after the last.
    async fn apply_without_transaction(&mut self, shipped: &MigrationSource) -> Result<(), DeployError> {
        let file = format!("migrations/{}", shipped.file());
        self.session
            .run(&format!(
                "{SESSION_OPTIONS}\nSET LOCK_TIMEOUT {};",
                self.lock_timeout_ms
            ))
            .await
            .map_err(DeployError::server("setting the session options"))?;
        let mut done = 0;
        for (index, batch) in shipped.batches().iter().enumerate() {
            let step = async {
                for _ in 0..batch.repeat {
                    let ran = self.session.run_batch(&file, index + 1, batch).await;
                    ran.map_err(|e| lock_timed_out(e, self.lock_timeout_ms))?;
                    let state = self.session.transaction_state().await?;
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
        let recorded = self.record(shipped, false);
        recorded.await.map_err(|cause| partly_applied(shipped, done, cause))
    }

    fn lock_timed_out(&self, error: DeployError) -> DeployError {
        lock_timed_out(error, self.lock_timeout_ms)
    }

    /// Writes the history row and commits: inside the migration's
    /// transaction (dropping the marker with it), or, for a migration that
    /// ran without one, in a transaction of its own.
    async fn record(&mut self, shipped: &MigrationSource, in_transaction: bool) -> Result<(), DeployError> {
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
        self.session
            .run(&commit)
            .await
            .map(drop)
            .map_err(DeployError::server(format!("recording migration {}", shipped.name())))
    }
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

/// The version in refinery's history insert,
/// `INSERT INTO <table> (version, name, applied_on, checksum) VALUES (<version>, ...`.
fn recorded_version(insert: &str) -> Option<i32> {
    let prefix = format!("INSERT INTO {HISTORY_TABLE} (version, name, applied_on, checksum) VALUES (");
    let (version, _) = insert.strip_prefix(&prefix)?.split_once(',')?;
    version.trim().parse().ok()
}

fn unexpected(what: &str) -> DeployError {
    DeployError::Server {
        context: "applying migrations".into(),
        source: tiberius::error::Error::Protocol(what.to_string().into()),
    }
}

impl AsyncTransaction for MigrationDriver<'_, '_> {
    type Error = DriverError;

    async fn execute<'a, T: Iterator<Item = &'a str> + Send + 'a>(
        &'a mut self,
        queries: T,
    ) -> Result<usize, Self::Error> {
        let queries: Vec<&str> = queries.collect();
        self.run(&queries).await.map_err(|error| {
            let driver_error = DriverError(error.to_string());
            self.failure = Some(error);
            driver_error
        })
    }
}

impl AsyncQuery<Vec<refinery::Migration>> for MigrationDriver<'_, '_> {
    async fn query<'a>(&'a mut self, query: &'a str) -> Result<Vec<refinery::Migration>, Self::Error> {
        let rows = self.session.run(query).await.map_err(|e| DriverError(e.to_string()))?;
        let mut applied = Vec::new();
        for row in rows.iter().flatten() {
            let (Some(version), Some(name), Some(applied_on), Some(checksum)) = (
                row.get::<i32, usize>(0),
                row.get::<&str, usize>(1),
                row.get::<&str, usize>(2),
                row.get::<&str, usize>(3),
            ) else {
                return Err(DriverError(
                    "the migration history has a row with missing values".into(),
                ));
            };
            let applied_on = OffsetDateTime::parse(applied_on, &Rfc3339)
                .map_err(|e| DriverError(format!("migration {version} has an unreadable applied_on: {e}")))?;
            let checksum = checksum
                .parse::<u64>()
                .map_err(|e| DriverError(format!("migration {version} has an unreadable checksum: {e}")))?;
            applied.push(refinery::Migration::applied(
                version,
                name.to_string(),
                applied_on,
                checksum,
            ));
        }
        Ok(applied)
    }
}

impl AsyncMigrate for MigrationDriver<'_, '_> {
    fn assert_migrations_table_query(_migration_table_name: &str) -> String {
        bootstrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_read_from_refinerys_history_insert() {
        // The text refinery-core 0.10 `insert_migration_query` writes.
        let insert = "INSERT INTO fence.SchemaHistory (version, name, applied_on, checksum) \
                      VALUES (12, 'same_text', '2026-01-01T00:00:00Z', '42')";
        assert_eq!(recorded_version(insert), Some(12));
        assert_eq!(recorded_version("INSERT INTO other (version) VALUES (1, 'x')"), None);
    }
}
