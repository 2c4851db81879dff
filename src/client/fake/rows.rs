//! The model's answers as the procedures' rows: the same columns, named and
//! typed as the procedure sends them (NULL where an outcome has no value),
//! so the client reads them with the code that reads a server's.

use time::OffsetDateTime;

use crate::client::Procedure;
use crate::client::admin::test_rows::{Cell, big, binary, bit, int, reply, text, utc};
use crate::client::call::Reply;
use crate::model::{
    Acquired, Answer, ForceReleased, History, Inspected, LeaseState, Outcome, Publication, Recovered, Recovery,
    Renewed, Reset, Retired, SetAcquired, SetRenewed, SlotAcquired, TenureRow,
};

fn outcome(name: &str) -> Cell {
    text("Outcome", Some(name))
}

/// `Inspect`'s and `ListLeases`' columns; `state` is `None` for a key
/// with no fence row.
fn lease_state(name: &str, key: Option<&str>, state: Option<&LeaseState>, server_utc: OffsetDateTime) -> Vec<Cell> {
    let mut cells = vec![outcome(name)];
    if let Some(key) = key {
        cells.push(text("ResourceKey", Some(key)));
    }
    cells.extend([
        big("Generation", state.map(|s| s.generation)),
        bit("IsHeld", state.map(|s| s.is_held)),
        utc("LeaseUntilUtc", state.and_then(|s| s.lease_until)),
        big("PublishedGeneration", state.and_then(|s| s.published_generation)),
        utc("ServerUtc", Some(server_utc)),
        big("SourceVersion", state.and_then(|s| s.source_version)),
    ]);
    cells
}

fn tenure(row: &TenureRow) -> Vec<Cell> {
    vec![
        outcome("Found"),
        big("Generation", Some(row.generation)),
        binary("OwnerHash", Some(&row.owner_hash)),
        utc("AcquiredAtUtc", row.acquired_at),
        utc("EndedAtUtc", row.ended_at),
        text("Ending", row.ending.map(|e| e.name())),
        bit("Published", Some(row.published)),
        utc("LeaseUntilUtc", row.lease_until),
        utc("ServerUtc", Some(row.server_utc)),
        big("SourceVersion", row.source_version),
    ]
}

fn recovery(name: &str, recovered: &Recovery) -> Vec<Cell> {
    vec![
        outcome(name),
        big("GenerationFloor", Some(recovered.generation_floor)),
        int("LeasesVoided", Some(recovered.leases_voided)),
        utc("RecoveredAtUtc", Some(recovered.recovered_at)),
    ]
}

/// The row, or rows, `procedure` answers for `answer`.
pub(super) fn replies(procedure: Procedure, answer: &Answer) -> Vec<Reply> {
    let name = answer.outcome();
    let one = |cells: Vec<Cell>| vec![reply(procedure, cells)];
    match answer {
        Answer::Provision(_) | Answer::Publish(_) | Answer::Release(_) => one(vec![outcome(name)]),
        Answer::Acquire(acquired) => {
            let (generation, until, server) = match *acquired {
                Acquired::Acquired {
                    generation,
                    lease_until,
                    server_utc,
                } => (Some(generation), Some(lease_until), server_utc),
                Acquired::Busy {
                    lease_until,
                    server_utc,
                } => (None, Some(lease_until), server_utc),
                Acquired::NotProvisioned { server_utc } => (None, None, server_utc),
            };
            one(vec![
                outcome(name),
                big("Generation", generation),
                utc("LeaseUntilUtc", until),
                utc("ServerUtc", Some(server)),
            ])
        }
        Answer::Renew(renewed) => {
            let until = match renewed {
                Renewed::Renewed { lease_until } => Some(*lease_until),
                Renewed::Lost => None,
            };
            one(vec![outcome(name), utc("LeaseUntilUtc", until)])
        }
        Answer::RenewMany(rows) => rows
            .iter()
            .map(|(key, renewed)| {
                let (name, until) = match renewed {
                    Renewed::Renewed { lease_until } => ("Renewed", Some(*lease_until)),
                    Renewed::Lost => ("Lost", None),
                };
                let cells = vec![
                    outcome(name),
                    text("ResourceKey", Some(key)),
                    utc("LeaseUntilUtc", until),
                ];
                reply(procedure, cells)
            })
            .collect(),
        Answer::GetOutcome(found) => {
            let (key, generation, at, version) = match found {
                Outcome::Published {
                    resource_key,
                    generation,
                    published_at,
                    source_version,
                } => (
                    Some(resource_key.as_str()),
                    Some(*generation),
                    Some(*published_at),
                    *source_version,
                ),
                Outcome::Unknown => (None, None, None, None),
            };
            one(vec![
                outcome(name),
                text("ResourceKey", key),
                big("Generation", generation),
                utc("PublishedAtUtc", at),
                big("SourceVersion", version),
            ])
        }
        Answer::ReadPublication(publication) => {
            let (generation, payload, at, version) = match publication {
                Publication::Found {
                    published_generation,
                    payload,
                    published_at,
                    source_version,
                } => (
                    *published_generation,
                    payload.as_deref(),
                    *published_at,
                    *source_version,
                ),
                Publication::NotProvisioned => (None, None, None, None),
            };
            one(vec![
                outcome(name),
                big("PublishedGeneration", generation),
                text("Payload", payload),
                utc("PublishedAtUtc", at),
                big("SourceVersion", version),
            ])
        }
        Answer::Inspect(Inspected::Found(state)) => one(lease_state(name, None, Some(state), state.server_utc)),
        Answer::Inspect(Inspected::NotProvisioned { server_utc }) => one(lease_state(name, None, None, *server_utc)),
        Answer::AssertHolder(holding) => one(vec![
            outcome(name),
            big("Generation", Some(holding.generation)),
            utc("LeaseUntilUtc", Some(holding.lease_until)),
        ]),
        Answer::ContractVersion { major, minor } => one(vec![
            outcome(name),
            int("Major", Some(*major)),
            int("Minor", Some(*minor)),
        ]),
        Answer::ListLeases(rows) => rows
            .iter()
            .map(|row| {
                let cells = lease_state("Found", Some(&row.resource_key), Some(&row.state), row.state.server_utc);
                reply(procedure, cells)
            })
            .collect(),
        Answer::ForceRelease(released) => {
            let generation = match released {
                ForceReleased::Fenced { generation } => Some(*generation),
                ForceReleased::NotProvisioned => None,
            };
            one(vec![outcome(name), big("Generation", generation)])
        }
        Answer::LeaseHistory(History::Found(rows)) => rows.iter().map(|row| reply(procedure, tenure(row))).collect(),
        Answer::LeaseHistory(History::NotProvisioned { server_utc }) => one(vec![
            outcome(name),
            big("Generation", None),
            binary("OwnerHash", None),
            utc("AcquiredAtUtc", None),
            utc("EndedAtUtc", None),
            text("Ending", None),
            bit("Published", None),
            utc("LeaseUntilUtc", None),
            utc("ServerUtc", Some(*server_utc)),
            big("SourceVersion", None),
        ]),
        Answer::PruneTenure { deleted, ended_before } => one(vec![
            outcome(name),
            int("Deleted", Some(*deleted)),
            utc("EndedBeforeUtc", Some(*ended_before)),
        ]),
        Answer::Recover(Recovered::Recovered(recovered)) => one(recovery(name, recovered)),
        Answer::Recover(Recovered::AlreadyRecovered(recovered)) => one(recovery(name, recovered)),
        Answer::ResetSourceVersion(reset) => {
            let previous = match reset {
                Reset::Reset {
                    previous_source_version,
                } => *previous_source_version,
                Reset::NotProvisioned => None,
            };
            one(vec![outcome(name), big("PreviousSourceVersion", previous)])
        }
        Answer::Retire(retired) => {
            let generation = match retired {
                Retired::Retired { generation } => Some(*generation),
                Retired::NotProvisioned => None,
            };
            one(vec![outcome(name), big("Generation", generation)])
        }
        Answer::PruneOutcomes {
            publishes_deleted,
            commands_deleted,
            recorded_before,
        } => one(vec![
            outcome(name),
            int("PublishesDeleted", Some(*publishes_deleted)),
            int("CommandsDeleted", Some(*commands_deleted)),
            utc("RecordedBeforeUtc", Some(*recorded_before)),
        ]),
        Answer::AcquireSet { rows, server_utc } => rows
            .iter()
            .map(|(key, row)| {
                let (generation, until) = match *row {
                    SetAcquired::Acquired {
                        generation,
                        lease_until,
                    } => (Some(generation), Some(lease_until)),
                    SetAcquired::Busy { lease_until } => (None, Some(lease_until)),
                    _ => (None, None),
                };
                let cells = vec![
                    outcome(row.outcome()),
                    text("ResourceKey", Some(key)),
                    big("Generation", generation),
                    utc("LeaseUntilUtc", until),
                    utc("ServerUtc", Some(*server_utc)),
                ];
                reply(procedure, cells)
            })
            .collect(),
        Answer::RenewSet(rows) => rows
            .iter()
            .map(|(key, row)| {
                let until = match *row {
                    SetRenewed::Renewed { lease_until } | SetRenewed::Withheld { lease_until } => Some(lease_until),
                    _ => None,
                };
                let cells = vec![
                    outcome(row.outcome()),
                    text("ResourceKey", Some(key)),
                    utc("LeaseUntilUtc", until),
                ];
                reply(procedure, cells)
            })
            .collect(),
        Answer::ReleaseSet(rows) => rows
            .iter()
            .map(|(key, row)| {
                let name = Answer::Release(*row).outcome();
                reply(procedure, vec![outcome(name), text("ResourceKey", Some(key))])
            })
            .collect(),
        Answer::PublishSet(rows) => rows
            .iter()
            .map(|(key, row)| reply(procedure, vec![outcome(row.outcome()), text("ResourceKey", Some(key))]))
            .collect(),
        Answer::AssertHolderSet(rows) => rows
            .iter()
            .map(|(key, holding)| {
                let cells = vec![
                    outcome(name),
                    text("ResourceKey", Some(key)),
                    big("Generation", Some(holding.generation)),
                    utc("LeaseUntilUtc", Some(holding.lease_until)),
                ];
                reply(procedure, cells)
            })
            .collect(),
        Answer::AcquireSlot(acquired) => {
            let (slot, key, generation, until) = match acquired {
                SlotAcquired::Acquired {
                    slot,
                    resource_key,
                    generation,
                    lease_until,
                    ..
                } => (
                    Some(*slot),
                    Some(resource_key.as_str()),
                    Some(*generation),
                    Some(*lease_until),
                ),
                SlotAcquired::Busy { lease_until, .. } => (None, None, None, Some(*lease_until)),
                _ => (None, None, None, None),
            };
            one(vec![
                outcome(name),
                int("Slot", slot),
                text("ResourceKey", key),
                big("Generation", generation),
                utc("LeaseUntilUtc", until),
                utc("ServerUtc", Some(acquired.server_utc())),
            ])
        }
    }
}
