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
//! What the database cannot vouch for is kept too, in doubt: the objects of
//! a key with no fence row (another application's, or the wrong database),
//! of a key whose publication this build cannot read (a newer format), and
//! of a generation above the key's current one (a database behind its
//! store). Deleting is final; keeping costs only storage.
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
use super::pointer::{POINTER_FORMAT_FAMILY, Pointer};
use crate::client::{Client, Inspection, Publication};

/// What the database says of each resource: what the sweep keeps.
pub trait Publications {
    /// What the database says of `key`.
    fn key_state(&self, key: &str) -> impl Future<Output = Result<KeyState, ArtifactError>> + Send;
}

impl Publications for Client {
    async fn key_state(&self, key: &str) -> Result<KeyState, ArtifactError> {
        // The generation first: a publish that lands between the two calls
        // has a generation at least this one, never below it.
        let generation = match self.inspect(key).await? {
            Inspection::Found(state) => state.generation,
            Inspection::NotProvisioned => return Ok(KeyState::NotProvisioned),
        };
        Ok(KeyState::of(generation, self.read_publication(key).await?))
    }
}

/// What the database says of one key, as the sweep judges its objects.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyState {
    /// The key has a fence row.
    Provisioned {
        /// Its current generation: an object of a higher one is ahead of
        /// the database.
        generation: i64,
        /// Where its current publication points; `None` when nothing is
        /// published or the payload is not an artefact pointer.
        location: Option<String>,
    },
    /// The key has no fence row.
    NotProvisioned,
    /// Its publication claims to be an artefact pointer (its `format` is
    /// `fencepost.artifact/…`) but this build cannot read it: a newer
    /// format, or a malformed one. It may point to any of the key's objects.
    UnreadablePublication,
}

impl KeyState {
    /// The state of a key whose current generation is `generation` (as
    /// `Inspect` answers it) and whose publication is `publication`.
    pub fn of(generation: i64, publication: Publication) -> KeyState {
        match publication {
            Publication::NotProvisioned => KeyState::NotProvisioned,
            Publication::NothingPublished => KeyState::Provisioned {
                generation,
                location: None,
            },
            Publication::Found {
                generation: published,
                payload,
                ..
            } => match Pointer::from_payload(&payload) {
                Ok(pointer) => KeyState::Provisioned {
                    generation: generation.max(published),
                    location: Some(pointer.location),
                },
                Err(_) if claims_to_be_a_pointer(&payload) => KeyState::UnreadablePublication,
                Err(_) => KeyState::Provisioned {
                    generation: generation.max(published),
                    location: None,
                },
            },
        }
    }
}

/// Whether `payload` is a JSON object whose `format` names an artefact
/// pointer of any version: only such a payload can point to an object.
fn claims_to_be_a_pointer(payload: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(payload)
        .ok()
        .and_then(|value| Some(value.get("format")?.as_str()?.starts_with(POINTER_FORMAT_FAMILY)))
        .unwrap_or(false)
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
        let mut states: HashMap<String, KeyState> = HashMap::new();
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
                    let state = match states.get(&artifact.key) {
                        Some(state) => state,
                        None => match publications.key_state(&artifact.key).await {
                            Ok(state) => states.entry(artifact.key.clone()).or_insert(state),
                            // Without the publication nothing more can be
                            // judged; what was done so far is reported.
                            Err(error) => {
                                report.failed = Some(format!("reading the publication of {}: {error}", artifact.key));
                                break;
                            }
                        },
                    };
                    match state {
                        KeyState::NotProvisioned => Verdict::Keep(KeptBecause::NotProvisioned),
                        KeyState::UnreadablePublication => Verdict::Keep(KeptBecause::UnreadablePublication),
                        KeyState::Provisioned { location, .. }
                            if location.as_deref() == Some(object.location.as_ref()) =>
                        {
                            Verdict::Keep(KeptBecause::Published)
                        }
                        // No publish of a generation above the current one
                        // can have been accepted: the database is behind.
                        KeyState::Provisioned { generation, .. } if artifact.generation > *generation => {
                            Verdict::Keep(KeptBecause::AheadOfDatabase)
                        }
                        KeyState::Provisioned { .. } => Verdict::Delete(DeletedBecause::Orphan),
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
    /// In doubt: its key has no fence row (the sweep's database is not the
    /// store's, or the object is another application's).
    NotProvisioned,
    /// In doubt: its key's publication is an artefact pointer this build
    /// cannot read (a newer format, or a malformed one), which may point to it.
    UnreadablePublication,
    /// In doubt: its generation is above its key's current one, so the
    /// database is behind the store (restored from an older backup?).
    AheadOfDatabase,
}

impl KeptBecause {
    /// Kept because the database could not prove it an orphan, rather than
    /// because it is published, young, not an artefact, or undeletable.
    pub fn in_doubt(&self) -> bool {
        matches!(
            self,
            KeptBecause::NotProvisioned | KeptBecause::UnreadablePublication | KeptBecause::AheadOfDatabase
        )
    }
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

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload};
    use time::OffsetDateTime;
    use uuid::Uuid;

    use super::*;

    /// The database as the fence would answer it: each provisioned key's
    /// current generation and publication; a key not in it has no fence row.
    struct Database(HashMap<String, (i64, Publication)>);

    impl Publications for Database {
        async fn key_state(&self, key: &str) -> Result<KeyState, ArtifactError> {
            Ok(match self.0.get(key) {
                Some((generation, publication)) => KeyState::of(*generation, publication.clone()),
                None => KeyState::NotProvisioned,
            })
        }
    }

    fn found(generation: i64, payload: String) -> Publication {
        Publication::Found {
            generation,
            payload,
            published_at: OffsetDateTime::UNIX_EPOCH,
            source_version: None,
        }
    }

    /// Puts an object where an artefact of `key` and `generation` goes.
    async fn upload(store: &InMemory, prefix: &Path, key: &str, generation: i64) -> String {
        let path = ArtifactPath {
            key: key.into(),
            generation,
            operation_id: Uuid::new_v4(),
        }
        .to_path(prefix);
        store.put(&path, PutPayload::from_static(b"x")).await.unwrap();
        path.to_string()
    }

    /// Sweeps `prefix` an hour after the objects were written, past a grace
    /// of 30 minutes.
    async fn sweep(store: &InMemory, prefix: &Path, database: &Database) -> SweepReport {
        Sweep::new(Duration::from_secs(30 * 60), Duration::from_secs(10 * 60))
            .unwrap()
            .run(
                store,
                prefix,
                database,
                Utc::now() + chrono::TimeDelta::hours(1),
                &CancellationToken::new(),
                |_| {},
            )
            .await
            .unwrap()
    }

    fn deleted(report: &SweepReport) -> Vec<&str> {
        report.deleted.iter().map(|d| d.object.location.as_str()).collect()
    }

    fn kept_because(report: &SweepReport, location: &str) -> KeptBecause {
        let kept = report.kept.iter().find(|k| k.object.location == location);
        kept.unwrap_or_else(|| panic!("{location} was not kept: {report:?}"))
            .why
            .clone()
    }

    #[tokio::test]
    async fn a_pointer_this_build_cannot_read_keeps_every_object_of_its_key() {
        let (store, prefix) = (InMemory::new(), Path::from("fenced"));
        // A newer fencepost published this one in a format this build does
        // not know; the other is its predecessor's, an orphan to that build.
        let newer = upload(&store, &prefix, "newer", 3).await;
        upload(&store, &prefix, "newer", 2).await;
        let malformed = upload(&store, &prefix, "malformed", 1).await;
        // An ordinary payload is no artefact publication: its key's objects
        // are orphans.
        let plain = upload(&store, &prefix, "plain", 1).await;
        let database = Database(HashMap::from([
            (
                "newer".to_string(),
                (
                    3,
                    found(
                        3,
                        format!(r#"{{"format":"fencepost.artifact/2","location":"{newer}"}}"#),
                    ),
                ),
            ),
            (
                "malformed".to_string(),
                (
                    1,
                    found(
                        1,
                        format!(r#"{{"format":"fencepost.artifact/1","place":"{malformed}"}}"#),
                    ),
                ),
            ),
            ("plain".to_string(), (1, found(1, "a plain report".into()))),
        ]));
        let report = sweep(&store, &prefix, &database).await;
        assert_eq!(deleted(&report), [plain.as_str()], "{report:?}");
        assert_eq!(report.kept.len(), 3, "{report:?}");
        assert!(
            report.kept.iter().all(|k| k.why == KeptBecause::UnreadablePublication),
            "{report:?}"
        );
        assert_eq!(kept_because(&report, &malformed), KeptBecause::UnreadablePublication);
    }

    #[tokio::test]
    async fn a_key_with_no_fence_row_keeps_its_objects() {
        // Another application's file in a shared bucket, or a sweep run
        // against the wrong database: the name parses, the key is unknown.
        let (store, prefix) = (InMemory::new(), Path::from(""));
        let foreign = Path::from(format!("uploads/2024/{}", Uuid::new_v4()));
        store
            .put(&foreign, PutPayload::from_static(b"another app's file"))
            .await
            .unwrap();
        let report = sweep(&store, &prefix, &Database(HashMap::new())).await;
        assert!(report.deleted.is_empty(), "{report:?}");
        assert_eq!(kept_because(&report, foreign.as_ref()), KeptBecause::NotProvisioned);
        assert!(KeptBecause::NotProvisioned.in_doubt());
    }

    #[tokio::test]
    async fn an_object_of_a_generation_above_the_key_s_current_one_is_kept() {
        // The database was restored from a backup older than the store.
        let (store, prefix) = (InMemory::new(), Path::from("fenced"));
        let published = upload(&store, &prefix, "k", 3).await;
        let orphan = upload(&store, &prefix, "k", 2).await;
        let ahead = upload(&store, &prefix, "k", 4).await;
        let pointer = Pointer {
            format: super::super::pointer::POINTER_FORMAT.into(),
            location: published,
            size: 1,
            sha256: String::new(),
            e_tag: None,
            version: None,
            source_version: None,
        };
        let database = Database(HashMap::from([("k".to_string(), (3, found(3, pointer.to_payload())))]));
        let report = sweep(&store, &prefix, &database).await;
        assert_eq!(deleted(&report), [orphan.as_str()], "{report:?}");
        assert_eq!(kept_because(&report, &ahead), KeptBecause::AheadOfDatabase);
        assert_eq!(kept_because(&report, &pointer.location), KeptBecause::Published);
    }
}
