//! `fence_admin.ForceRelease`: the operator's lever for a stuck holder. It
//! raises the generation and clears the lease, so the holder's next renew,
//! publish or fenced transaction is refused and the next acquirer gets the
//! lease at once. Each command carries an operation id (contract v1.5), so
//! one whose reply was lost is replayed and applies once.

use tiberius::ToSql;
use tokio::time::Instant;
use uuid::Uuid;

use super::Admin;
use crate::client::call::Reply;
use crate::client::contract::Procedure;
use crate::client::span::About;
use crate::client::{Error, input};

/// What `ForceRelease` answered.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForceRelease {
    /// The holder, if any, is fenced out: the resource is free at this new
    /// generation, which nobody holds.
    Fenced {
        /// The new generation.
        generation: i64,
    },
    /// No fence row exists for the key; nothing changed.
    NotProvisioned,
}

impl ForceRelease {
    /// The contract's name of the outcome: `Fenced` or `NotProvisioned`.
    pub fn name(&self) -> &'static str {
        match self {
            ForceRelease::Fenced { .. } => "Fenced",
            ForceRelease::NotProvisioned => "NotProvisioned",
        }
    }
}

impl Admin {
    /// Fences out the current holder of `key`. Behind a holder whose
    /// transaction stays open (a frozen process, a client that never
    /// commits) the procedure waits at most 5 seconds for the fence row and
    /// fails ([`Error::Server`] 50129, or the engine's lock time-out);
    /// [`force_release_watched`](Admin::force_release_watched) names the
    /// session that blocks it, and can end it. Needs `fence_operator`.
    ///
    /// The command carries a fresh operation id: when its reply is lost it
    /// is replayed once with that id on a new connection, which answers
    /// what the first arrival did, so the key is fenced once, never again
    /// after a service acquired it. When no answer comes at all, the error
    /// is [`Error::OperatorOutcomeUnknown`] with the id, for
    /// [`force_release_as`](Admin::force_release_as).
    pub async fn force_release(&self, key: &str) -> Result<ForceRelease, Error> {
        self.force_release_as(key, Uuid::new_v4()).await
    }

    /// [`force_release`](Admin::force_release) as the command
    /// `operation_id` (non-nil): fresh for a new command, the same to send
    /// one again whose outcome is unknown. If the command with this id
    /// already applied, the answer is what it answered then (the same
    /// [`ForceRelease::Fenced`] generation, or
    /// [`NotProvisioned`](ForceRelease::NotProvisioned)) and nothing changes,
    /// however the key changed since; the answer does not say which, since
    /// either way the key was fenced at that generation. The id used before
    /// for another key or another command is refused
    /// ([`Error::Rejected`] 50130, about `@OperationId`).
    pub async fn force_release_as(&self, key: &str, operation_id: Uuid) -> Result<ForceRelease, Error> {
        let key = input::key(key)?;
        let operation_id = input::operation_id(operation_id)?;
        let sent = Instant::now();
        let arguments: [&dyn ToSql; 2] = [&key, &operation_id];
        let first = self
            .client
            .call(Procedure::ForceRelease, &arguments, about(key, operation_id))
            .await;
        self.force_release_settled(key, operation_id, sent, first).await
    }

    /// The answer of a ForceRelease of `key` as `operation_id` sent at
    /// `sent`, whose first call answered `first`: replayed once when that
    /// leaves the outcome unknown (see [`Admin::settled`]).
    pub(super) async fn force_release_settled(
        &self,
        key: &str,
        operation_id: Uuid,
        sent: Instant,
        first: Result<Reply, Error>,
    ) -> Result<ForceRelease, Error> {
        let arguments: [&dyn ToSql; 2] = [&key, &operation_id];
        let reply = self
            .settled(
                Procedure::ForceRelease,
                &arguments,
                about(key, operation_id),
                operation_id,
                sent,
                first,
            )
            .await?;
        force_release(&reply)
    }
}

/// What an operator command is about: its key and operation id.
pub(super) fn about(key: &str, operation_id: Uuid) -> About<'_> {
    About::key(key).operation(operation_id)
}

pub(super) fn force_release(reply: &Reply) -> Result<ForceRelease, Error> {
    match reply.outcome()? {
        "Fenced" => Ok(ForceRelease::Fenced {
            generation: reply.required("Generation")?,
        }),
        "NotProvisioned" => Ok(ForceRelease::NotProvisioned),
        _ => Err(reply.unknown_outcome()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_rows::{big, reply, text};
    use super::*;

    #[test]
    fn fenced_carries_the_new_generation_and_a_missing_key_none() {
        let fenced = reply(
            Procedure::ForceRelease,
            vec![text("Outcome", Some("Fenced")), big("Generation", Some(8))],
        );
        assert_eq!(force_release(&fenced).unwrap(), ForceRelease::Fenced { generation: 8 });
        let missing = reply(
            Procedure::ForceRelease,
            vec![text("Outcome", Some("NotProvisioned")), big("Generation", None)],
        );
        assert_eq!(force_release(&missing).unwrap(), ForceRelease::NotProvisioned);
        assert_eq!(
            [
                ForceRelease::Fenced { generation: 8 }.name(),
                ForceRelease::NotProvisioned.name()
            ],
            ["Fenced", "NotProvisioned"]
        );
    }

    #[test]
    fn a_replayed_answer_reads_as_the_first_one() {
        // A replay answers the recorded row: the same columns, the same
        // values, so the same outcome whichever call answered.
        let first = reply(
            Procedure::ForceRelease,
            vec![text("Outcome", Some("Fenced")), big("Generation", Some(12))],
        );
        let replayed = reply(
            Procedure::ForceRelease,
            vec![text("Outcome", Some("Fenced")), big("Generation", Some(12))],
        );
        assert_eq!(force_release(&first).unwrap(), force_release(&replayed).unwrap());
        let missing = reply(
            Procedure::ForceRelease,
            vec![text("Outcome", Some("NotProvisioned")), big("Generation", None)],
        );
        assert_eq!(force_release(&missing).unwrap(), ForceRelease::NotProvisioned);
    }

    #[tokio::test]
    async fn the_nil_operation_id_is_refused_before_any_round_trip() {
        let admin = crate::client::Client::unreachable(std::time::Duration::from_millis(100)).admin();
        let error = admin.force_release_as("report:daily", Uuid::nil()).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::InvalidInput {
                    parameter: crate::client::Parameter::OperationId,
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[test]
    fn fenced_without_a_generation_or_an_unknown_outcome_is_outside_the_contract() {
        let nameless = reply(
            Procedure::ForceRelease,
            vec![text("Outcome", Some("Fenced")), big("Generation", None)],
        );
        assert!(matches!(force_release(&nameless), Err(Error::UnexpectedReply { .. })));
        let unknown = reply(
            Procedure::ForceRelease,
            vec![text("Outcome", Some("Evicted")), big("Generation", Some(1))],
        );
        let error = force_release(&unknown).unwrap_err();
        assert!(error.to_string().contains("unknown outcome 'Evicted'"), "{error}");
    }
}
