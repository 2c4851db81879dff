//! Fencing the service's own tables: its statements run in one transaction
//! that also holds the fence row, so they commit only while the caller holds
//! the current, unexpired lease.

use tiberius::{Row, ToSql};

use super::call::checkout;
use super::contract::Procedure;
use super::error::Error;
use super::{Client, Lease, RefusalReason, input};
use crate::connection::Connection;

/// How a [`Client::fenced_transaction`] ended, when no server or network
/// failure got in the way (those are `Err`, and nothing was committed).
#[derive(Debug)]
pub enum FencedTransaction<T, E> {
    /// The lease was held and the transaction committed; `T` is what the
    /// work returned.
    Committed(T),
    /// The work returned an error; the transaction was rolled back.
    Failed(E),
    /// The fence refused the lease before the work ran; nothing was written.
    Refused(RefusalReason),
    /// The key has no fence row; nothing was written.
    NotProvisioned,
}

/// The transaction a [`Client::fenced_transaction`] work runs in. The fence
/// row stays locked until it ends, so a successor's acquire waits for it.
pub struct FencedTx<'a> {
    connection: &'a mut Connection,
}

impl FencedTx<'_> {
    /// Runs one parameterized statement (`@P1`, `@P2`, ...) and returns the
    /// rows it affected.
    pub async fn execute(&mut self, sql: &str, params: &[&dyn ToSql]) -> Result<u64, tiberius::error::Error> {
        let result = self.connection.execute(sql, params).await?;
        Ok(result.total())
    }

    /// Runs one parameterized query and returns the rows of its first result set.
    pub async fn query(&mut self, sql: &str, params: &[&dyn ToSql]) -> Result<Vec<Row>, tiberius::error::Error> {
        self.connection.query(sql, params).await?.into_first_result().await
    }
}

/// What AssertHolder's refusals mean, by error number.
fn refusal(number: u32) -> Option<Option<RefusalReason>> {
    match number {
        50110 => Some(Some(RefusalReason::Superseded)),
        50111 => Some(Some(RefusalReason::Expired)),
        50112 => Some(None),
        _ => None,
    }
}

impl Client {
    /// Runs `work` in one transaction on one pooled connection that first
    /// asserts `lease` with `fence_api.AssertHolder`, and commits only if the
    /// work succeeds. The fence row stays locked until the commit, so no
    /// successor can take the lease in between: the service's own writes are
    /// fenced like a publish.
    ///
    /// The login needs EXECUTE on the fence procedures and its own rights on
    /// its tables, nothing on schema `fence`. Keep the work short (a
    /// successor's acquire waits for it), and do not call other lease
    /// operations on the same key from inside it: they would wait for this
    /// transaction's lock.
    ///
    /// The transaction runs with `XACT_ABORT ON`: a statement that fails rolls
    /// everything back, and the error comes back as `Failed`.
    pub async fn fenced_transaction<T, E>(
        &self,
        lease: &Lease,
        work: impl AsyncFnOnce(&mut FencedTx<'_>) -> Result<T, E>,
    ) -> Result<FencedTransaction<T, E>, Error> {
        let key = input::key(lease.key())?;
        let procedure = Procedure::AssertHolder;
        let mut session = checkout(&self.pool, &self.last_connect_error, &self.config).await?;
        // Left set if anything below is abandoned half way: the pool then
        // drops the connection, and the server rolls its transaction back.
        session.in_call = true;
        let connection = &mut session.connection;
        let network = |e| super::call::classify(procedure, e);

        connection
            .simple_query("SET XACT_ABORT ON; BEGIN TRANSACTION;")
            .await
            .map_err(network)?
            .into_results()
            .await
            .map_err(network)?;
        let asserted = match connection
            .query(procedure.statement(), &[&key, &lease.owner(), &lease.generation()])
            .await
        {
            Ok(stream) => stream.into_results().await,
            Err(e) => Err(e),
        };
        if let Err(error) = asserted {
            // Only after a server error is the connection in step to roll back
            // on; after a network error it is dropped, and the server rolls
            // back. A refusal was already rolled back by XACT_ABORT.
            if !matches!(error, tiberius::error::Error::Server(_)) {
                return Err(network(error));
            }
            let refused = error.code().and_then(refusal);
            rollback(connection).await.map_err(network)?;
            session.in_call = false;
            return match refused {
                Some(Some(reason)) => Ok(FencedTransaction::Refused(reason)),
                Some(None) => Ok(FencedTransaction::NotProvisioned),
                None => Err(network(error)),
            };
        }

        let mut tx = FencedTx {
            connection: &mut *connection,
        };
        let outcome = match work(&mut tx).await {
            Ok(value) => {
                connection
                    .simple_query("COMMIT TRANSACTION;")
                    .await
                    .map_err(network)?
                    .into_results()
                    .await
                    .map_err(network)?;
                FencedTransaction::Committed(value)
            }
            Err(error) => {
                rollback(connection).await.map_err(network)?;
                FencedTransaction::Failed(error)
            }
        };
        session.in_call = false;
        Ok(outcome)
    }
}

/// Rolls back whatever is still open; a failed statement may have rolled
/// the transaction back already.
async fn rollback(connection: &mut Connection) -> Result<(), tiberius::error::Error> {
    connection
        .simple_query("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;")
        .await?
        .into_results()
        .await
        .map(drop)
}
