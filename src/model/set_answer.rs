//! What the set procedures and `AcquireSlot` answer (contract 1.8): a set
//! call answers one row per key, in the fence's key order (the order it
//! locks them in), each with its key's outcome.

use time::OffsetDateTime;

/// `AcquireSet`'s outcome for one key.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetAcquired {
    /// Granted, as `Acquire` grants it: a new generation, or this owner's
    /// own live lease kept at its generation and extended.
    Acquired {
        /// `Generation`.
        generation: i64,
        /// `LeaseUntilUtc`: now plus the call's seconds.
        lease_until: OffsetDateTime,
    },
    /// Another owner's live lease, until its end.
    Busy {
        /// `LeaseUntilUtc`: that holder's lease end.
        lease_until: OffsetDateTime,
    },
    /// The key has no fence row.
    NotProvisioned,
    /// The key alone would have been granted; another key refused the set.
    Withheld,
}

impl SetAcquired {
    /// The `Outcome` column.
    pub fn outcome(self) -> &'static str {
        match self {
            SetAcquired::Acquired { .. } => "Acquired",
            SetAcquired::Busy { .. } => "Busy",
            SetAcquired::NotProvisioned => "NotProvisioned",
            SetAcquired::Withheld => "Withheld",
        }
    }
}

/// `RenewSet`'s outcome for one key.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetRenewed {
    /// Every key was renewed: this one runs until `lease_until`.
    Renewed {
        /// `LeaseUntilUtc`.
        lease_until: OffsetDateTime,
    },
    /// Not this owner's live lease at this generation (as `Renew`'s `Lost`).
    Lost,
    /// Renewable, but another key was lost: not extended.
    Withheld {
        /// `LeaseUntilUtc`: its lease end, unchanged.
        lease_until: OffsetDateTime,
    },
}

impl SetRenewed {
    /// The `Outcome` column.
    pub fn outcome(self) -> &'static str {
        match self {
            SetRenewed::Renewed { .. } => "Renewed",
            SetRenewed::Lost => "Lost",
            SetRenewed::Withheld { .. } => "Withheld",
        }
    }
}

/// `PublishSet`'s outcome for one key, each judged as `Publish` judges one
/// (there is no source version, so no `StaleSource`).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetPublished {
    /// Every publish was accepted: this payload is the key's publication.
    Published,
    /// Its operation id was recorded for this key and generation: a replay.
    AlreadyPublished,
    /// Another generation or owner is current.
    Superseded,
    /// The generation has its publish already.
    GenerationAlreadyPublished,
    /// The lease ran out or was released, with nobody after it.
    Expired,
    /// The key has no fence row.
    NotProvisioned,
    /// It alone would have been accepted; another key refused the set.
    Withheld,
}

impl SetPublished {
    /// The `Outcome` column.
    pub fn outcome(self) -> &'static str {
        match self {
            SetPublished::Published => "Published",
            SetPublished::AlreadyPublished => "AlreadyPublished",
            SetPublished::Superseded => "Superseded",
            SetPublished::GenerationAlreadyPublished => "GenerationAlreadyPublished",
            SetPublished::Expired => "Expired",
            SetPublished::NotProvisioned => "NotProvisioned",
            SetPublished::Withheld => "Withheld",
        }
    }
}

/// `AcquireSlot`'s answer.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotAcquired {
    /// A slot is the caller's: a free one at a new generation, or the live
    /// one it holds already, extended.
    Acquired {
        /// `Slot`: its number.
        slot: i32,
        /// `ResourceKey`: the slot's key, `<resource>#<slot>`.
        resource_key: String,
        /// `Generation`.
        generation: i64,
        /// `LeaseUntilUtc`.
        lease_until: OffsetDateTime,
        /// `ServerUtc`.
        server_utc: OffsetDateTime,
    },
    /// As many live holders as slots: the earliest of their lease ends.
    Busy {
        /// `LeaseUntilUtc`.
        lease_until: OffsetDateTime,
        /// `ServerUtc`.
        server_utc: OffsetDateTime,
    },
    /// No row for the resource, or no provisioned slot below the count free.
    NotProvisioned {
        /// `ServerUtc`.
        server_utc: OffsetDateTime,
    },
}

impl SlotAcquired {
    /// The `Outcome` column.
    pub fn outcome(&self) -> &'static str {
        match self {
            SlotAcquired::Acquired { .. } => "Acquired",
            SlotAcquired::Busy { .. } => "Busy",
            SlotAcquired::NotProvisioned { .. } => "NotProvisioned",
        }
    }

    /// `ServerUtc`: the clock the call read under its locks.
    pub fn server_utc(&self) -> OffsetDateTime {
        match self {
            SlotAcquired::Acquired { server_utc, .. }
            | SlotAcquired::Busy { server_utc, .. }
            | SlotAcquired::NotProvisioned { server_utc } => *server_utc,
        }
    }
}
