//! The errors the procedures raise with `THROW`: a number from 50100 to 50199
//! and the message the procedure sends, word for word.

use std::borrow::Cow;

/// A call the contract refuses with an error rather than an outcome row.
///
/// Refused input changes nothing; so does every refusal the model raises (it
/// has no caller transaction to roll back: see [`Session`](super::Session)).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Refusal {
    /// The error number, 50100 to 50199.
    pub number: u32,
    /// The message the procedure raises with it: fixed, or (a set call's
    /// refusal of one of its keys) naming that key.
    pub message: Cow<'static, str>,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "error {}: {}", self.number, self.message)
    }
}

impl std::error::Error for Refusal {}

const fn refusal(number: u32, message: &'static str) -> Refusal {
    Refusal {
        number,
        message: Cow::Borrowed(message),
    }
}

/// A refusal whose message the procedure builds, naming a key.
pub(super) fn naming(number: u32, message: String) -> Refusal {
    Refusal {
        number,
        message: Cow::Owned(message),
    }
}

pub(super) const KEY_LENGTH: Refusal = refusal(50101, "@ResourceKey must be 1 to 256 UTF-16 code units long.");
pub(super) const KEY_TRAILING_SPACE: Refusal = refusal(
    50101,
    "@ResourceKey must not end with a space: keys are exact identifiers.",
);
pub(super) const OWNER: Refusal = refusal(
    50102,
    "@Owner must be a non-nil uniqueidentifier, fresh for each acquisition.",
);
pub(super) const LEASE_SECONDS: Refusal = refusal(50103, "@LeaseSeconds must be between 1 and 86400.");
pub(super) const GENERATION: Refusal = refusal(
    50104,
    "@Generation must be a generation returned by Acquire (1 or more).",
);
pub(super) const PUBLISH_OPERATION_ID: Refusal = refusal(
    50105,
    "@OperationId must be a non-nil uniqueidentifier, fresh for each publish and reused only to replay it.",
);
pub(super) const COMMAND_OPERATION_ID: Refusal = refusal(
    50105,
    "@OperationId must be NULL or a non-nil uniqueidentifier, fresh for each command and reused only to replay it.",
);
pub(super) const PAYLOAD: Refusal = refusal(50106, "@Payload must not be NULL (an empty string is allowed).");
pub(super) const OPERATION_ID_USED: Refusal = refusal(
    50107,
    "@OperationId was already used by a publish to another resource or generation.",
);
pub(super) const RELEASE: Refusal = refusal(
    50108,
    "@Release must be 0 (keep the lease) or 1 (release it with an accepted publish).",
);
pub(super) const PUBLISH_SOURCE_VERSION: Refusal = refusal(
    50109,
    "@SourceVersion must be 0 or more, or NULL to publish without a freshness check.",
);
pub(super) const ASSERT_SOURCE_VERSION: Refusal = refusal(
    50109,
    "@SourceVersion must be 0 or more, or NULL to assert without a freshness check.",
);
pub(super) const RESET_SOURCE_VERSION: Refusal = refusal(
    50109,
    "@SourceVersion must be 0 or more, or NULL to clear the source version.",
);
pub(super) const SUPERSEDED: Refusal = refusal(
    50110,
    "The lease was superseded: another owner or a newer generation is current.",
);
pub(super) const EXPIRED: Refusal = refusal(50111, "The lease expired or was released, and nobody has taken over.");
pub(super) const NOT_PROVISIONED: Refusal = refusal(50112, "@ResourceKey is not provisioned.");
pub(super) const OUTSIDE_TRANSACTION: Refusal = refusal(
    50113,
    "AssertHolder must run inside the caller's transaction (BEGIN TRANSACTION first).",
);
pub(super) const STALE_SOURCE: Refusal = refusal(
    50114,
    "@SourceVersion is older than the source version already committed for this resource.",
);
pub(super) const PREFIX: Refusal = refusal(
    50120,
    "@Prefix must not be NULL (an empty prefix lists every resource).",
);
pub(super) const HELD_ONLY: Refusal = refusal(50121, "@HeldOnly must be 0 (every resource) or 1 (held leases only).");
pub(super) const MAX_ROWS: Refusal = refusal(50122, "@MaxRows must be 1 to 100000.");
pub(super) const OLDER_THAN_DAYS: Refusal = refusal(50123, "@OlderThanDays must be 1 to 36500.");
pub(super) const RECOVERY_ID: Refusal = refusal(
    50124,
    "@RecoveryId must be a non-nil uniqueidentifier, reused only to repeat the same recovery.",
);
pub(super) const FLOOR: Refusal = refusal(
    50125,
    "@Floor must be NULL or 0 to 4611686018427387903 (the highest generation known to be issued).",
);
pub(super) const DATABASE_IDENTITY: Refusal = refusal(
    50126,
    "@DatabaseIdentity must be NULL or the database's recovery fork guid.",
);
pub(super) const PRUNE_TENURE_IN_TRANSACTION: Refusal = refusal(
    50128,
    "PruneTenure must run on its own, outside any transaction (and with IMPLICIT_TRANSACTIONS OFF): each batch \
     commits by itself.",
);
pub(super) const PRUNE_OUTCOMES_IN_TRANSACTION: Refusal = refusal(
    50128,
    "PruneOutcomes must run on its own, outside any transaction (and with IMPLICIT_TRANSACTIONS OFF): each batch \
     commits by itself.",
);
pub(super) const RETIRE_IN_TRANSACTION: Refusal = refusal(
    50128,
    "Retire must run on its own, outside any transaction (and with IMPLICIT_TRANSACTIONS OFF).",
);
pub(super) const COMMAND_ID_USED: Refusal = refusal(
    50130,
    "@OperationId was already used by another operator command or for another resource.",
);
pub(super) const RESET_ID_USED: Refusal = refusal(
    50130,
    "@OperationId was already used by another operator command, for another resource or with another \
     @SourceVersion.",
);
pub(super) const RETIRE_HELD: Refusal = refusal(
    50131,
    "Retire refused: the key is held by an unexpired lease. Force-release it first, or wait until its lease ends.",
);

const LEASES_SHAPE: &str =
    "@Leases must be a JSON array of 1 to 1000 objects {\"ResourceKey\", \"Owner\", \"Generation\", \"LeaseSeconds\"}.";
pub(super) const LEASES_ARRAY: Refusal = refusal(50133, LEASES_SHAPE);
pub(super) const LEASES_KEY_LENGTH: Refusal = refusal(
    50133,
    "@Leases: each ResourceKey must be 1 to 256 UTF-16 code units long.",
);
pub(super) const LEASES_KEY_TRAILING_SPACE: Refusal = refusal(
    50133,
    "@Leases: a ResourceKey must not end with a space: keys are exact identifiers.",
);
pub(super) const LEASES_KEY_TWICE: Refusal = refusal(50133, "@Leases: each ResourceKey may appear once.");
pub(super) const LEASES_OWNER: Refusal = refusal(
    50133,
    "@Leases: each Owner must be a non-nil uniqueidentifier (36 characters), fresh for each acquisition.",
);
pub(super) const LEASES_GENERATION: Refusal = refusal(
    50133,
    "@Leases: each Generation must be a generation returned by Acquire (1 or more).",
);
pub(super) const LEASES_LEASE_SECONDS: Refusal =
    refusal(50133, "@Leases: each LeaseSeconds must be between 1 and 86400.");

const KEYS_SHAPE: &str = "@ResourceKeys must be a JSON array of 1 to 1000 keys (strings).";
pub(super) const KEYS_ARRAY: Refusal = refusal(50134, KEYS_SHAPE);
pub(super) const KEYS_KEY_LENGTH: Refusal = refusal(
    50134,
    "@ResourceKeys: each key must be 1 to 256 UTF-16 code units long.",
);
pub(super) const KEYS_KEY_TRAILING_SPACE: Refusal = refusal(
    50134,
    "@ResourceKeys: a key must not end with a space: keys are exact identifiers.",
);
pub(super) const KEYS_KEY_TWICE: Refusal = refusal(50134, "@ResourceKeys: each key may appear once.");

pub(super) const SET_SHAPE: Refusal = refusal(
    50135,
    "@Leases must be a JSON array of 1 to 1000 objects {\"ResourceKey\", \"Generation\"}.",
);
pub(super) const PUBLISH_SET_SHAPE: Refusal = refusal(
    50135,
    "@Leases must be a JSON array of 1 to 1000 objects {\"ResourceKey\", \"Generation\", \"OperationId\", \"Payload\"}.",
);
pub(super) const SET_TYPES: Refusal = refusal(
    50135,
    "@Leases: each ResourceKey must be a JSON string, and each Generation a JSON number or a string of digits.",
);
pub(super) const PUBLISH_SET_TYPES: Refusal = refusal(
    50135,
    "@Leases: each ResourceKey, OperationId and Payload must be a JSON string, and each Generation a JSON number or \
     a string of digits.",
);
pub(super) const SET_KEY_LENGTH: Refusal = refusal(
    50135,
    "@Leases: each ResourceKey must be 1 to 256 UTF-16 code units long.",
);
pub(super) const SET_KEY_TRAILING_SPACE: Refusal = refusal(
    50135,
    "@Leases: a ResourceKey must not end with a space: keys are exact identifiers.",
);
pub(super) const SET_KEY_TWICE: Refusal = refusal(50135, "@Leases: each ResourceKey may appear once.");
pub(super) const SET_GENERATION: Refusal = refusal(
    50135,
    "@Leases: each Generation must be a generation returned by Acquire (1 or more).",
);
pub(super) const SET_OPERATION_ID: Refusal = refusal(
    50135,
    "@Leases: each OperationId must be a non-nil uniqueidentifier (36 characters), fresh for each publish and reused \
     only to replay it.",
);
pub(super) const SET_OPERATION_ID_TWICE: Refusal = refusal(50135, "@Leases: each OperationId may appear once.");
pub(super) const SET_PAYLOAD: Refusal = refusal(
    50135,
    "@Leases: each Payload must be a JSON string (an empty string is allowed).",
);
pub(super) const SET_RELEASE: Refusal = refusal(
    50108,
    "@Release must be 0 (keep the leases) or 1 (release them with an accepted publish).",
);
pub(super) const SET_OUTSIDE_TRANSACTION: Refusal = refusal(
    50113,
    "AssertHolderSet must run inside the caller's transaction (BEGIN TRANSACTION first).",
);

pub(super) const SLOT_KEY_LENGTH: Refusal = refusal(
    50101,
    "@ResourceKey must be 1 to 251 UTF-16 code units long for a resource with slots (its slot keys add \"#\" and the \
     slot number).",
);
pub(super) const SLOTS: Refusal = refusal(50136, "@Slots must be between 1 and 1000.");
