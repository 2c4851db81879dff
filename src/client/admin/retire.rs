//! `fence_admin.Retire` (contract v1.6): an operator removes a key the
//! application no longer uses, with its publish records and its history. It
//! is refused while the key is held, and a key provisioned afterwards starts
//! at or above the retired generation, so generations never go back. Each
//! command carries an operation id, so one whose reply was lost is replayed
//! and applies once: never to the key provisioned again since.

use tiberius::ToSql;
use tokio::time::Instant;
use uuid::Uuid;

use super::Admin;
use super::force_release::about;
use crate::client::call::Reply;
use crate::client::contract::Procedure;
use crate::client::{Error, input};

/// The error `Retire` raises for a key held by an unexpired lease.
pub const RETIRE_REFUSED_HELD: u32 = 50131;

/// What `Retire` answered.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retire {
    /// The key's fence row, publish records and history are gone; a key
    /// provisioned from now on starts at this generation or above.
    Retired {
        /// The generation the key had reached.
        generation: i64,
    },
    /// No fence row exists for the key; nothing changed.
    NotProvisioned,
}

impl Retire {
    /// The contract's name of the outcome: `Retired` or `NotProvisioned`.
    pub fn name(&self) -> &'static str {
        match self {
            Retire::Retired { .. } => "Retired",
            Retire::NotProvisioned => "NotProvisioned",
        }
    }
}

impl Admin {
    /// Retires `key`: deletes its fence row, its publish records and its
    /// tenure history in one transaction. Refused while the key is held by
    /// an unexpired lease ([`Error::Server`] 50131,
    /// [`RETIRE_REFUSED_HELD`]): force-release it first. Waits at most 5
    /// seconds for the row, as [`force_release`](Admin::force_release).
    /// Needs `fence_operator`.
    ///
    /// The command carries a fresh operation id, replayed once with that id
    /// when its reply is lost; when no answer comes at all the error is
    /// [`Error::OperatorOutcomeUnknown`], for [`retire_as`](Admin::retire_as).
    pub async fn retire(&self, key: &str) -> Result<Retire, Error> {
        self.retire_as(key, Uuid::new_v4()).await
    }

    /// [`retire`](Admin::retire) as the command `operation_id` (non-nil):
    /// fresh for a new command, the same to send one again whose outcome is
    /// unknown. A command with this id that already applied answers what it
    /// answered then and changes nothing, even if the key was provisioned
    /// again since (until its record is pruned).
    pub async fn retire_as(&self, key: &str, operation_id: Uuid) -> Result<Retire, Error> {
        let key = input::key(key)?;
        let operation_id = input::operation_id(operation_id)?;
        let sent = Instant::now();
        let arguments: [&dyn ToSql; 2] = [&key, &operation_id];
        let first = self
            .client
            .call(Procedure::Retire, &arguments, about(key, operation_id))
            .await;
        let reply = self
            .settled(
                Procedure::Retire,
                &arguments,
                about(key, operation_id),
                operation_id,
                sent,
                first,
            )
            .await?;
        retire(&reply)
    }
}

fn retire(reply: &Reply) -> Result<Retire, Error> {
    match reply.outcome()? {
        "Retired" => Ok(Retire::Retired {
            generation: reply.required("Generation")?,
        }),
        "NotProvisioned" => Ok(Retire::NotProvisioned),
        _ => Err(reply.unknown_outcome()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_rows::{big, reply, text};
    use super::*;

    #[test]
    fn retired_carries_the_generation_and_a_missing_key_none() {
        let retired = reply(
            Procedure::Retire,
            vec![text("Outcome", Some("Retired")), big("Generation", Some(9))],
        );
        assert_eq!(retire(&retired).unwrap(), Retire::Retired { generation: 9 });
        let missing = reply(
            Procedure::Retire,
            vec![text("Outcome", Some("NotProvisioned")), big("Generation", None)],
        );
        assert_eq!(retire(&missing).unwrap(), Retire::NotProvisioned);
        let unknown = reply(
            Procedure::Retire,
            vec![text("Outcome", Some("Gone")), big("Generation", Some(1))],
        );
        assert!(
            retire(&unknown)
                .unwrap_err()
                .to_string()
                .contains("unknown outcome 'Gone'")
        );
    }

    #[tokio::test]
    async fn bad_input_is_refused_before_any_round_trip() {
        let admin = crate::client::Client::unreachable(std::time::Duration::from_millis(100)).admin();
        let nil = admin.retire_as("report:daily", Uuid::nil()).await.unwrap_err();
        assert_eq!(nil.parameter(), Some(crate::client::Parameter::OperationId), "{nil:?}");
        let empty = admin.retire("").await.unwrap_err();
        assert_eq!(
            empty.parameter(),
            Some(crate::client::Parameter::ResourceKey),
            "{empty:?}"
        );
    }
}
