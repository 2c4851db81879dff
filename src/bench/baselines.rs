//! The baselines, on connections of their own: what a user would run instead
//! of the fence. Each request is counted where it is sent.

use tokio::time::Instant;

use super::BenchError;
use super::runner::{Step, Worker};
use super::scratch::Scratch;
use crate::Connection;
use crate::tsql::literal;

/// `SELECT 1`: the floor of one round trip on this engine.
pub(crate) struct Select1 {
    pub conn: Connection,
}

impl Worker for Select1 {
    async fn operation(&mut self) -> Result<Vec<Step>, BenchError> {
        let started = Instant::now();
        let stream = self.conn.simple_query("SELECT 1").await;
        stream
            .map_err(BenchError::server("select1"))?
            .into_results()
            .await
            .map_err(BenchError::server("select1"))?;
        Ok(vec![Step {
            elapsed: started.elapsed(),
            requests: 1,
        }])
    }
}

/// The fence's conditional UPDATE alone, as one parameterized request on a
/// row of the worker's own: what a publish costs without a procedure, an
/// outcome record or a transaction around it.
pub(crate) struct RawUpdate {
    pub conn: Connection,
    pub statement: String,
    pub key: String,
    pub scratch: Scratch,
}

impl RawUpdate {
    pub(crate) fn statement(scratch: &Scratch) -> String {
        format!(
            "UPDATE {} SET PublishedGeneration = @P3, Payload = @P4, PublishedAtUtc = SYSUTCDATETIME() \
              WHERE ResourceKey = @P1 AND Owner = @P2 AND Generation = @P3 AND LeaseUntilUtc > SYSUTCDATETIME();",
            scratch.table
        )
    }
}

impl Worker for RawUpdate {
    async fn operation(&mut self) -> Result<Vec<Step>, BenchError> {
        let started = Instant::now();
        let result = self
            .conn
            .execute(
                self.statement.as_str(),
                &[&self.key, &self.scratch.owner, &1i64, &"bench"],
            )
            .await
            .map_err(BenchError::server("raw_update"))?
            .total();
        let elapsed = started.elapsed();
        if result != 1 {
            return Err(BenchError::unexpected(
                "raw_update",
                format!("{result} rows updated instead of 1"),
            ));
        }
        Ok(vec![Step { elapsed, requests: 1 }])
    }
}

/// DistributedLock.SqlServer's pattern: `sp_getapplock` in a transaction,
/// the protected UPDATE, `sp_releaseapplock` and COMMIT: three requests, as
/// a fenced cycle is.
pub(crate) struct ApplockCycle {
    pub conn: Connection,
    pub take: String,
    pub update: String,
    pub give_back: String,
    pub key: String,
}

impl ApplockCycle {
    pub(crate) fn new(conn: Connection, scratch: &Scratch, key: String) -> ApplockCycle {
        // The lock's name is the bench's own key, inlined as a string
        // literal: the requests that open and close the transaction stay
        // plain batches, never a nested sp_executesql scope.
        let resource = literal(&key);
        ApplockCycle {
            conn,
            take: format!(
                "SET XACT_ABORT ON; BEGIN TRANSACTION; DECLARE @r int; \
                 EXEC @r = sp_getapplock @Resource = {resource}, @LockMode = N'Exclusive', \
                      @LockOwner = N'Transaction', @LockTimeout = 30000; \
                 SELECT @r AS Result;"
            ),
            update: format!(
                "UPDATE {} SET Payload = @P2, PublishedAtUtc = SYSUTCDATETIME() WHERE ResourceKey = @P1;",
                scratch.table
            ),
            give_back: format!(
                "EXEC sp_releaseapplock @Resource = {resource}, @LockOwner = N'Transaction'; COMMIT TRANSACTION;"
            ),
            key,
        }
    }
}

impl Worker for ApplockCycle {
    async fn operation(&mut self) -> Result<Vec<Step>, BenchError> {
        const NAME: &str = "applock_cycle";
        let started = Instant::now();
        let row = self
            .conn
            .simple_query(self.take.as_str())
            .await
            .map_err(BenchError::server(NAME))?
            .into_row()
            .await
            .map_err(BenchError::server(NAME))?;
        let granted = row.and_then(|r| r.get::<i32, _>(0));
        if !matches!(granted, Some(0 | 1)) {
            return Err(BenchError::unexpected(
                NAME,
                format!("sp_getapplock answered {granted:?}"),
            ));
        }
        let updated = self
            .conn
            .execute(self.update.as_str(), &[&self.key, &"bench"])
            .await
            .map_err(BenchError::server(NAME))?
            .total();
        if updated != 1 {
            return Err(BenchError::unexpected(
                NAME,
                format!("{updated} rows updated instead of 1"),
            ));
        }
        self.conn
            .simple_query(self.give_back.as_str())
            .await
            .map_err(BenchError::server(NAME))?
            .into_results()
            .await
            .map_err(BenchError::server(NAME))?;
        Ok(vec![Step {
            elapsed: started.elapsed(),
            requests: 3,
        }])
    }
}
