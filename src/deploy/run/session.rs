//! The deploy's connection, counting its round trips so a report can show that
//! a deploy with nothing to do costs the same however many objects exist.

use futures_util::TryStreamExt;
use tiberius::{QueryItem, Row};

use crate::connection::Connection;

use crate::deploy::error::DeployError;
use crate::deploy::sql::{MIGRATION_DEPTH, MIGRATION_MARKER, TRANSACTION_STATE};
use crate::tsql::Batch;

/// A session's transactions, as `@@TRANCOUNT`, `XACT_STATE()` and
/// IMPLICIT_TRANSACTIONS show them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TransactionState {
    /// `@@TRANCOUNT`.
    pub open: i32,
    /// `XACT_STATE()`: 1 committable, 0 none, -1 can only roll back.
    pub xact_state: i32,
    /// Whether IMPLICIT_TRANSACTIONS is on.
    pub implicit: bool,
    /// Whether the runner's migration marker exists: created inside a
    /// migration's transaction, it is gone when that transaction rolled back
    /// and stays when it committed.
    pub marker: bool,
}

impl TransactionState {
    /// What is wrong, for a batch of a migration that runs without a
    /// transaction: it must leave none open, nor IMPLICIT_TRANSACTIONS on.
    pub(crate) fn problem_outside_any(&self) -> Option<String> {
        if self.open > 0 {
            Some(format!("it left a transaction open (@@TRANCOUNT {})", self.open))
        } else if self.implicit {
            Some("it turned IMPLICIT_TRANSACTIONS on".into())
        } else {
            None
        }
    }

    /// What is wrong, for a batch of a migration: it must leave the session
    /// as [`begin_migration`](crate::deploy::sql::begin_migration) did, in
    /// the runner's transaction `MIGRATION_DEPTH` levels deep, committable,
    /// with IMPLICIT_TRANSACTIONS on. Whatever the answer, the runner rolls
    /// back what is still open.
    pub(crate) fn problem_inside_migration(&self) -> Option<String> {
        let depth = MIGRATION_DEPTH;
        let open = self.open;
        if open == 0 && self.marker {
            Some(format!(
                "it committed the transaction the runner opened (@@TRANCOUNT 0 after it, {depth} before: it ran \
                 as many COMMITs as transactions were open, e.g. `WHILE @@TRANCOUNT > 0 COMMIT`), so it \
                 committed what the migration ran before it, which stays: remove the COMMIT and undo that \
                 work by hand"
            ))
        } else if open < depth {
            let ended = if self.marker {
                "a COMMIT of its own, or of a procedure it called, lowered it"
            } else {
                "a ROLLBACK of its own, or of a procedure it called, ended it, as a ROLLBACK in a CATCH that \
                 does not rethrow does; what ran after it opened a transaction of its own \
                 (IMPLICIT_TRANSACTIONS is on)"
            };
            Some(format!(
                "it ended the transaction the runner opened (@@TRANCOUNT {open} after it, {depth} before: \
                 {ended}); the runner rolled the whole migration back, so nothing of it is kept"
            ))
        } else if open > depth {
            Some(format!(
                "it left a transaction of its own open (@@TRANCOUNT {open}, the runner's is {depth}); the \
                 runner rolled the whole migration back"
            ))
        } else if self.xact_state != 1 {
            Some(format!(
                "it left the transaction unable to commit (XACT_STATE() {}: an error was caught and not rethrown)",
                self.xact_state
            ))
        } else if !self.implicit {
            Some(
                "it turned IMPLICIT_TRANSACTIONS off, which the runner keeps on during a migration so that \
                 nothing after a stray ROLLBACK commits on its own"
                    .into(),
            )
        } else {
            None
        }
    }
}

/// A connection used by the runner.
pub(crate) struct Session<'c> {
    conn: &'c mut Connection,
    round_trips: usize,
}

impl<'c> Session<'c> {
    /// Wraps an open connection.
    pub(crate) fn new(conn: &'c mut Connection) -> Self {
        Self { conn, round_trips: 0 }
    }

    /// Round trips made so far.
    pub(crate) fn round_trips(&self) -> usize {
        self.round_trips
    }

    /// Sends one batch and reads every result of it to the end, so an error
    /// raised after the first result set is still seen.
    pub(crate) async fn run(&mut self, sql: &str) -> Result<Vec<Vec<Row>>, tiberius::error::Error> {
        self.round_trips += 1;
        self.conn.simple_query(sql).await?.into_results().await
    }

    /// Sends one batch and reads its first result set: a read whose failure
    /// is said as `context`.
    pub(crate) async fn first_result(&mut self, sql: &str, context: &str) -> Result<Vec<Row>, DeployError> {
        self.round_trips += 1;
        self.conn
            .simple_query(sql)
            .await
            .map_err(DeployError::server(context))?
            .into_first_result()
            .await
            .map_err(DeployError::server(context))
    }

    /// Sends one batch and reads its rows as they arrive, stopping at the
    /// first error. Returns the rows read before it, and the error: what a
    /// batch got through before the server ended it.
    pub(crate) async fn run_until_error(&mut self, sql: &str) -> (Vec<Row>, Option<tiberius::error::Error>) {
        self.round_trips += 1;
        let mut rows = Vec::new();
        let mut stream = match self.conn.simple_query(sql).await {
            Ok(stream) => stream,
            Err(error) => return (rows, Some(error)),
        };
        loop {
            match stream.try_next().await {
                Ok(Some(QueryItem::Row(row))) => rows.push(row),
                Ok(Some(QueryItem::Metadata(_))) => {}
                Ok(None) => return (rows, None),
                Err(error) => return (rows, Some(error)),
            }
        }
    }

    /// Runs the batches of a script in order, each as often as its `GO n`
    /// says, stopping at the first that fails.
    pub(crate) async fn run_script(&mut self, file: &str, batches: &[Batch]) -> Result<(), DeployError> {
        for (index, batch) in batches.iter().enumerate() {
            for _ in 0..batch.repeat {
                self.run_batch(file, index + 1, batch).await?;
            }
        }
        Ok(())
    }

    /// Runs batch `number` (counting from 1) of `file` once.
    pub(crate) async fn run_batch(&mut self, file: &str, number: usize, batch: &Batch) -> Result<(), DeployError> {
        match self.run(&batch.text).await {
            Ok(_) => Ok(()),
            Err(error) => Err(batch_failed(file, number, batch, error)),
        }
    }

    /// Where the session stands with transactions.
    pub(crate) async fn transaction_state(&mut self) -> Result<TransactionState, DeployError> {
        let rows = self
            .run(TRANSACTION_STATE)
            .await
            .map_err(DeployError::server("reading the transaction state"))?;
        let row = rows.iter().flatten().next();
        let int = |i: usize| row.and_then(|r| r.get::<i32, usize>(i)).unwrap_or_default();
        Ok(TransactionState {
            open: int(0),
            xact_state: int(1),
            implicit: int(2) != 0,
            marker: int(3) != 0,
        })
    }

    /// Runs one batch of `file` (a procedure or a statement of the runner's).
    pub(crate) async fn run_one(&mut self, file: &str, sql: &str) -> Result<(), DeployError> {
        let batch = Batch {
            text: sql.to_string(),
            line: 1,
            repeat: 1,
        };
        self.run_script(file, std::slice::from_ref(&batch)).await
    }

    /// Rolls back whatever transaction a failed batch left open, and undoes
    /// what a migration's transaction set: implicit transactions, the lock
    /// timeout, the marker (which only a batch's own commit leaves behind).
    /// Errors are ignored: the batch's own error is the one worth reporting,
    /// and with XACT_ABORT the server has usually rolled back already.
    pub(crate) async fn roll_back(&mut self) {
        let _ = self
            .run(&format!(
                "SET IMPLICIT_TRANSACTIONS OFF;
IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
SET LOCK_TIMEOUT -1;
IF OBJECT_ID(N'tempdb..{MIGRATION_MARKER}') IS NOT NULL DROP TABLE {MIGRATION_MARKER};"
            ))
            .await;
    }
}

/// Places a server error in the script: file, batch and the file's line.
pub(crate) fn batch_failed(file: &str, batch: usize, at: &Batch, error: tiberius::error::Error) -> DeployError {
    match error {
        tiberius::error::Error::Server(e) => DeployError::BatchFailed {
            file: file.to_string(),
            batch,
            line: at.line + (e.line() as usize).saturating_sub(1),
            message: format!("error {}: {}", e.code(), e.message()),
        },
        other => DeployError::Server {
            context: format!("running {file}, batch {batch}"),
            source: other,
        },
    }
}
