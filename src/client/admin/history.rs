//! A resource's tenures (`fence_admin.LeaseHistory`), newest first, and the
//! bound an operator keeps on them (`fence_admin.PruneTenure`). An owner
//! appears only as a hash, so nobody can read an owner id here and present it.

use time::OffsetDateTime;

use super::Admin;
use crate::client::call::Reply;
use crate::client::contract::Procedure;
use crate::client::span::About;
use crate::client::{Error, input};

/// What `LeaseHistory` answered.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseHistory {
    /// The resource's tenures.
    Found(History),
    /// No fence row exists for the key.
    NotProvisioned {
        /// The server clock when it answered.
        server_utc: OffsetDateTime,
    },
}

impl LeaseHistory {
    /// The contract's name of the outcome: `Found` or `NotProvisioned`.
    pub fn name(&self) -> &'static str {
        match self {
            LeaseHistory::Found(_) => "Found",
            LeaseHistory::NotProvisioned { .. } => "NotProvisioned",
        }
    }
}

/// A resource's tenures, newest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// Each generation somebody held, newest first: the open one (if any),
    /// then the ended ones.
    pub tenures: Vec<Tenure>,
    /// The server clock when it answered; `None` when no tenure came back
    /// (a resource never acquired, or whose history was pruned).
    pub server_utc: Option<OffsetDateTime>,
    max_rows: u32,
}

impl History {
    /// Whether the history stopped at the call's `max_rows`, so there may be
    /// older tenures.
    pub fn is_full(&self) -> bool {
        self.tenures.len() == self.max_rows as usize
    }
}

/// One generation somebody held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenure {
    /// The generation.
    pub generation: i64,
    /// SHA-256 of the owner's upper-case text, in lower-case hex, as
    /// [`Lease::owner_hash`](crate::client::Lease::owner_hash) gives it.
    pub owner_hash: Option<String>,
    /// When it was acquired; `None` for one acquired before the history began.
    pub acquired_at: Option<OffsetDateTime>,
    /// When it ended; `None` while it is open.
    pub ended_at: Option<OffsetDateTime>,
    /// How it ended; `None` while it is open.
    pub ending: Option<Ending>,
    /// Whether it published.
    pub published: bool,
    /// The open tenure's lease end.
    pub lease_until: Option<OffsetDateTime>,
    /// The source version its accepted publish carried (contract v1.4).
    pub source_version: Option<i64>,
}

/// How a tenure ended.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Its holder released it (or published and released).
    Released,
    /// It ran out; it ended when it ran out, not when that was noticed.
    Expired,
    /// An operator fenced it out ([`Admin::force_release`]).
    ForceReleased,
    /// A recovery voided it ([`Admin::recover`]).
    Superseded,
}

impl Ending {
    /// The contract's name for it, e.g. `ForceReleased`.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Released => "Released",
            Ending::Expired => "Expired",
            Ending::ForceReleased => "ForceReleased",
            Ending::Superseded => "Superseded",
        }
    }

    fn from_name(name: &str) -> Option<Ending> {
        Some(match name {
            "Released" => Ending::Released,
            "Expired" => Ending::Expired,
            "ForceReleased" => Ending::ForceReleased,
            "Superseded" => Ending::Superseded,
            _ => return None,
        })
    }
}

/// What `PruneTenure` answered.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prune {
    /// The tenures that ended before `ended_before` are deleted.
    Pruned {
        /// How many.
        deleted: u64,
        /// The bound: the server clock less the days asked for.
        ended_before: OffsetDateTime,
    },
}

impl Prune {
    /// The contract's name of the outcome: `Pruned`.
    pub fn name(&self) -> &'static str {
        match self {
            Prune::Pruned { .. } => "Pruned",
        }
    }
}

impl Admin {
    /// The tenures of `key`, newest first, at most `max_rows` (1 to
    /// [`MAX_ROWS`](super::MAX_ROWS)). Needs `fence_reader`,
    /// `fence_operator` or `fence_recovery`.
    pub async fn lease_history(&self, key: &str, max_rows: u32) -> Result<LeaseHistory, Error> {
        let key = input::key(key)?;
        let rows = input::max_rows(max_rows)?;
        let replies = self
            .client
            .call_rows(Procedure::LeaseHistory, &[&key, &rows], About::key(key))
            .await?;
        lease_history(&replies, max_rows)
    }

    /// Deletes the tenures that ended more than `older_than_days` days ago
    /// (server clock; 1 to [`MAX_PRUNE_DAYS`](super::MAX_PRUNE_DAYS)), in
    /// batches of short transactions. Refused inside a transaction. Needs
    /// `fence_recovery`.
    pub async fn prune_tenure(&self, older_than_days: u32) -> Result<Prune, Error> {
        let days = input::older_than_days(older_than_days)?;
        let reply = self
            .client
            .call(Procedure::PruneTenure, &[&days], About::default())
            .await?;
        prune(&reply)
    }
}

fn lease_history(replies: &[Reply], max_rows: u32) -> Result<LeaseHistory, Error> {
    if let [reply] = replies
        && reply.outcome()? == "NotProvisioned"
    {
        return Ok(LeaseHistory::NotProvisioned {
            server_utc: reply.required_utc("ServerUtc")?,
        });
    }
    let tenures = replies.iter().map(tenure).collect::<Result<_, _>>()?;
    let server_utc = replies.first().map(|r| r.required_utc("ServerUtc")).transpose()?;
    Ok(LeaseHistory::Found(History {
        tenures,
        server_utc,
        max_rows,
    }))
}

fn tenure(reply: &Reply) -> Result<Tenure, Error> {
    if reply.outcome()? != "Found" {
        return Err(reply.unknown_outcome());
    }
    let ending = match reply.get::<&str>("Ending")? {
        None => None,
        Some(name) => {
            Some(Ending::from_name(name).ok_or_else(|| reply.unexpected(format!("unknown tenure ending '{name}'")))?)
        }
    };
    Ok(Tenure {
        generation: reply.required("Generation")?,
        owner_hash: reply.get::<&[u8]>("OwnerHash")?.map(hex::encode),
        acquired_at: reply.utc("AcquiredAtUtc")?,
        ended_at: reply.utc("EndedAtUtc")?,
        ending,
        published: reply.required("Published")?,
        lease_until: reply.utc("LeaseUntilUtc")?,
        source_version: reply.get("SourceVersion")?,
    })
}

fn prune(reply: &Reply) -> Result<Prune, Error> {
    match reply.outcome()? {
        "Pruned" => {
            let deleted = reply.required::<i32>("Deleted")?;
            Ok(Prune::Pruned {
                deleted: u64::try_from(deleted).map_err(|_| reply.unexpected(format!("Deleted is {deleted}")))?,
                ended_before: reply.required_utc("EndedBeforeUtc")?,
            })
        }
        _ => Err(reply.unknown_outcome()),
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::super::test_rows::{Cell, big, binary, bit, int, reply, text, utc};
    use super::*;

    const NOW: OffsetDateTime = datetime!(2025-03-01 12:00:00 UTC);
    const START: OffsetDateTime = datetime!(2025-03-01 11:00:00.25 UTC);
    const END: OffsetDateTime = datetime!(2025-03-01 11:30:00 UTC);

    fn row(outcome: &str, generation: Option<i64>, ending: Option<&str>) -> Vec<Cell> {
        let ended = ending.is_some();
        vec![
            text("Outcome", Some(outcome)),
            big("Generation", generation),
            binary("OwnerHash", generation.map(|_| &[0xab_u8; 32][..])),
            utc("AcquiredAtUtc", generation.map(|_| START)),
            utc("EndedAtUtc", ended.then_some(END)),
            text("Ending", ending),
            bit("Published", generation.map(|_| ended)),
            utc("LeaseUntilUtc", (!ended && generation.is_some()).then_some(END)),
            utc("ServerUtc", Some(NOW)),
            big("SourceVersion", ended.then_some(4)),
        ]
    }

    fn history(rows: Vec<Vec<Cell>>, max_rows: u32) -> Result<LeaseHistory, Error> {
        let replies: Vec<Reply> = rows
            .into_iter()
            .map(|cells| reply(Procedure::LeaseHistory, cells))
            .collect();
        lease_history(&replies, max_rows)
    }

    #[test]
    fn an_open_and_an_ended_tenure_read_newest_first() {
        let found = history(
            vec![
                row("Found", Some(3), None),
                row("Found", Some(2), Some("ForceReleased")),
            ],
            2,
        )
        .unwrap();
        let LeaseHistory::Found(history) = found else {
            panic!("{found:?}")
        };
        assert!(history.is_full());
        assert_eq!(history.server_utc, Some(NOW));
        let hash = Some("ab".repeat(32));
        assert_eq!(
            history.tenures,
            [
                Tenure {
                    generation: 3,
                    owner_hash: hash.clone(),
                    acquired_at: Some(START),
                    ended_at: None,
                    ending: None,
                    published: false,
                    lease_until: Some(END),
                    source_version: None,
                },
                Tenure {
                    generation: 2,
                    owner_hash: hash,
                    acquired_at: Some(START),
                    ended_at: Some(END),
                    ending: Some(Ending::ForceReleased),
                    published: true,
                    lease_until: None,
                    source_version: Some(4),
                },
            ]
        );
    }

    #[test]
    fn a_missing_key_and_a_resource_without_tenures_differ() {
        let missing = history(vec![row("NotProvisioned", None, None)], 100).unwrap();
        assert_eq!(missing, LeaseHistory::NotProvisioned { server_utc: NOW });
        assert_eq!(missing.name(), "NotProvisioned");
        let empty = history(vec![], 100).unwrap();
        let LeaseHistory::Found(history) = &empty else {
            panic!("{empty:?}")
        };
        assert_eq!(
            (history.tenures.len(), history.server_utc, history.is_full()),
            (0, None, false)
        );
        assert_eq!(empty.name(), "Found");
    }

    #[test]
    fn every_ending_of_the_contract_round_trips_and_another_is_outside_it() {
        for ending in [
            Ending::Released,
            Ending::Expired,
            Ending::ForceReleased,
            Ending::Superseded,
        ] {
            assert_eq!(Ending::from_name(ending.name()), Some(ending));
        }
        let error = history(vec![row("Found", Some(2), Some("Evicted"))], 100).unwrap_err();
        assert!(error.to_string().contains("unknown tenure ending 'Evicted'"), "{error}");
    }

    #[test]
    fn a_prune_answers_how_many_and_its_bound() {
        let pruned = reply(
            Procedure::PruneTenure,
            vec![
                text("Outcome", Some("Pruned")),
                int("Deleted", Some(2)),
                utc("EndedBeforeUtc", Some(END)),
            ],
        );
        let answer = prune(&pruned).unwrap();
        assert_eq!(
            answer,
            Prune::Pruned {
                deleted: 2,
                ended_before: END
            }
        );
        assert_eq!(answer.name(), "Pruned");
    }
}
