//! `fence_admin.ResetSourceVersion` (contract v1.4): an operator lowers or
//! clears the source version a resource's publications are fenced by, after
//! the source's versions restarted (a rebuilt feed, a restored replica), which
//! would otherwise refuse every new build as `StaleSource`. Each command
//! carries an operation id (contract v1.5), so one whose reply was lost is
//! replayed and applies once.

use tiberius::ToSql;
use tokio::time::Instant;
use uuid::Uuid;

use super::Admin;
use super::force_release::about;
use crate::client::call::Reply;
use crate::client::contract::Procedure;
use crate::client::{Error, input};

/// What `ResetSourceVersion` answered.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResetSourceVersion {
    /// The source version is now the one asked for. Leases and publications
    /// stay as they were.
    Reset {
        /// The source version before, if any.
        previous: Option<i64>,
    },
    /// No fence row exists for the key; nothing changed.
    NotProvisioned,
}

impl ResetSourceVersion {
    /// The contract's name of the outcome: `Reset` or `NotProvisioned`.
    pub fn name(&self) -> &'static str {
        match self {
            ResetSourceVersion::Reset { .. } => "Reset",
            ResetSourceVersion::NotProvisioned => "NotProvisioned",
        }
    }
}

impl Admin {
    /// Sets the source version of `key` to `source_version` (0 or more), or
    /// clears it with `None`, so the next versioned publish sets it. Needs
    /// `fence_operator`.
    ///
    /// The command carries a fresh operation id: when its reply is lost it
    /// is replayed once with that id on a new connection, which answers
    /// what the first arrival did (its `previous` version), so a source
    /// version that a publish raised meanwhile is never lowered again. When
    /// no answer comes at all, the error is
    /// [`Error::OperatorOutcomeUnknown`] with the id, for
    /// [`reset_source_version_as`](Admin::reset_source_version_as).
    pub async fn reset_source_version(
        &self,
        key: &str,
        source_version: Option<i64>,
    ) -> Result<ResetSourceVersion, Error> {
        self.reset_source_version_as(key, source_version, Uuid::new_v4()).await
    }

    /// [`reset_source_version`](Admin::reset_source_version) as the command
    /// `operation_id` (non-nil): fresh for a new command, the same (with the
    /// same `source_version`) to send one again whose outcome is unknown. If
    /// the command with this id already applied, the answer is what it
    /// answered then and nothing changes. The id used before for another
    /// key, another command or another source version is refused
    /// ([`Error::Rejected`] 50130, about `@OperationId`).
    pub async fn reset_source_version_as(
        &self,
        key: &str,
        source_version: Option<i64>,
        operation_id: Uuid,
    ) -> Result<ResetSourceVersion, Error> {
        let key = input::key(key)?;
        let source_version = input::source_version(source_version)?;
        let operation_id = input::operation_id(operation_id)?;
        let sent = Instant::now();
        let arguments: [&dyn ToSql; 3] = [&key, &source_version, &operation_id];
        let first = self
            .client
            .call(Procedure::ResetSourceVersion, &arguments, about(key, operation_id))
            .await;
        let reply = self
            .settled(
                Procedure::ResetSourceVersion,
                &arguments,
                about(key, operation_id),
                operation_id,
                sent,
                first,
            )
            .await?;
        reset(&reply)
    }
}

fn reset(reply: &Reply) -> Result<ResetSourceVersion, Error> {
    match reply.outcome()? {
        "Reset" => Ok(ResetSourceVersion::Reset {
            previous: reply.get("PreviousSourceVersion")?,
        }),
        "NotProvisioned" => Ok(ResetSourceVersion::NotProvisioned),
        _ => Err(reply.unknown_outcome()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_rows::{big, reply, text};
    use super::*;

    fn row(outcome: &str, previous: Option<i64>) -> Reply {
        reply(
            Procedure::ResetSourceVersion,
            vec![text("Outcome", Some(outcome)), big("PreviousSourceVersion", previous)],
        )
    }

    #[test]
    fn a_reset_carries_the_previous_version_even_when_there_was_none() {
        assert_eq!(
            reset(&row("Reset", Some(5))).unwrap(),
            ResetSourceVersion::Reset { previous: Some(5) }
        );
        assert_eq!(
            reset(&row("Reset", None)).unwrap(),
            ResetSourceVersion::Reset { previous: None }
        );
        let missing = reset(&row("NotProvisioned", None)).unwrap();
        assert_eq!(missing, ResetSourceVersion::NotProvisioned);
        assert_eq!(missing.name(), "NotProvisioned");
    }

    #[test]
    fn an_unknown_outcome_is_outside_the_contract() {
        assert!(matches!(
            reset(&row("Cleared", None)),
            Err(Error::UnexpectedReply { .. })
        ));
    }
}
