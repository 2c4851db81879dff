//! What each procedure answers: its outcome and the columns that outcome
//! fills (the procedure sends NULL in the others). Times are the server's
//! clock, UTC, to 100 ns (`datetime2(7)`).

use time::OffsetDateTime;

use super::set_answer::{SetAcquired, SetPublished, SetRenewed, SlotAcquired};

/// The row (or, for `ListLeases` and `LeaseHistory`, the rows) a call answered.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `Provision`.
    Provision(Provisioned),
    /// `Acquire`.
    Acquire(Acquired),
    /// `Renew`.
    Renew(Renewed),
    /// `RenewMany`: each listed key with its `Renew` answer, in key order.
    RenewMany(Vec<(String, Renewed)>),
    /// `Publish`.
    Publish(Published),
    /// `Release`.
    Release(Released),
    /// `GetOutcome`.
    GetOutcome(Outcome),
    /// `ReadPublication`.
    ReadPublication(Publication),
    /// `Inspect`.
    Inspect(Inspected),
    /// `AssertHolder`: `Holding`, the only outcome that is a row.
    AssertHolder(Holding),
    /// `ContractVersion`: `Version`.
    ContractVersion {
        /// `Major`.
        major: i32,
        /// `Minor`.
        minor: i32,
    },
    /// `ListLeases`: one `Found` row per key, in key order.
    ListLeases(Vec<Listed>),
    /// `ForceRelease`.
    ForceRelease(ForceReleased),
    /// `LeaseHistory`.
    LeaseHistory(History),
    /// `PruneTenure`: `Pruned`.
    PruneTenure {
        /// `Deleted`.
        deleted: i32,
        /// `EndedBeforeUtc`.
        ended_before: OffsetDateTime,
    },
    /// `Recover`.
    Recover(Recovered),
    /// `ResetSourceVersion`.
    ResetSourceVersion(Reset),
    /// `Retire`.
    Retire(Retired),
    /// `PruneOutcomes`: `Pruned`.
    PruneOutcomes {
        /// `PublishesDeleted`.
        publishes_deleted: i32,
        /// `CommandsDeleted`.
        commands_deleted: i32,
        /// `RecordedBeforeUtc`.
        recorded_before: OffsetDateTime,
    },
    /// `AcquireSet`: each key's outcome, in key order, and the `ServerUtc`
    /// every row carries.
    AcquireSet {
        /// One row per key.
        rows: Vec<(String, SetAcquired)>,
        /// `ServerUtc`.
        server_utc: OffsetDateTime,
    },
    /// `RenewSet`: each key's outcome, in key order.
    RenewSet(Vec<(String, SetRenewed)>),
    /// `ReleaseSet`: each key's outcome, as `Release` answers it, in key
    /// order.
    ReleaseSet(Vec<(String, Released)>),
    /// `PublishSet`: each key's outcome, in key order.
    PublishSet(Vec<(String, SetPublished)>),
    /// `AssertHolderSet`: every key `Holding`, in key order (any other key
    /// is a refusal, 50110 to 50112, naming it).
    AssertHolderSet(Vec<(String, Holding)>),
    /// `AcquireSlot`.
    AcquireSlot(SlotAcquired),
}

impl Answer {
    /// The `Outcome` column (`Found` for `ListLeases`, whose every row says
    /// so; for `RenewMany`, `Renewed` when any of its rows says so, else
    /// `Lost`; for a set call, the outcome of its first key, in key order,
    /// that refused the set, else that of its first key).
    pub fn outcome(&self) -> &'static str {
        match self {
            Answer::Provision(Provisioned::Created) => "Created",
            Answer::Provision(Provisioned::Exists) => "Exists",
            Answer::Acquire(Acquired::Acquired { .. }) => "Acquired",
            Answer::Acquire(Acquired::Busy { .. }) => "Busy",
            Answer::Acquire(Acquired::NotProvisioned { .. }) => "NotProvisioned",
            Answer::Renew(Renewed::Renewed { .. }) => "Renewed",
            Answer::Renew(Renewed::Lost) => "Lost",
            Answer::RenewMany(rows) if rows.iter().any(|(_, r)| *r != Renewed::Lost) => "Renewed",
            Answer::RenewMany(_) => "Lost",
            Answer::Publish(published) => published.outcome(),
            Answer::Release(Released::Released) => "Released",
            Answer::Release(Released::NotHolder) => "NotHolder",
            Answer::GetOutcome(Outcome::Published { .. }) => "Published",
            Answer::GetOutcome(Outcome::Unknown) => "Unknown",
            Answer::ReadPublication(Publication::Found { .. }) => "Found",
            Answer::ReadPublication(Publication::NotProvisioned) => "NotProvisioned",
            Answer::Inspect(Inspected::Found(_)) => "Found",
            Answer::Inspect(Inspected::NotProvisioned { .. }) => "NotProvisioned",
            Answer::AssertHolder(_) => "Holding",
            Answer::ContractVersion { .. } => "Version",
            Answer::ListLeases(_) => "Found",
            Answer::ForceRelease(ForceReleased::Fenced { .. }) => "Fenced",
            Answer::ForceRelease(ForceReleased::NotProvisioned) => "NotProvisioned",
            Answer::LeaseHistory(History::Found(_)) => "Found",
            Answer::LeaseHistory(History::NotProvisioned { .. }) => "NotProvisioned",
            Answer::PruneTenure { .. } | Answer::PruneOutcomes { .. } => "Pruned",
            Answer::Recover(Recovered::Recovered(_)) => "Recovered",
            Answer::Recover(Recovered::AlreadyRecovered(_)) => "AlreadyRecovered",
            Answer::ResetSourceVersion(Reset::Reset { .. }) => "Reset",
            Answer::ResetSourceVersion(Reset::NotProvisioned) => "NotProvisioned",
            Answer::Retire(Retired::Retired { .. }) => "Retired",
            Answer::Retire(Retired::NotProvisioned) => "NotProvisioned",
            Answer::AcquireSet { rows, .. } => set_outcome(rows.iter().map(|(_, row)| row.outcome())),
            Answer::RenewSet(rows) => set_outcome(rows.iter().map(|(_, row)| row.outcome())),
            Answer::ReleaseSet(rows) if rows.iter().any(|(_, r)| *r == Released::Released) => "Released",
            Answer::ReleaseSet(_) => "NotHolder",
            Answer::PublishSet(rows) => set_outcome(rows.iter().map(|(_, row)| row.outcome())),
            Answer::AssertHolderSet(_) => "Holding",
            Answer::AcquireSlot(acquired) => acquired.outcome(),
        }
    }
}

/// The first outcome of `rows` that refused the set (neither granted nor
/// withheld), else the first.
fn set_outcome(rows: impl Iterator<Item = &'static str> + Clone) -> &'static str {
    let granted = ["Acquired", "Renewed", "Published", "AlreadyPublished", "Withheld"];
    rows.clone()
        .find(|outcome| !granted.contains(outcome))
        .or_else(|| rows.clone().next())
        .unwrap_or("None")
}

/// `Provision`'s outcomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provisioned {
    /// A fence row was created.
    Created,
    /// The key had one; nothing changed.
    Exists,
}

/// `Acquire`'s outcomes. `ServerUtc` is the moment the lease was judged.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Acquired {
    /// The lease is the caller's: a new generation, or the same one extended
    /// for the owner that still held it.
    Acquired {
        /// `Generation`.
        generation: i64,
        /// `LeaseUntilUtc`: `ServerUtc` plus the lease's seconds.
        lease_until: OffsetDateTime,
        /// `ServerUtc`.
        server_utc: OffsetDateTime,
    },
    /// Another owner's lease runs until `lease_until`.
    Busy {
        /// `LeaseUntilUtc`: the holder's expiry.
        lease_until: OffsetDateTime,
        /// `ServerUtc`.
        server_utc: OffsetDateTime,
    },
    /// The key has no fence row.
    NotProvisioned {
        /// `ServerUtc`.
        server_utc: OffsetDateTime,
    },
}

/// `Renew`'s outcomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewed {
    /// The lease runs until `lease_until` (now plus its seconds).
    Renewed {
        /// `LeaseUntilUtc`.
        lease_until: OffsetDateTime,
    },
    /// The lease is gone; an expired one is never revived.
    Lost,
}

/// `Publish`'s outcomes.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Published {
    /// The payload is the key's publication.
    Published,
    /// This operation id had committed already: a replay, nothing written.
    AlreadyPublished,
    /// Another owner or a newer generation is current.
    Superseded,
    /// The lease ran out or was released, and nobody has taken over.
    Expired,
    /// Another operation published in this generation.
    GenerationAlreadyPublished,
    /// The key has no fence row.
    NotProvisioned,
    /// The current, unexpired holder's source is older than the key's.
    StaleSource,
}

impl Published {
    /// The `Outcome` column.
    pub fn outcome(self) -> &'static str {
        match self {
            Published::Published => "Published",
            Published::AlreadyPublished => "AlreadyPublished",
            Published::Superseded => "Superseded",
            Published::Expired => "Expired",
            Published::GenerationAlreadyPublished => "GenerationAlreadyPublished",
            Published::NotProvisioned => "NotProvisioned",
            Published::StaleSource => "StaleSource",
        }
    }
}

/// `Release`'s outcomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Released {
    /// The lease was given up (also one that had run out with nobody after it).
    Released,
    /// This owner and generation do not hold the key; nothing changed.
    NotHolder,
}

/// `GetOutcome`'s outcomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The publish with this id committed.
    Published {
        /// `ResourceKey`.
        resource_key: String,
        /// `Generation`.
        generation: i64,
        /// `PublishedAtUtc`.
        published_at: OffsetDateTime,
        /// `SourceVersion`: the version that publish carried.
        source_version: Option<i64>,
    },
    /// No record of it: never committed, or its record was pruned or retired.
    Unknown,
}

/// `ReadPublication`'s outcomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Publication {
    /// The key's last accepted publish; every column NULL before the first.
    Found {
        /// `PublishedGeneration`.
        published_generation: Option<i64>,
        /// `Payload`.
        payload: Option<String>,
        /// `PublishedAtUtc`.
        published_at: Option<OffsetDateTime>,
        /// `SourceVersion`: the version the payload was published with.
        source_version: Option<i64>,
    },
    /// The key has no fence row.
    NotProvisioned,
}

/// A key's lease state as `Inspect` and `ListLeases` show it: never the owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseState {
    /// `Generation`.
    pub generation: i64,
    /// `IsHeld`: an owner whose lease ends after `server_utc`.
    pub is_held: bool,
    /// `LeaseUntilUtc`: the last lease's end, kept after it ran out; NULL
    /// once released or fenced.
    pub lease_until: Option<OffsetDateTime>,
    /// `PublishedGeneration`.
    pub published_generation: Option<i64>,
    /// `ServerUtc`.
    pub server_utc: OffsetDateTime,
    /// `SourceVersion`: the key's source version.
    pub source_version: Option<i64>,
}

/// `Inspect`'s outcomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inspected {
    /// The key's state.
    Found(LeaseState),
    /// The key has no fence row.
    NotProvisioned {
        /// `ServerUtc`.
        server_utc: OffsetDateTime,
    },
}

/// `AssertHolder`'s row: the caller holds the current, unexpired lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holding {
    /// `Generation`.
    pub generation: i64,
    /// `LeaseUntilUtc`.
    pub lease_until: OffsetDateTime,
}

/// One row of `ListLeases`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// `ResourceKey`.
    pub resource_key: String,
    /// The other columns, as `Inspect`'s.
    pub state: LeaseState,
}

/// `ForceRelease`'s outcomes (a replay answers the recorded one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForceReleased {
    /// The generation was raised past every holder; nobody holds it.
    Fenced {
        /// `Generation`: the new one.
        generation: i64,
    },
    /// The key had no fence row.
    NotProvisioned,
}

/// How a tenure ended (`Ending`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ending {
    /// Its holder released it, or published with `@Release = 1`.
    Released,
    /// It ran out, and ended when someone acted after that.
    Expired,
    /// An operator's `ForceRelease` ended it while it was live.
    ForceReleased,
    /// A `Recover` ended it while it was live.
    Superseded,
}

impl Ending {
    /// The `Ending` column.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Released => "Released",
            Ending::Expired => "Expired",
            Ending::ForceReleased => "ForceReleased",
            Ending::Superseded => "Superseded",
        }
    }
}

/// One row of `LeaseHistory`: a tenure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TenureRow {
    /// `Generation`.
    pub generation: i64,
    /// `OwnerHash`: SHA-256 of the owner's upper-case text.
    pub owner_hash: [u8; 32],
    /// `AcquiredAtUtc`.
    pub acquired_at: Option<OffsetDateTime>,
    /// `EndedAtUtc`: NULL for the open tenure.
    pub ended_at: Option<OffsetDateTime>,
    /// `Ending`: NULL for the open tenure.
    pub ending: Option<Ending>,
    /// `Published`: a publish was accepted in this generation.
    pub published: bool,
    /// `LeaseUntilUtc`: the open tenure's lease end, NULL for ended ones.
    pub lease_until: Option<OffsetDateTime>,
    /// `ServerUtc`.
    pub server_utc: OffsetDateTime,
    /// `SourceVersion`: the version the tenure's accepted publish carried.
    pub source_version: Option<i64>,
}

/// `LeaseHistory`'s outcomes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum History {
    /// The key's tenures, newest generation first.
    Found(Vec<TenureRow>),
    /// The key has no fence row: one row.
    NotProvisioned {
        /// `ServerUtc`.
        server_utc: OffsetDateTime,
    },
}

/// A recovery as `Recover` answers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// `GenerationFloor`: every key's generation after it.
    pub generation_floor: i64,
    /// `LeasesVoided`: the leases live when it ran.
    pub leases_voided: i32,
    /// `RecoveredAtUtc`.
    pub recovered_at: OffsetDateTime,
}

/// `Recover`'s outcomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovered {
    /// This recovery ran now.
    Recovered(Recovery),
    /// This recovery id ran before; nothing changed.
    AlreadyRecovered(Recovery),
}

/// `ResetSourceVersion`'s outcomes (a replay answers the recorded one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reset {
    /// The source version was set.
    Reset {
        /// `PreviousSourceVersion`.
        previous_source_version: Option<i64>,
    },
    /// The key had no fence row.
    NotProvisioned,
}

/// `Retire`'s outcomes (a replay answers the recorded one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retired {
    /// The key, its publish records and its history are gone.
    Retired {
        /// `Generation`: the generation the key had reached.
        generation: i64,
    },
    /// The key had no fence row.
    NotProvisioned,
}
