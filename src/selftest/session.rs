//! A session of the selftest's own that runs the procedures as a service's
//! own code does: raw EXECs, inside transactions it opens itself, so a check
//! can hold a fence row's lock in one session while another calls.

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use tiberius::{Row, ToSql};
use time::OffsetDateTime;

use crate::client::Lease;
use crate::{Connection, ConnectionString};

pub(crate) const ACQUIRE: &str = "EXEC fence_api.Acquire @ResourceKey = @P1, @Owner = @P2, @LeaseSeconds = @P3";
pub(crate) const PUBLISH: &str = "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, \
                                  @OperationId = @P4, @Payload = @P5";
pub(crate) const ASSERT_HOLDER: &str =
    "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";
pub(crate) const INSPECT: &str = "EXEC fence_api.Inspect @ResourceKey = @P1";
pub(crate) const RELEASE: &str = "EXEC fence_api.Release @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";

/// How long a check waits for the server clock to pass a lease's end.
const CLOCK_BOUND: Duration = Duration::from_secs(30);

/// What a procedure answered: its row, or the error the server raised.
#[derive(Debug)]
pub(crate) enum Answer {
    Row(Row),
    Error { number: u32, message: String },
}

impl Answer {
    /// The `Outcome` column, or `error N: message`.
    pub(crate) fn outcome(&self) -> String {
        match self {
            Answer::Row(row) => row.get::<&str, _>("Outcome").unwrap_or("(no Outcome)").to_string(),
            Answer::Error { number, message } => format!("error {number}: {message}"),
        }
    }

    /// A bigint column of the row.
    pub(crate) fn big(&self, column: &str) -> Option<i64> {
        match self {
            Answer::Row(row) => row.get::<i64, _>(column),
            Answer::Error { .. } => None,
        }
    }
}

/// One session of the selftest's own.
pub(crate) struct Session {
    conn: Connection,
}

impl Session {
    pub(crate) async fn open(target: &ConnectionString) -> Result<Session> {
        let conn = target.connect().await.context("opening a session")?;
        Ok(Session { conn })
    }

    /// Runs a batch to its end.
    pub(crate) async fn batch(&mut self, sql: &str) -> Result<(), tiberius::error::Error> {
        self.conn.simple_query(sql).await?.into_results().await.map(drop)
    }

    /// Calls a procedure: its one row, or the server's error as an answer.
    /// Anything else (a network error) is the check's error.
    pub(crate) async fn call(&mut self, sql: &str, args: &[&dyn ToSql]) -> Result<Answer> {
        let result = match self.conn.query(sql, args).await {
            Ok(stream) => stream.into_results().await,
            Err(e) => Err(e),
        };
        match result {
            Ok(sets) => match sets.into_iter().flatten().next() {
                Some(row) => Ok(Answer::Row(row)),
                None => bail!("{sql}: no row"),
            },
            Err(tiberius::error::Error::Server(token)) => Ok(Answer::Error {
                number: token.code(),
                message: token.message().to_string(),
            }),
            Err(other) => Err(other).context(sql.to_string()),
        }
    }

    /// The one int `sql` answers.
    pub(crate) async fn int(&mut self, sql: &str) -> Result<Option<i32>> {
        let row = self.conn.simple_query(sql).await?.into_row().await?;
        Ok(row.and_then(|r| r.get::<i32, _>(0)))
    }

    /// This session's id, as the engine's views of waiting sessions name it.
    pub(crate) async fn spid(&mut self) -> Result<i32> {
        self.int("SELECT CAST(@@SPID AS int)")
            .await?
            .context("@@SPID answered NULL")
    }

    /// The connection, for the lookups this session makes for the check.
    pub(crate) fn connection(&mut self) -> &mut Connection {
        &mut self.conn
    }

    /// The server clock.
    pub(crate) async fn now(&mut self) -> Result<OffsetDateTime> {
        let row = self
            .conn
            .simple_query("SELECT SYSUTCDATETIME()")
            .await?
            .into_row()
            .await?
            .context("SYSUTCDATETIME() answered no row")?;
        let now = row
            .get::<time::PrimitiveDateTime, _>(0)
            .context("SYSUTCDATETIME() answered NULL")?;
        Ok(now.assume_utc())
    }

    /// Waits until the server clock is past `until`: the server is the only
    /// judge of a lease's end, so this asks it rather than sleeping for a
    /// guessed time. Works inside an open transaction.
    pub(crate) async fn wait_past(&mut self, until: OffsetDateTime) -> Result<()> {
        let give_up = tokio::time::Instant::now() + CLOCK_BOUND;
        while self.now().await? <= until {
            if tokio::time::Instant::now() > give_up {
                bail!(
                    "the server clock did not pass {until} within {} s",
                    CLOCK_BOUND.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Opens a transaction and locks `lease`'s fence row in it, as a
    /// service fencing its own writes does (AssertHolder); the row stays
    /// locked until this session commits or rolls back. Answers
    /// AssertHolder's outcome.
    pub(crate) async fn hold(&mut self, lease: &Lease) -> Result<String> {
        self.batch("BEGIN TRANSACTION;").await?;
        Ok(self
            .call(ASSERT_HOLDER, &[&lease.key(), &lease.owner(), &lease.generation()])
            .await?
            .outcome())
    }

    /// Rolls back whatever transaction is open; for a check's clean-up.
    pub(crate) async fn rollback(&mut self) {
        let _ = self.batch("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;").await;
    }
}
