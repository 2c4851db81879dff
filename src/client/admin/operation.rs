//! Operator commands sent with an operation id (contract v1.5):
//! `ForceRelease` and `ResetSourceVersion` record what a call with an id
//! answered, and answer it again to a replay of that id without changing
//! anything. A command whose reply was lost is therefore replayed, once, with
//! the same id on a new connection within what the call's time budget has
//! left: it applies once, and the caller learns what it did.

use std::time::Duration;

use tiberius::ToSql;
use tokio::time::Instant;
use uuid::Uuid;

use super::Admin;
use crate::client::Error;
use crate::client::call::{Reply, call_on};
use crate::client::contract::Procedure;
use crate::client::error::FATAL_CLASS;
use crate::client::span::About;

impl Admin {
    /// Settles `first`, the answer of a call of the operator command
    /// `procedure` sent at `sent` with `arguments`, which carry
    /// `operation_id`. An answer, or an error after which nothing can have
    /// applied, is returned as it is. After an error that leaves the outcome
    /// unknown ([`outcome_unknown`]) the command is replayed once on a new
    /// connection, bounded by what is left of the client's `call_timeout`
    /// since `sent`; its answer is the command's. When the replay fails too,
    /// or no time is left for it, the error is
    /// [`Error::OperatorOutcomeUnknown`] with the operation id.
    pub(super) async fn settled(
        &self,
        procedure: Procedure,
        arguments: &[&dyn ToSql],
        about: About<'_>,
        operation_id: Uuid,
        sent: Instant,
        first: Result<Reply, Error>,
    ) -> Result<Reply, Error> {
        let lost = match first {
            Err(error) if outcome_unknown(&error) => error,
            other => return other,
        };
        let budget = self.client.config.call_timeout;
        let left = budget.saturating_sub(sent.elapsed());
        if left.is_zero() {
            return Err(unknown(
                procedure,
                operation_id,
                &lost,
                "the call's time budget left no time to replay it",
            ));
        }
        tracing::info!(
            procedure = procedure.name(),
            %operation_id,
            error = %lost,
            "an operator command's reply was lost; replaying it with its operation id on a new connection"
        );
        match tokio::time::timeout(left, self.replay(procedure, arguments, about, left)).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(error)) => Err(unknown(
                procedure,
                operation_id,
                &lost,
                format!("its replay failed too: {error}"),
            )),
            Err(_) => Err(unknown(
                procedure,
                operation_id,
                &lost,
                format!(
                    "its replay did not answer within the {} ms left of the call's time budget",
                    left.as_millis()
                ),
            )),
        }
    }

    /// One call of `procedure` on a connection opened for it, outside the
    /// pool (whose other connections may have broken with the first one),
    /// bounded by `left`, observed as every call is.
    async fn replay(
        &self,
        procedure: Procedure,
        arguments: &[&dyn ToSql],
        about: About<'_>,
        left: Duration,
    ) -> Result<Reply, Error> {
        let client = &self.client;
        // A fake's replay is one more call of it.
        #[cfg(feature = "fake")]
        if client.as_fake().is_some() {
            return client.call(procedure, arguments, about).await;
        }
        let mut session = client.pool_for(procedure).dedicated_connection().await?;
        let mut config = (*client.config).clone();
        config.call_timeout = left;
        let exchange = Box::pin(call_on(&mut session, &config, procedure, arguments));
        let mut replies = client.observed(procedure, about, exchange).await?;
        // Exactly one row: an operator command does not answer rows.
        Ok(replies.swap_remove(0))
    }
}

/// Whether a failed call of an operator command may have applied on the
/// server without its answer reaching the client: the connection failed or
/// the reply did not come in time (the request may have arrived and run), or
/// a fatal error ended the session (it may have come after the procedure's
/// COMMIT). Nothing was sent when no connection could be had, and a server
/// error below class 20 rolled the procedure's transaction back.
pub(super) fn outcome_unknown(error: &Error) -> bool {
    match error {
        Error::Network { .. } => true,
        Error::Server { class, .. } => *class >= FATAL_CLASS,
        _ => false,
    }
}

/// The command's outcome is unknown: `lost` was the first call's error, and
/// `then` says what became of the replay.
fn unknown(procedure: Procedure, operation_id: Uuid, lost: &Error, then: impl std::fmt::Display) -> Error {
    Error::OperatorOutcomeUnknown {
        procedure: procedure.name(),
        operation_id,
        reason: format!("{lost}; {then}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Client;

    fn network(timed_out: bool) -> Error {
        Error::Network {
            procedure: "fence_admin.ForceRelease",
            reason: "connection reset".into(),
            timed_out,
        }
    }

    fn server(number: u32, class: u8) -> Error {
        Error::from_server("fence_admin.ForceRelease", number, class, "message".into())
    }

    #[test]
    fn a_lost_connection_or_reply_or_a_fatal_error_leaves_the_outcome_unknown() {
        assert!(outcome_unknown(&network(false)));
        assert!(outcome_unknown(&network(true)));
        assert!(
            outcome_unknown(&server(596, 21)),
            "the session ended, perhaps after COMMIT"
        );
    }

    #[test]
    fn a_refusal_a_server_error_or_nothing_sent_is_known_not_to_have_applied() {
        assert!(
            !outcome_unknown(&server(50129, 16)),
            "the wait for the row was given up"
        );
        assert!(!outcome_unknown(&server(50130, 16)), "the id was refused");
        assert!(!outcome_unknown(&server(1205, 13)), "a deadlock victim rolled back");
        assert!(!outcome_unknown(&Error::Unavailable {
            reason: "no connection".into()
        }));
        assert!(!outcome_unknown(&Error::UnexpectedReply {
            procedure: "fence_admin.ForceRelease",
            detail: "two rows".into()
        }));
    }

    #[test]
    fn an_unknown_outcome_names_the_command_its_operation_id_and_both_failures() {
        let operation = Uuid::new_v4();
        let error = unknown(
            Procedure::ResetSourceVersion,
            operation,
            &network(false),
            "its replay failed too: no connection",
        );
        assert_eq!(error.unknown_operation(), Some(operation));
        assert!(
            !error.is_transient(),
            "a new operation id could apply the command twice"
        );
        let message = error.to_string();
        for part in [
            "fence_admin.ResetSourceVersion",
            &operation.to_string(),
            "connection reset",
            "its replay failed too",
            "same operation id",
        ] {
            assert!(message.contains(part), "{part}: {message}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_command_that_was_never_sent_is_not_replayed_and_its_error_is_kept() {
        let admin = Client::unreachable(Duration::from_millis(100)).admin();
        let operation = Uuid::new_v4();
        match admin.force_release_as("report:daily", operation).await {
            Err(Error::Unavailable { .. } | Error::Connect(_)) => {}
            other => panic!("nothing was sent, so nothing is unknown: {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_lost_after_the_call_s_budget_is_unknown_without_a_replay() {
        let admin = Client::unreachable(Duration::from_millis(100)).admin();
        let operation = Uuid::new_v4();
        let budget = admin.client.config.call_timeout;
        let sent = Instant::now();
        tokio::time::advance(budget).await;
        let key = "report:daily";
        let arguments: [&dyn ToSql; 2] = [&key, &operation];
        let answer = admin
            .settled(
                Procedure::ForceRelease,
                &arguments,
                About::key(key),
                operation,
                sent,
                Err(network(true)),
            )
            .await;
        match answer {
            Err(error @ Error::OperatorOutcomeUnknown { .. }) => {
                assert_eq!(error.unknown_operation(), Some(operation));
                assert!(error.to_string().contains("no time to replay"), "{error}");
            }
            other => panic!("{:?}", other.map(|_| "a reply")),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_replay_that_cannot_connect_leaves_the_outcome_unknown_within_the_budget() {
        let admin = Client::unreachable(Duration::from_millis(100)).admin();
        let operation = Uuid::new_v4();
        let key = "report:daily";
        let arguments: [&dyn ToSql; 2] = [&key, &operation];
        let sent = Instant::now();
        let answer = admin
            .settled(
                Procedure::ForceRelease,
                &arguments,
                About::key(key),
                operation,
                sent,
                Err(network(false)),
            )
            .await;
        match answer {
            Err(error @ Error::OperatorOutcomeUnknown { .. }) => {
                assert_eq!(error.unknown_operation(), Some(operation));
                assert!(error.to_string().contains("replay"), "{error}");
            }
            other => panic!("{:?}", other.map(|_| "a reply")),
        }
        assert!(
            sent.elapsed() <= admin.client.config.call_timeout,
            "{:?}",
            sent.elapsed()
        );
    }
}
