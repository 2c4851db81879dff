//! What can go wrong with an artefact, as values a caller can match on.

use crate::client::Error as ClientError;

/// An artefact operation that failed. A missing or corrupt artefact is one
/// of these, never data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// The store URL could not be used.
    #[error(
        "the store URL `{url}` cannot be used (write e.g. file:///var/reports, memory://, s3://bucket/path, az://container/path or gs://bucket/path)"
    )]
    StoreUrl {
        /// The URL as given, its user information and query redacted
        /// ([`redact_url`](crate::artifact::redact_url)).
        url: String,
        /// Why, the URL redacted wherever it says it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The prefix is not a usable object path (empty segments, `.` or `..`).
    #[error(
        "the prefix `{prefix}` is not a usable object path: use segments separated by `/`, none empty, `.` or `..`"
    )]
    Prefix {
        /// The prefix as given.
        prefix: String,
    },
    /// The store accepted a second create-only write of one object: it
    /// would not keep an artefact, once written, from being replaced, so it
    /// is not published to.
    #[error(
        "the store {store} accepted a second create-only write of {probe}: it ignores the create-only condition \
         (If-None-Match / preconditions), so it would not keep an artefact, once written, from being replaced; \
         publish to a store that enforces it"
    )]
    CreateNotEnforced {
        /// The store, as object_store names it.
        store: String,
        /// The probe object's path.
        probe: String,
    },
    /// The store does not offer create-only writes at all.
    #[error("the store {store} does not support create-only writes, which fenced artefacts need")]
    CreateUnsupported {
        /// The store, as object_store names it.
        store: String,
        /// What the store said.
        #[source]
        source: object_store::Error,
    },
    /// A call to the store failed.
    #[error("the store failed to {action} {path}")]
    Store {
        /// What was being done: `upload`, `read`, `list`, `delete`, `probe`, `mark`.
        action: &'static str,
        /// The object, or the prefix.
        path: String,
        /// What the store said.
        #[source]
        source: object_store::Error,
    },
    /// A call to the fence failed. For a publish this means it did not
    /// commit (one that may have is `Unknown`, never an `Err`); its upload is
    /// left for the sweep.
    #[error("the fence call failed")]
    Fence(#[from] ClientError),
    /// The sweep's grace is zero: an object written a moment ago, whose
    /// publish is committing, could be taken.
    #[error(
        "a grace of 0 is too short: objects written a moment ago are kept whatever the database says, \
         so pass an --older-than of some minutes (more where the store's clock and this one disagree)"
    )]
    NoGrace,
    /// The sweep's grace does not exceed twice the longest lease it was
    /// told of.
    #[error(
        "a grace of {grace:?} is too short: with --longest-lease it must exceed twice that lease ({longest_lease:?}) \
         (pass a longer --older-than, or leave --longest-lease out: the sweep asks the database what may still be published)"
    )]
    GraceTooShort {
        /// The grace asked for.
        grace: std::time::Duration,
        /// The longest lease of the workers under the prefix.
        longest_lease: std::time::Duration,
    },
    /// The sweep was given a store's whole root.
    #[error(
        "no prefix to sweep: the sweep would judge every object in the store, other applications' too; \
         pass the --prefix the services publish under, or --whole-store if they publish at the store's root"
    )]
    WholeStore,
    /// The prefix to sweep carries no mark of an artefact folder.
    #[error(
        "{prefix} is not marked as an artefact folder (no {prefix}/_fencepost object, which every store opened \
         to publish writes): check --store and --prefix; for artefacts published by fencepost 0.1.0, which did \
         not mark its folders, pass --allow-unmarked"
    )]
    UnmarkedPrefix {
        /// The prefix, under the store's root.
        prefix: String,
    },
    /// The key has no fence row.
    #[error("{key}: no fence row (provision it first)")]
    NotProvisioned {
        /// The key.
        key: String,
    },
    /// The key has no publication yet.
    #[error("{key}: nothing published yet")]
    NothingPublished {
        /// The key.
        key: String,
    },
    /// The key's publication is not an artefact pointer (an ordinary payload,
    /// or a pointer of a format this version does not read).
    #[error("{key}: the publication of generation {generation} is not an artefact pointer")]
    NotAPointer {
        /// The key.
        key: String,
        /// The published generation.
        generation: i64,
        /// Why it was not read as one.
        #[source]
        source: serde_json::Error,
    },
    /// The published pointer names an object the store does not have.
    #[error("{key}: the published artefact {location} is missing from the store")]
    Missing {
        /// The key.
        key: String,
        /// Where the pointer points.
        location: String,
    },
    /// The object's bytes are not the ones published, or the pointer names
    /// no artefact of the key read (of the published generation), which is
    /// then not followed.
    #[error("{key}: the artefact {location} is corrupt: {what}")]
    Corrupt {
        /// The key.
        key: String,
        /// The object read, or where the pointer points when it was not
        /// followed.
        location: String,
        /// What differs (size or SHA-256, expected and found), or why the
        /// pointer was not followed.
        what: String,
    },
    /// An artefact's name under this prefix would be longer than a store
    /// takes, so nothing was done for the key: no lease taken, no work run,
    /// nothing uploaded. The escaped key is one path segment, at most 255
    /// bytes (a local file system's limit); the whole name at most 1024
    /// bytes (S3, GCS, Azure Blob), counted with the longest generation.
    #[error(
        "{key}: {part} would be {length} bytes long, over the store limit of {limit} \
         (every byte of a key but a lower-case ASCII letter, a digit or `-` takes 3)"
    )]
    KeyTooLong {
        /// The key.
        key: String,
        /// What is too long: `the escaped key` or `the object name`.
        part: &'static str,
        /// Its length in bytes.
        length: usize,
        /// The most a store takes.
        limit: usize,
    },
    /// A create-only upload was answered that its object already exists (or
    /// that its precondition failed). Nobody else writes to this publish's
    /// name, so the likely cause is a request the store client retried (after
    /// a 5xx, 429 or 408 answer) whose first attempt had landed. Nothing was
    /// published; the object may be in the store, an orphan the sweep judges
    /// as any other.
    #[error(
        "the upload to {location} was answered that the object already exists: an earlier attempt of the same \
         request may have written it; nothing was published, and the object is left for the sweep to judge"
    )]
    PossibleOrphan {
        /// Where the object may be.
        location: String,
        /// What the store said.
        #[source]
        source: object_store::Error,
    },
    /// The store refused the second create-only write of its probe, yet
    /// the probe no longer held the first write's bytes: the store changed
    /// or lost an object it said it kept, so it is not published to.
    #[error(
        "the store {store} refused a second create-only write of {probe}, yet reading it back found {found} \
         instead of the first write's bytes: it does not keep an object as written; publish to another store"
    )]
    ProbeNotKept {
        /// The store, as object_store names it.
        store: String,
        /// The probe object's path.
        probe: String,
        /// What reading it back found.
        found: String,
    },
}
