//! What the lease-set procedures (contract v1.8) answer, as values: a set
//! refused names each key and why.

use std::time::Duration;

use time::OffsetDateTime;

use super::{LeaseSet, Publish, RefusalReason};

/// What `AcquireSet` answered: every key, or none.
#[must_use = "an acquired set is held until it expires unless it is released"]
#[non_exhaustive]
#[derive(Clone, Debug)]
pub enum AcquireSet {
    /// Every key is yours, each under its own generation.
    Acquired(LeaseSet),
    /// Nothing was granted; each key, in the server's lock order, with why.
    Refused(Vec<(String, KeyRefusal)>),
    /// Another transaction held one of the keys' fence rows longer than
    /// `AcquireSet` waits for each (5 s): nothing was granted, and which key
    /// held it up is not known. Contention, not an error: ask again.
    RowHeld,
}

/// Why one key of a refused `AcquireSet` was not granted.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRefusal {
    /// Another owner holds it.
    Busy {
        /// The holder's expiry, on the server clock.
        until: OffsetDateTime,
        /// How long the holder's lease had left when the server judged it,
        /// on the server clock alone.
        remaining: Duration,
    },
    /// No fence row exists for the key; `provision` it first.
    NotProvisioned,
    /// This key alone would have been granted; another key refused the set.
    Withheld,
}

/// What `RenewSet` answered: every key renewed, or none.
#[must_use = "a lost set means the work must stop"]
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RenewSet {
    /// Every key was extended by the set's length from now (server clock).
    Renewed {
        /// The new expiry of every key, on the server clock.
        until: OffsetDateTime,
    },
    /// The owner no longer holds these keys (expired, released or taken
    /// over, never revived), so nothing was renewed: the others run out at
    /// their old expiry. Stop the work, and release the set.
    Lost {
        /// The keys lost, in the server's lock order.
        lost: Vec<String>,
    },
}

/// What `PublishSet` answered: every key's publish, or none.
#[must_use = "a refused publish is a value, not an error: check it"]
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PublishSet {
    /// Every payload is now its key's publication: each key
    /// [`Publish::Published`], or [`Publish::AlreadyPublished`] for an
    /// operation id that had already committed (a replay, nothing written).
    Accepted(Vec<(String, Publish)>),
    /// Nothing was written; each key, in the server's lock order, with its
    /// refusal, or `None` for a key that alone would have been accepted.
    Refused(Vec<(String, Option<RefusalReason>)>),
}

/// One key's publish of a [`PublishSet`]: the payload, and the operation id
/// fresh for it (reused only to replay this same publish).
#[derive(Clone, Copy, Debug)]
pub struct KeyPublish<'a> {
    /// A key of the set.
    pub key: &'a str,
    /// Fresh for each publish, reused only to replay it.
    pub operation_id: uuid::Uuid,
    /// The result to publish under the key's generation.
    pub payload: &'a str,
}
