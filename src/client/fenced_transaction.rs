//! A fenced transaction around a closure: begin, run the work, commit if it
//! succeeded and roll back if it did not.

use std::future::Future;

use tracing::Instrument;

use super::error::Error;
use super::fenced_outcome::FencedOutcome;
use super::fenced_tx::{BeginFenced, FencedTx};
use super::span;
use super::{Client, Lease};

impl Client {
    /// Runs `work` in a transaction fenced by `lease`
    /// ([`begin_fenced_without_guard`](Client::begin_fenced_without_guard))
    /// and commits only if the work succeeds, for a lease that no guard
    /// renews; with a guard use
    /// [`LeaseGuard::fenced_transaction`](super::LeaseGuard::fenced_transaction).
    ///
    /// A future that awaits this may not be `Send` when the work borrows
    /// locals (a limit of async closures in today's Rust); in a spawned task
    /// use [`begin_fenced_without_guard`](Client::begin_fenced_without_guard)
    /// and the transaction's own methods.
    pub async fn fenced_transaction_without_guard<T, E>(
        &self,
        lease: &Lease,
        work: impl AsyncFnOnce(&mut FencedTx<'_>) -> Result<T, E>,
    ) -> Result<FencedOutcome<T, E>, Error> {
        let span = span::fenced_transaction_span(lease);
        traced(
            async { around(self.begin_fenced_without_guard(lease).await?, work).await },
            span,
        )
        .await
    }

    /// [`fenced_transaction_without_guard`](Client::fenced_transaction_without_guard)
    /// for writes built from version `source_version` of their source
    /// ([`begin_fenced_versioned_without_guard`](Client::begin_fenced_versioned_without_guard)).
    pub async fn fenced_transaction_versioned_without_guard<T, E>(
        &self,
        lease: &Lease,
        source_version: i64,
        work: impl AsyncFnOnce(&mut FencedTx<'_>) -> Result<T, E>,
    ) -> Result<FencedOutcome<T, E>, Error> {
        let span = span::fenced_transaction_span(lease);
        let run = async {
            around(
                self.begin_fenced_versioned_without_guard(lease, source_version).await?,
                work,
            )
            .await
        };
        traced(run, span).await
    }
}

/// Runs `run` in `span`, and records on it how the transaction ended.
pub(crate) async fn traced<T, E>(
    run: impl Future<Output = Result<FencedOutcome<T, E>, Error>>,
    span: tracing::Span,
) -> Result<FencedOutcome<T, E>, Error> {
    let ended = run.instrument(span.clone()).await;
    let outcome = match &ended {
        Ok(FencedOutcome::Committed(_)) => "Committed".to_string(),
        Ok(FencedOutcome::Failed(_)) => "Failed".to_string(),
        Ok(FencedOutcome::Refused(reason)) => reason.to_string(),
        Ok(FencedOutcome::NotProvisioned) => "NotProvisioned".to_string(),
        Err(_) => "Error".to_string(),
    };
    span.record("fencepost.outcome", outcome.as_str());
    ended
}

/// Runs `work` in the transaction `begun` opened, if it did.
pub(crate) async fn around<T, E>(
    begun: BeginFenced<'_>,
    work: impl AsyncFnOnce(&mut FencedTx<'_>) -> Result<T, E>,
) -> Result<FencedOutcome<T, E>, Error> {
    let mut tx = match begun {
        BeginFenced::Holding(tx) => tx,
        BeginFenced::Refused(reason) => return Ok(FencedOutcome::Refused(reason)),
        BeginFenced::NotProvisioned => return Ok(FencedOutcome::NotProvisioned),
    };
    match work(&mut tx).await {
        Ok(value) => match tx.commit().await {
            Ok(()) => Ok(FencedOutcome::Committed(value)),
            // Asserted again at the commit and refused: nothing was written.
            Err(Error::CommitRefused { reason }) => Ok(FencedOutcome::Refused(reason)),
            Err(error) => Err(error),
        },
        Err(error) => {
            tx.rollback().await;
            Ok(FencedOutcome::Failed(error))
        }
    }
}
