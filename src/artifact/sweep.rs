//! Deleting orphans: the objects under a prefix that no resource's current
//! publication points to, once they are older than a grace that no upload
//! whose publish may still commit can reach.
//!
//! Why the grace makes it safe: an upload is published within one lease
//! length of its start or not at all ([`ArtifactPublish::UploadTooSlow`]),
//! and the publish itself must land while the lease it holds is unexpired,
//! at most one more lease length. So an object older than twice the longest
//! lease can no longer become a publication: if no publication points to it
//! now, none ever will. Objects younger than the grace are kept whatever
//! they are.
//!
//! [`ArtifactPublish::UploadTooSlow`]: super::publish::ArtifactPublish::UploadTooSlow

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::error::ArtifactError;
use super::layout::{ArtifactPath, PROBE_SEGMENT};
use super::pointer::Pointer;
use crate::client::{Client, Publication};

/// Where each resource's current publication points: what the sweep keeps.
pub trait Publications {
    /// The location `key`'s current publication points to; `None` when it
    /// has no publication, no fence row, or a payload that is not a pointer.
    fn published_location(&self, key: &str) -> impl Future<Output = Result<Option<String>, ArtifactError>> + Send;
}

impl Publications for Client {
    async fn published_location(&self, key: &str) -> Result<Option<String>, ArtifactError> {
        Ok(match self.read_publication(key).await? {
            Publication::Found { payload, .. } => Pointer::from_payload(&payload).ok().map(|p| p.location),
            Publication::NothingPublished | Publication::NotProvisioned => None,
        })
    }
}

/// How to sweep.
#[derive(Clone, Debug)]
pub struct Sweep {
    grace: Duration,
    dry_run: bool,
}

/// The error of a grace too short for the longest lease.
fn grace_too_short(grace: Duration, longest_lease: Duration) -> ArtifactError {
    ArtifactError::GraceTooShort { grace, longest_lease }
}

impl Sweep {
    /// Deletes orphans older than `grace`, which must exceed twice
    /// `longest_lease` (the longest lease any worker publishing under this
    /// prefix takes), so that no upload whose publish may still commit is
    /// taken.
    pub fn new(grace: Duration, longest_lease: Duration) -> Result<Sweep, ArtifactError> {
        if longest_lease.is_zero() || grace <= longest_lease * 2 {
            return Err(grace_too_short(grace, longest_lease));
        }
        Ok(Sweep { grace, dry_run: false })
    }

    /// Reports what would be deleted, and deletes nothing.
    pub fn dry_run(&mut self, dry_run: bool) -> &mut Self {
        self.dry_run = dry_run;
        self
    }

    /// Sweeps `prefix` of `store` as of `now`, calling `on_event` as it goes.
    /// A cancelled `stop` ends it between two objects: the report then says
    /// `interrupted`, and lists only what was looked at. A publication that
    /// cannot be read ends it too, reported in `failed`. A listing that
    /// fails is an `Err`: nothing was done.
    pub async fn run(
        &self,
        store: &dyn ObjectStore,
        prefix: &Path,
        publications: &impl Publications,
        now: DateTime<Utc>,
        stop: &CancellationToken,
        mut on_event: impl FnMut(SweepEvent),
    ) -> Result<SweepReport, ArtifactError> {
        let mut objects: Vec<ObjectMeta> =
            store
                .list(Some(prefix))
                .try_collect()
                .await
                .map_err(|source| ArtifactError::Store {
                    action: "list",
                    path: prefix.to_string(),
                    source,
                })?;
        objects.sort_by(|a, b| a.location.cmp(&b.location));
        on_event(SweepEvent::Listed { objects: objects.len() });
        let mut report = SweepReport {
            dry_run: self.dry_run,
            listed: objects.len(),
            ..SweepReport::default()
        };
        let mut published: HashMap<String, Option<String>> = HashMap::new();
        for (done, object) in objects.into_iter().enumerate() {
            if stop.is_cancelled() {
                report.interrupted = true;
                break;
            }
            let age = (now - object.last_modified).to_std().unwrap_or(Duration::ZERO);
            let verdict = match classify(prefix, &object.location) {
                Kind::Other => Verdict::Keep(KeptBecause::NotAnArtifact),
                _ if age <= self.grace => Verdict::Keep(KeptBecause::WithinGrace),
                Kind::Probe => Verdict::Delete(DeletedBecause::Probe),
                Kind::Artifact(artifact) => {
                    let location = match published.get(&artifact.key) {
                        Some(location) => location.clone(),
                        None => match publications.published_location(&artifact.key).await {
                            Ok(location) => {
                                published.insert(artifact.key.clone(), location.clone());
                                location
                            }
                            // Without the publication nothing more can be
                            // judged; what was done so far is reported.
                            Err(error) => {
                                report.failed = Some(format!("reading the publication of {}: {error}", artifact.key));
                                break;
                            }
                        },
                    };
                    if location.as_deref() == Some(object.location.as_ref()) {
                        Verdict::Keep(KeptBecause::Published)
                    } else {
                        Verdict::Delete(DeletedBecause::Orphan)
                    }
                }
            };
            let seen = SweptObject::of(&object);
            match verdict {
                Verdict::Keep(why) => report.kept.push(Kept { object: seen, why }),
                Verdict::Delete(why) if self.dry_run => report.deleted.push(Deleted { object: seen, why }),
                Verdict::Delete(why) => match store.delete(&object.location).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                        report.deleted.push(Deleted { object: seen, why })
                    }
                    Err(error) => report.kept.push(Kept {
                        object: seen,
                        why: KeptBecause::DeleteFailed(error.to_string()),
                    }),
                },
            }
            on_event(SweepEvent::Progress {
                done: done + 1,
                deleted: report.deleted.len(),
            });
        }
        Ok(report)
    }
}

enum Kind {
    Artifact(ArtifactPath),
    Probe,
    Other,
}

fn classify(prefix: &Path, location: &Path) -> Kind {
    if let Some(artifact) = ArtifactPath::parse(prefix, location) {
        return Kind::Artifact(artifact);
    }
    let probe = prefix.clone().join(PROBE_SEGMENT);
    match location.prefix_match(&probe).map(Iterator::count) {
        Some(1) => Kind::Probe,
        _ => Kind::Other,
    }
}

enum Verdict {
    Keep(KeptBecause),
    Delete(DeletedBecause),
}

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
    fn of(meta: &ObjectMeta) -> Self {
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
    /// Its delete failed (the store's message).
    DeleteFailed(String),
}

/// Why an object was deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DeletedBecause {
    /// An artefact no publication points to, older than the grace.
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
