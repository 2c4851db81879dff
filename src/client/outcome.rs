//! The outcomes each procedure can answer, as values. A refusal the contract
//! names is an outcome, never an error.

use std::time::Duration;

use time::OffsetDateTime;

/// What `Provision` did.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provision {
    /// The fence row was created, at generation 0 or, after a recovery or a
    /// retirement (contract v1.6), at the highest floor or retired generation.
    Created,
    /// It already existed and was left as it was.
    Exists,
}

/// What `Acquire` answered.
#[must_use = "an acquired lease is held until it expires unless it is guarded or released"]
#[non_exhaustive]
#[derive(Clone, Debug)]
pub enum Acquire {
    /// The lease is yours.
    Acquired(super::Lease),
    /// Someone else holds it, or another transaction held its fence row
    /// longer than `Acquire` waits for it (contention, never an error).
    Busy {
        /// The holder's expiry, on the server clock. When that is unknown
        /// (the wait for the row was given up, and the open transaction
        /// decides), the moment of the answer: on the server clock, or on the
        /// local one when the server answered with an error instead of a row.
        until: OffsetDateTime,
        /// How long the holder's lease had left when the server judged it
        /// (`until` minus the server's `ServerUtc`; zero when already past,
        /// and when unknown: ask again).
        /// Measured on the server clock alone, so it holds whatever the local
        /// clock says: wait on a monotonic clock from when the request was sent.
        remaining: Duration,
    },
    /// No fence row exists for the key; `provision` it first.
    NotProvisioned,
}

impl Acquire {
    /// `Busy` with the holder's end unknown: an `Acquire` that gave up
    /// waiting for the fence row and answered with an error (the engine's
    /// lock time-out, or 50129) rather than a row, so the local clock says
    /// when.
    pub(crate) fn busy_end_unknown() -> Acquire {
        Acquire::Busy {
            until: OffsetDateTime::now_utc(),
            remaining: Duration::ZERO,
        }
    }
}

/// `until - server_utc`, both on the server clock, never negative.
pub(crate) fn remaining(until: OffsetDateTime, server_utc: OffsetDateTime) -> Duration {
    Duration::try_from(until - server_utc).unwrap_or(Duration::ZERO)
}

/// What `Renew` answered.
#[must_use = "a lost lease means the work must stop"]
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renew {
    /// The lease was extended by its length from now (server clock).
    Renewed {
        /// The new expiry, on the server clock.
        until: OffsetDateTime,
    },
    /// The lease is gone: it expired, was released, or was taken over. An
    /// expired lease is never revived; stop the work.
    Lost,
}

/// What `Publish` answered.
#[must_use = "a refused publish is a value, not an error: check it"]
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publish {
    /// The payload is now the resource's publication.
    Published,
    /// This operation id had already committed: a safe replay, nothing written.
    AlreadyPublished,
    /// The fence refused the write.
    Refused(RefusalReason),
}

/// Why the fence refused a publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalReason {
    /// Someone acquired after you (or an operator fenced you out).
    Superseded,
    /// Your lease expired, or was released, and nobody has taken over yet.
    Expired,
    /// Something was already published under this generation.
    GenerationAlreadyPublished,
    /// No fence row exists for the key.
    NotProvisioned,
    /// Contract v1.4: the lease is yours, but the resource already holds a
    /// result (or a fenced write) built from a newer source version than
    /// this one. Nothing changed and the lease is still held, also after a
    /// publish-and-release: rebuild from a fresher source and publish again
    /// under the same lease, or release it.
    StaleSource,
}

impl std::fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RefusalReason::Superseded => "Superseded",
            RefusalReason::Expired => "Expired",
            RefusalReason::GenerationAlreadyPublished => "GenerationAlreadyPublished",
            RefusalReason::NotProvisioned => "NotProvisioned",
            RefusalReason::StaleSource => "StaleSource",
        })
    }
}

/// What `Release` answered.
#[must_use = "NotHolder means the lease had already been lost"]
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// The lease was given up.
    Released,
    /// This owner and generation no longer hold the lease; nothing changed.
    NotHolder,
}

/// What `GetOutcome` knows about an operation id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OperationOutcome {
    /// The publish committed.
    Published {
        /// The resource it was published to.
        resource_key: String,
        /// The generation it was published under.
        generation: i64,
        /// When it committed, on the server clock.
        published_at: OffsetDateTime,
        /// The source version it carried (contract v1.4), if any.
        source_version: Option<i64>,
    },
    /// No publish with this id committed (so far: a publish still in flight
    /// may yet commit).
    Unknown,
}

/// What `ReadPublication` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Publication {
    /// The last accepted result.
    Found {
        /// The generation it was published under.
        generation: i64,
        /// The payload.
        payload: String,
        /// When it committed, on the server clock.
        published_at: OffsetDateTime,
        /// The source version it was published with (contract v1.4); `None`
        /// for an unversioned publish.
        source_version: Option<i64>,
    },
    /// The resource exists but nothing was published yet.
    NothingPublished,
    /// No fence row exists for the key.
    NotProvisioned,
}

/// What `Inspect` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inspection {
    /// The resource's lease state.
    Found(LeaseState),
    /// No fence row exists for the key.
    NotProvisioned,
}

impl Inspection {
    /// The contract's name of the outcome: `Found` or `NotProvisioned`.
    pub fn name(&self) -> &'static str {
        match self {
            Inspection::Found(_) => "Found",
            Inspection::NotProvisioned => "NotProvisioned",
        }
    }
}

/// A resource's lease state as `Inspect` shows it: never the owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseState {
    /// The current generation (0 until the first acquisition).
    pub generation: i64,
    /// Whether an unexpired lease is held right now (server clock).
    pub is_held: bool,
    /// The last lease's expiry, if one is recorded.
    pub lease_until: Option<OffsetDateTime>,
    /// The generation of the last accepted publish.
    pub published_generation: Option<i64>,
    /// The server clock when it answered.
    pub server_utc: OffsetDateTime,
    /// The resource's source version (contract v1.4): the newest source a
    /// publish or a fenced write committed; an older one is refused. `None`
    /// until a versioned write committed.
    pub source_version: Option<i64>,
}

pub(crate) fn refusal(name: &str) -> Option<RefusalReason> {
    Some(match name {
        "Superseded" => RefusalReason::Superseded,
        "Expired" => RefusalReason::Expired,
        "GenerationAlreadyPublished" => RefusalReason::GenerationAlreadyPublished,
        "NotProvisioned" => RefusalReason::NotProvisioned,
        "StaleSource" => RefusalReason::StaleSource,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_name_of_the_contract_round_trips_through_display() {
        for name in [
            "Superseded",
            "Expired",
            "GenerationAlreadyPublished",
            "NotProvisioned",
            "StaleSource",
        ] {
            assert_eq!(refusal(name).map(|r| r.to_string()).as_deref(), Some(name));
        }
        assert_eq!(refusal("Published"), None);
    }
}
