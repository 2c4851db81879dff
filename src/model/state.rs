//! What the fence tables hold, as the model keeps it: one [`Resource`] per
//! key, the ended tenures, the outcome records of publishes and operator
//! commands, the recoveries and the retirement mark.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use uuid::Uuid;

use super::answer::Ending;
use super::key_order::KeyOrder;

/// A key's fence row (`fence.Resource`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resource {
    /// Raised by every acquisition of a free or expired lease, by
    /// `ForceRelease`, and to a new epoch by `Recover`; never lowered.
    pub generation: i64,
    /// The holder, NULL once released, fenced or recovered. A holder whose
    /// lease ran out stays here until someone acts.
    pub owner: Option<Uuid>,
    /// The holder's lease end, kept after it runs out; NULL with no owner.
    pub lease_until: Option<OffsetDateTime>,
    /// When the current (or last released) holder acquired.
    pub acquired_at: Option<OffsetDateTime>,
    /// The generation of the last accepted publish.
    pub published_generation: Option<i64>,
    /// The last accepted payload.
    pub payload: Option<String>,
    /// When it was accepted.
    pub published_at: Option<OffsetDateTime>,
    /// The source version the last accepted publish carried (NULL for an
    /// unversioned one).
    pub published_source_version: Option<i64>,
    /// The key's source version: the highest a publish or a fenced write
    /// committed, or what an operator reset it to.
    pub source_version: Option<i64>,
    /// When `Provision` created the row.
    pub provisioned_at: OffsetDateTime,
}

impl Resource {
    /// Whether an owner holds a lease that ends after `now`.
    pub fn is_held(&self, now: OffsetDateTime) -> bool {
        self.owner.is_some() && self.lease_until.is_some_and(|until| until > now)
    }

    /// Whether the current generation has its publish.
    pub(super) fn published_in_current(&self) -> bool {
        self.published_generation == Some(self.generation)
    }

    /// The tenure the current holder's row stands for, ended at `now`: as
    /// `ending` while live, as `Expired` at its end once it ran out.
    pub(super) fn end_tenure(&self, key: &str, owner: Uuid, now: OffsetDateTime, ending: Ending) -> Tenure {
        let live = self.lease_until.is_some_and(|until| until > now);
        Tenure {
            key: key.to_string(),
            generation: self.generation,
            owner_hash: owner_hash(owner),
            acquired_at: self.acquired_at,
            ended_at: if live { Some(now) } else { self.lease_until },
            ending: if live { ending } else { Ending::Expired },
            published: self.published_in_current(),
            source_version: if self.published_in_current() {
                self.published_source_version
            } else {
                None
            },
        }
    }
}

/// An ended tenure (`fence.Tenure`): one per key and generation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenure {
    /// The key.
    pub key: String,
    /// The generation it held.
    pub generation: i64,
    /// SHA-256 of its owner's upper-case text.
    pub owner_hash: [u8; 32],
    /// When it was acquired.
    pub acquired_at: Option<OffsetDateTime>,
    /// When it ended: the moment of the call that ended it, or its lease
    /// end when it had run out before. NULL only when that lease end was.
    pub ended_at: Option<OffsetDateTime>,
    /// How it ended.
    pub ending: Ending,
    /// Whether a publish was accepted in its generation.
    pub published: bool,
    /// The version that publish carried.
    pub source_version: Option<i64>,
}

/// An accepted publish (`fence.PublishedOperation`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishRecord {
    /// The key it was published to.
    pub key: String,
    /// The generation it was published under.
    pub generation: i64,
    /// When.
    pub published_at: OffsetDateTime,
    /// The source version it carried.
    pub source_version: Option<i64>,
}

/// An operator command that named an operation id, or a `Retire` that
/// named none (`fence.OperatorOperation`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandRecord {
    /// Its operation id; `None` for a `Retire` without one, recorded under a
    /// fresh id nobody can replay.
    pub operation_id: Option<Uuid>,
    /// `ForceRelease`, `ResetSourceVersion` or `Retire`.
    pub command: Command,
    /// The key it named.
    pub key: String,
    /// `Fenced`, `Reset`, `Retired` or `NotProvisioned`.
    pub outcome: &'static str,
    /// The generation it answered (`ForceRelease`, `Retire`).
    pub generation: Option<i64>,
    /// The `@SourceVersion` it was sent (`ResetSourceVersion`).
    pub source_version: Option<i64>,
    /// The source version it replaced (`ResetSourceVersion`).
    pub previous_source_version: Option<i64>,
    /// When.
    pub recorded_at: OffsetDateTime,
}

/// The operator commands that record their answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// `fence_admin.ForceRelease`.
    ForceRelease,
    /// `fence_admin.ResetSourceVersion`.
    ResetSourceVersion,
    /// `fence_admin.Retire`.
    Retire,
}

/// A recovery that ran (`fence.Recovery`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryRecord {
    /// When.
    pub recovered_at: OffsetDateTime,
    /// The generation every key was raised to.
    pub generation_floor: i64,
    /// The leases it voided.
    pub leases_voided: i32,
    /// The database identity it recorded.
    pub database_identity: Option<Uuid>,
}

/// The retirement mark (`fence.Retirement`): no key starts below it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retirement {
    /// The highest generation a retired key had reached.
    pub highest_generation: i64,
    /// How many retirements changed something.
    pub keys_retired: i64,
    /// When the last one did.
    pub last_retired_at: Option<OffsetDateTime>,
}

/// The whole fence: what the tables of one database hold.
///
/// Build one with [`Fence::new`] (an empty, deployed database) and drive it
/// with [`Fence::call`]. The accessors read its state; only calls change it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fence {
    pub(super) resources: BTreeMap<String, Resource>,
    pub(super) tenures: BTreeMap<(String, i64), Tenure>,
    pub(super) publishes: BTreeMap<Uuid, PublishRecord>,
    pub(super) commands: BTreeMap<Uuid, CommandRecord>,
    /// Retirements that named no operation id, in the order they ran.
    pub(super) anonymous_commands: Vec<CommandRecord>,
    pub(super) recoveries: BTreeMap<Uuid, RecoveryRecord>,
    pub(super) retirement: Retirement,
    pub(super) database_identity: Option<Uuid>,
    pub(super) key_order: KeyOrder,
}

impl Fence {
    /// An empty fence: a database just deployed, with SQL Server's key
    /// order.
    pub fn new() -> Fence {
        Fence::default()
    }

    /// An empty fence whose keys sort in `order` (Babelfish's is
    /// [`KeyOrder::CodePoint`]).
    pub fn with_key_order(order: KeyOrder) -> Fence {
        Fence {
            key_order: order,
            ..Fence::default()
        }
    }

    /// How this fence's keys sort.
    pub fn key_order(&self) -> KeyOrder {
        self.key_order
    }

    /// `key`'s fence row.
    pub fn resource(&self, key: &str) -> Option<&Resource> {
        self.resources.get(key)
    }

    /// Every fence row, in key order.
    pub fn resources(&self) -> impl Iterator<Item = (&str, &Resource)> {
        self.resources.iter().map(|(key, resource)| (key.as_str(), resource))
    }

    /// `key`'s ended tenures, oldest generation first.
    pub fn tenures(&self, key: &str) -> impl Iterator<Item = &Tenure> {
        let key = key.to_string();
        self.tenures
            .range((key.clone(), i64::MIN)..=(key, i64::MAX))
            .map(|(_, tenure)| tenure)
    }

    /// The record of the accepted publish with `operation_id`.
    pub fn publish_record(&self, operation_id: Uuid) -> Option<&PublishRecord> {
        self.publishes.get(&operation_id)
    }

    /// The record of the operator command with `operation_id`.
    pub fn command_record(&self, operation_id: Uuid) -> Option<&CommandRecord> {
        self.commands.get(&operation_id)
    }

    /// Every operator command recorded, those with an operation id first.
    pub fn command_records(&self) -> impl Iterator<Item = &CommandRecord> {
        self.commands.values().chain(self.anonymous_commands.iter())
    }

    /// The recovery with `recovery_id`.
    pub fn recovery(&self, recovery_id: Uuid) -> Option<&RecoveryRecord> {
        self.recoveries.get(&recovery_id)
    }

    /// The retirement mark.
    pub fn retirement(&self) -> Retirement {
        self.retirement
    }

    /// The database identity the last recovery that named one recorded.
    pub fn database_identity(&self) -> Option<Uuid> {
        self.database_identity
    }
}

/// `OwnerHash`: SHA-256 of the owner's upper-case text
/// (`6F9619FF-8B86-D011-B42D-00C04FC964FF`), so a history shows who held a
/// tenure without an id anyone could present.
pub fn owner_hash(owner: Uuid) -> [u8; 32] {
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let text = owner.hyphenated().encode_upper(&mut text);
    Sha256::digest(text.as_bytes()).into()
}

#[cfg(feature = "fake")]
impl Fence {
    /// Puts `key`'s source version back to `version`: the fake's rollback
    /// of a fenced transaction whose `AssertHolder` raised it.
    pub(crate) fn restore_source_version(&mut self, key: &str, version: Option<i64>) {
        if let Some(row) = self.resources.get_mut(key) {
            row.source_version = version;
        }
    }
}
