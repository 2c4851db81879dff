//! The deploy's connection, counting its round trips so a report can show that
//! a deploy with nothing to do costs the same however many objects exist.

use tiberius::Row;

use crate::connection::Connection;

use super::batch::Batch;
use super::error::DeployError;

/// A connection used by the runner.
pub struct Session<'c> {
    conn: &'c mut Connection,
    round_trips: usize,
}

impl<'c> Session<'c> {
    /// Wraps an open connection.
    pub fn new(conn: &'c mut Connection) -> Self {
        Self { conn, round_trips: 0 }
    }

    /// Round trips made so far.
    pub fn round_trips(&self) -> usize {
        self.round_trips
    }

    /// Sends one batch and reads every result of it to the end, so an error
    /// raised after the first result set is still seen.
    pub async fn run(&mut self, sql: &str) -> Result<Vec<Vec<Row>>, tiberius::error::Error> {
        self.round_trips += 1;
        self.conn.simple_query(sql).await?.into_results().await
    }

    /// Runs the batches of a script in order, each as often as its `GO n`
    /// says, stopping at the first that fails.
    pub async fn run_script(&mut self, file: &str, batches: &[Batch]) -> Result<(), DeployError> {
        for (index, batch) in batches.iter().enumerate() {
            for _ in 0..batch.repeat {
                if let Err(error) = self.run(&batch.text).await {
                    return Err(batch_failed(file, index + 1, batch, error));
                }
            }
        }
        Ok(())
    }

    /// Runs one batch of `file` (a procedure or a statement of the runner's).
    pub async fn run_one(&mut self, file: &str, sql: &str) -> Result<(), DeployError> {
        let batch = Batch {
            text: sql.to_string(),
            line: 1,
            repeat: 1,
        };
        self.run_script(file, std::slice::from_ref(&batch)).await
    }

    /// Rolls back whatever transaction a failed batch left open. Errors are
    /// ignored: the batch's own error is the one worth reporting, and with
    /// XACT_ABORT the server has usually rolled back already.
    pub async fn roll_back(&mut self) {
        let _ = self.run("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;").await;
    }
}

/// Places a server error in the script: file, batch and the file's line.
fn batch_failed(file: &str, batch: usize, at: &Batch, error: tiberius::error::Error) -> DeployError {
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
