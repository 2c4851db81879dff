//! What a sweep reports: each object it looked at, and what it did with it.

use chrono::{DateTime, Utc};
use object_store::ObjectMeta;
use serde::Serialize;

/// What the sweep reports as it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SweepEvent {
    /// The prefix was listed.
    Listed {
        /// How many objects are under it.
        objects: usize,
    },
    /// One more object was looked at.
    Progress {
        /// How many so far.
        done: usize,
        /// How many of them were deleted (or would be, in a dry run).
        deleted: usize,
    },
}

/// An object the sweep looked at.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SweptObject {
    /// Its path.
    pub location: String,
    /// Its size in bytes.
    pub size: u64,
    /// When the store says it was last written.
    pub last_modified: DateTime<Utc>,
}

impl SweptObject {
    pub(super) fn of(meta: &ObjectMeta) -> Self {
        SweptObject {
            location: meta.location.to_string(),
            size: meta.size,
            last_modified: meta.last_modified,
        }
    }
}

/// Why an object was kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason", content = "error")]
#[non_exhaustive]
pub enum KeptBecause {
    /// A resource's current publication points to it.
    Published,
    /// It is younger than the grace: its publish may still commit.
    WithinGrace,
    /// Its name is not an artefact's or a probe's: not the sweep's to delete.
    NotAnArtifact,
    /// Its generation is its key's current one, whose tenure no committed
    /// write has ended (its lease is held, or expired but never given back)
    /// and which has published nothing yet: its publish may still commit.
    PublishMayCommit,
    /// Its delete failed (the store's message).
    DeleteFailed(String),
    /// In doubt: its key has no fence row (the sweep's database is not the
    /// store's, or the object is another application's).
    NotProvisioned,
    /// In doubt: its key's publication is an artefact pointer this build
    /// cannot read (a newer format, a malformed one) or that names no
    /// artefact of its key, so it may point to it.
    UnreadablePublication,
    /// In doubt: its generation is above its key's current one, so the
    /// database is behind the store (restored from an older backup?).
    AheadOfDatabase,
    /// In doubt: the database refused to read its key (the engine's
    /// message): a name no fencepost of this database wrote.
    UnreadableKey(String),
}

impl KeptBecause {
    /// Kept because the database could not prove it an orphan, rather than
    /// because it is published, young, not an artefact, still in its
    /// lease, or undeletable.
    pub fn in_doubt(&self) -> bool {
        matches!(
            self,
            KeptBecause::NotProvisioned
                | KeptBecause::UnreadablePublication
                | KeptBecause::AheadOfDatabase
                | KeptBecause::UnreadableKey(_)
        )
    }
}

/// Why an object was deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DeletedBecause {
    /// An artefact no publication points to, and none ever can (the
    /// database shows its generation past, or its lease ended, or its
    /// generation published another), older than the grace.
    Orphan,
    /// A probe object left by a store check, older than the grace.
    Probe,
}

/// A kept object and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Kept {
    /// The object.
    #[serde(flatten)]
    pub object: SweptObject,
    /// Why it was kept.
    pub why: KeptBecause,
}

/// A deleted object and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Deleted {
    /// The object.
    #[serde(flatten)]
    pub object: SweptObject,
    /// Why it was deleted.
    pub why: DeletedBecause,
}

/// What a sweep kept and deleted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// Nothing was deleted: `deleted` lists what would have been.
    pub dry_run: bool,
    /// How many objects were under the prefix.
    pub listed: usize,
    /// The objects kept.
    pub kept: Vec<Kept>,
    /// The objects deleted (or, in a dry run, that would be).
    pub deleted: Vec<Deleted>,
    /// Stopped before every object was looked at.
    pub interrupted: bool,
    /// Stopped because a publication could not be read (the error): the
    /// objects before it were judged, the rest were not.
    pub failed: Option<String>,
}
