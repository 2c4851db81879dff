//! `fence_admin.PruneOutcomes` (contract v1.6): the replay window an
//! operator keeps on the outcome records. A publish replayed after its record
//! was pruned is judged as a new publish of its generation, which the fence
//! row refuses, and `GetOutcome` answers `Unknown`: see docs/contract.md,
//! "Outcome records and the replay window".

use time::OffsetDateTime;

use super::Admin;
use crate::client::call::Reply;
use crate::client::contract::Procedure;
use crate::client::span::About;
use crate::client::{Error, input};

/// What `PruneOutcomes` answered.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PruneOutcomes {
    /// The records older than `recorded_before` are deleted.
    Pruned {
        /// Accepted publishes' records deleted (`fence.PublishedOperation`).
        publishes: u64,
        /// Operator commands' records deleted (`fence.OperatorOperation`).
        commands: u64,
        /// The bound: the server clock less the days asked for.
        recorded_before: OffsetDateTime,
    },
}

impl PruneOutcomes {
    /// The contract's name of the outcome: `Pruned`.
    pub fn name(&self) -> &'static str {
        match self {
            PruneOutcomes::Pruned { .. } => "Pruned",
        }
    }
}

impl Admin {
    /// Deletes the outcome records of publishes and operator commands
    /// recorded more than `older_than_days` days ago (server clock; 1 to
    /// [`MAX_PRUNE_DAYS`](super::MAX_PRUNE_DAYS)), in batches of short
    /// transactions. Refused inside a transaction. Needs `fence_recovery`.
    pub async fn prune_outcomes(&self, older_than_days: u32) -> Result<PruneOutcomes, Error> {
        let days = input::older_than_days(older_than_days)?;
        let reply = self
            .client
            .call(Procedure::PruneOutcomes, &[&days], About::default())
            .await?;
        prune_outcomes(&reply)
    }
}

fn prune_outcomes(reply: &Reply) -> Result<PruneOutcomes, Error> {
    match reply.outcome()? {
        "Pruned" => {
            let count = |column: &'static str| {
                let value = reply.required::<i32>(column)?;
                u64::try_from(value).map_err(|_| reply.unexpected(format!("{column} is {value}")))
            };
            Ok(PruneOutcomes::Pruned {
                publishes: count("PublishesDeleted")?,
                commands: count("CommandsDeleted")?,
                recorded_before: reply.required_utc("RecordedBeforeUtc")?,
            })
        }
        _ => Err(reply.unknown_outcome()),
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::super::test_rows::{int, reply, text, utc};
    use super::*;

    #[test]
    fn pruned_counts_both_kinds_of_record() {
        let before = datetime!(2025-03-01 12:00:00 UTC);
        let pruned = reply(
            Procedure::PruneOutcomes,
            vec![
                text("Outcome", Some("Pruned")),
                int("PublishesDeleted", Some(5)),
                int("CommandsDeleted", Some(2)),
                utc("RecordedBeforeUtc", Some(before)),
            ],
        );
        assert_eq!(
            prune_outcomes(&pruned).unwrap(),
            PruneOutcomes::Pruned {
                publishes: 5,
                commands: 2,
                recorded_before: before
            }
        );
        let negative = reply(
            Procedure::PruneOutcomes,
            vec![
                text("Outcome", Some("Pruned")),
                int("PublishesDeleted", Some(-1)),
                int("CommandsDeleted", Some(0)),
                utc("RecordedBeforeUtc", Some(before)),
            ],
        );
        assert!(matches!(prune_outcomes(&negative), Err(Error::UnexpectedReply { .. })));
    }

    #[tokio::test]
    async fn a_window_out_of_range_is_refused_before_any_round_trip() {
        let admin = crate::client::Client::unreachable(std::time::Duration::from_millis(100)).admin();
        let error = admin.prune_outcomes(0).await.unwrap_err();
        assert_eq!(
            error.parameter(),
            Some(crate::client::Parameter::OlderThanDays),
            "{error:?}"
        );
    }
}
