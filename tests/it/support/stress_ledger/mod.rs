//! The client-side ledger of a stress run and the invariants of the fence,
//! checked against it and against the tables afterwards.
//!
//! Server times order what the server decided: a grant or renewal was decided
//! at its `LeaseUntilUtc` minus its length (the procedure read the clock once,
//! under the row lock), and a publish at its `PublishedAtUtc`. Client instants
//! order what one worker saw before it sent something else.

mod table;

pub use table::TableState;

use std::collections::{BTreeMap, BTreeSet};

use fencepost::client::{Lease, Publish};
use time::OffsetDateTime;
use tokio::time::Instant;
use uuid::Uuid;

#[derive(Clone, Debug)]
pub enum Event {
    Granted {
        key: String,
        owner: Uuid,
        generation: i64,
        decided: OffsetDateTime,
        until: OffsetDateTime,
    },
    Renewed {
        key: String,
        generation: i64,
        decided: OffsetDateTime,
        until: OffsetDateTime,
    },
    Publish {
        key: String,
        owner: Uuid,
        generation: i64,
        operation: Uuid,
        payload: String,
        outcome: Publish,
        replay: bool,
        sent: Instant,
    },
    Released {
        key: String,
        generation: i64,
        received: Instant,
    },
    Fenced {
        key: String,
        generation: i64,
        received: Instant,
    },
    Busy,
    Lost,
    NotHolder,
    Failed {
        what: String,
    },
}

impl Event {
    pub fn granted(lease: &Lease) -> Event {
        Event::Granted {
            key: lease.key().to_string(),
            owner: lease.owner(),
            generation: lease.generation(),
            decided: lease.until() - lease.length(),
            until: lease.until(),
        }
    }

    pub fn renewed(lease: &Lease) -> Event {
        Event::Renewed {
            key: lease.key().to_string(),
            generation: lease.generation(),
            decided: lease.until() - lease.length(),
            until: lease.until(),
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Event::Granted { .. } => "acquired",
            Event::Renewed { .. } => "renewed",
            Event::Publish { replay: false, .. } => "publish",
            Event::Publish { replay: true, .. } => "replay",
            Event::Released { .. } => "released",
            Event::Fenced { .. } => "force-released",
            Event::Busy => "busy",
            Event::Lost => "lost",
            Event::NotHolder => "not-holder",
            Event::Failed { .. } => "failed",
        }
    }
}

#[derive(Debug, Default)]
pub struct Ledger {
    pub events: Vec<Event>,
}

/// An accepted publish as the ledger saw it.
pub struct Accepted<'a> {
    pub key: &'a str,
    pub owner: Uuid,
    pub generation: i64,
    pub operation: Uuid,
    pub payload: &'a str,
    pub sent: Instant,
}

impl Ledger {
    /// Counts per kind of operation, e.g. "acquired 812, renewed 640, ...".
    pub fn summary(&self) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for event in &self.events {
            *counts.entry(event.kind()).or_default() += 1;
        }
        counts
            .iter()
            .map(|(kind, n)| format!("{kind} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn accepted(&self) -> impl Iterator<Item = Accepted<'_>> {
        self.events.iter().filter_map(|event| match event {
            Event::Publish {
                key,
                owner,
                generation,
                operation,
                payload,
                outcome: Publish::Published,
                sent,
                ..
            } => Some(Accepted {
                key,
                owner: *owner,
                generation: *generation,
                operation: *operation,
                payload,
                sent: *sent,
            }),
            _ => None,
        })
    }

    /// Every broken invariant, described; empty when the fence held.
    pub fn violations(&self, table: &TableState) -> Vec<String> {
        let mut found = Vec::new();
        self.calls_failed(&mut found);
        self.generations_granted_once_and_rising(&mut found);
        self.one_publication_per_generation(&mut found);
        self.publications_only_from_current_leases(table, &mut found);
        self.tables_match_the_ledger(table, &mut found);
        found
    }

    fn calls_failed(&self, found: &mut Vec<String>) {
        for event in &self.events {
            if let Event::Failed { what } = event {
                found.push(format!("a call failed where the contract has an outcome: {what}"));
            }
        }
    }

    fn grants(&self) -> impl Iterator<Item = (&str, Uuid, i64, OffsetDateTime, OffsetDateTime)> {
        self.events.iter().filter_map(|event| match event {
            Event::Granted {
                key,
                owner,
                generation,
                decided,
                until,
            } => Some((key.as_str(), *owner, *generation, *decided, *until)),
            _ => None,
        })
    }

    fn generations_granted_once_and_rising(&self, found: &mut Vec<String>) {
        let mut owners: BTreeMap<(&str, i64), BTreeSet<Uuid>> = BTreeMap::new();
        let mut by_key: BTreeMap<&str, Vec<(OffsetDateTime, i64)>> = BTreeMap::new();
        for (key, owner, generation, decided, _) in self.grants() {
            owners.entry((key, generation)).or_default().insert(owner);
            by_key.entry(key).or_default().push((decided, generation));
        }
        for ((key, generation), owners) in owners {
            if owners.len() > 1 {
                found.push(format!(
                    "{key} generation {generation} was granted to {} owners",
                    owners.len()
                ));
            }
        }
        for (key, mut grants) in by_key {
            grants.sort();
            for pair in grants.windows(2) {
                if pair[1].1 <= pair[0].1 {
                    found.push(format!(
                        "{key}: generation {} granted at {} after generation {} at {}",
                        pair[1].1, pair[1].0, pair[0].1, pair[0].0
                    ));
                }
            }
        }
    }

    fn one_publication_per_generation(&self, found: &mut Vec<String>) {
        let mut operations: BTreeMap<(&str, i64), BTreeSet<Uuid>> = BTreeMap::new();
        for accepted in self.accepted() {
            operations
                .entry((accepted.key, accepted.generation))
                .or_default()
                .insert(accepted.operation);
        }
        for ((key, generation), operations) in operations {
            if operations.len() > 1 {
                found.push(format!(
                    "{key} generation {generation} accepted {} publications",
                    operations.len()
                ));
            }
        }
        let accepted: BTreeSet<Uuid> = self.accepted().map(|a| a.operation).collect();
        for event in &self.events {
            if let Event::Publish {
                operation,
                outcome: Publish::AlreadyPublished,
                ..
            } = event
                && !accepted.contains(operation)
            {
                found.push(format!(
                    "operation {operation} answered AlreadyPublished but was never accepted"
                ));
            }
        }
    }

    fn publications_only_from_current_leases(&self, table: &TableState, found: &mut Vec<String>) {
        for p in self.accepted() {
            let Some((_, _, at)) = table.operations.get(&p.operation) else {
                continue; // reported by tables_match_the_ledger
            };
            let at = *at;
            let grant = self
                .grants()
                .find(|(key, _, generation, _, _)| *key == p.key && *generation == p.generation);
            let Some((_, owner, _, _, granted_until)) = grant else {
                found.push(format!(
                    "{} generation {} published but never granted",
                    p.key, p.generation
                ));
                continue;
            };
            if owner != p.owner {
                found.push(format!(
                    "{} generation {} published by an owner it was not granted to",
                    p.key, p.generation
                ));
            }
            let renewed_until = self.events.iter().filter_map(|event| match event {
                Event::Renewed {
                    key,
                    generation,
                    decided,
                    until,
                } if *key == p.key && *generation == p.generation && *decided <= at => Some(*until),
                _ => None,
            });
            let lease_end = renewed_until.fold(granted_until, OffsetDateTime::max);
            if at >= lease_end {
                found.push(format!(
                    "{} generation {} published at {at}, after its lease ended at {lease_end}",
                    p.key, p.generation
                ));
            }
            for (key, _, generation, decided, _) in self.grants() {
                if key == p.key && generation > p.generation && decided <= at {
                    found.push(format!(
                        "{key} generation {} published at {at}, after generation {generation} was granted at {decided}",
                        p.generation
                    ));
                }
            }
            for event in &self.events {
                match event {
                    Event::Fenced {
                        key,
                        generation,
                        received,
                    } if *key == p.key && *generation > p.generation && *received < p.sent => found.push(format!(
                        "{key} generation {} published after a ForceRelease had fenced it",
                        p.generation
                    )),
                    Event::Released {
                        key,
                        generation,
                        received,
                    } if *key == p.key && *generation == p.generation && *received < p.sent => found.push(format!(
                        "{key} generation {} published after it was released",
                        p.generation
                    )),
                    _ => {}
                }
            }
        }
    }

    fn tables_match_the_ledger(&self, table: &TableState, found: &mut Vec<String>) {
        let ledger: BTreeMap<Uuid, (String, i64)> = self
            .accepted()
            .map(|a| (a.operation, (a.key.to_string(), a.generation)))
            .collect();
        let stored: BTreeMap<Uuid, (String, i64)> = table
            .operations
            .iter()
            .map(|(operation, (key, generation, _))| (*operation, (key.clone(), *generation)))
            .collect();
        if ledger != stored {
            let missing = ledger.keys().filter(|o| !stored.contains_key(o)).count();
            let extra = stored.keys().filter(|o| !ledger.contains_key(o)).count();
            found.push(format!(
                "fence.PublishedOperation differs from the accepted publishes: {missing} missing, {extra} not accepted"
            ));
        }
        for (key, (generation, payload)) in &table.resources {
            let last = self.accepted().filter(|a| a.key == key).max_by_key(|a| a.generation);
            let expected = (
                last.as_ref().map(|a| a.generation),
                last.as_ref().map(|a| a.payload.to_string()),
            );
            if (generation.as_ref().copied(), payload.clone()) != expected {
                found.push(format!(
                    "{key} holds generation {generation:?} payload {payload:?}, the last accepted publish was {expected:?}"
                ));
            }
        }
    }
}

// The ledger's own checks (`tests.rs`) are compiled into `lease_stress`
// only, so they run once although `deploy_under_traffic` uses the ledger too.
