//! What became of an artefact's upload: published, or an orphan deleted at
//! once or left for the sweep. Shared by a publish and its settling.

use uuid::Uuid;

use super::pointer::Pointer;

/// An artefact that is now its resource's publication.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishedArtifact {
    /// What was published.
    pub pointer: Pointer,
    /// The generation it was published under.
    pub generation: i64,
    /// The operation id of the publish (also the last segment of its name).
    pub operation_id: Uuid,
}

/// What became of an upload that is not published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Orphan {
    /// It was deleted at once.
    Deleted,
    /// Its delete failed; the sweep removes it once the database proves no
    /// publish of it can commit and it is older than the sweep's grace.
    Left {
        /// Where it is.
        location: String,
        /// Why the delete failed.
        reason: String,
    },
}
