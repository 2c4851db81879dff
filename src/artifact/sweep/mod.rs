//! Deleting orphans: the objects under a prefix that no resource's current
//! publication points to and that the database proves none ever will
//! ([`KeyState::judge`]), once they are older than a grace.
//!
//! The proof comes from the database, read in the same sweep: an object of
//! a generation that is no longer current, whose lease has ended, or whose
//! generation published another object can never be published. An object
//! whose generation's tenure no committed write has ended (its lease is
//! held, or expired but never given back) is kept, however old: its publish
//! (a replay of one whose reply was lost, one in a caller's transaction that
//! commits late) may still commit. The grace is a second guard, for what the
//! database cannot show: a store whose listing lags its writes, and clocks.
//!
//! What the database cannot vouch for is kept too, in doubt: the objects of
//! a key with no fence row (another application's, or the wrong database),
//! of a key whose publication this build cannot read (a newer format), and
//! of a generation above the key's current one (a database behind its
//! store). Deleting is final; keeping costs only storage.
//!
//! The sweep walks only a prefix that a store opened to publish has marked
//! as an artefact folder (`{prefix}/_fencepost`), and never a store's whole
//! root, unless told to.

mod key_state;
mod report;

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

pub use self::key_state::{CurrentLease, Judgement, KeyState, Publications};
pub use self::report::{Deleted, DeletedBecause, Kept, KeptBecause, SweepEvent, SweepReport, SweptObject};
use super::error::ArtifactError;
use super::layout::{ArtifactPath, PROBE_SEGMENT, case_folded_twin};
use super::marker::{is_marked, marker_path};

/// How to sweep.
#[derive(Clone, Debug)]
pub struct Sweep {
    grace: Duration,
    dry_run: bool,
    allow_unmarked: bool,
    whole_store: bool,
}

impl Sweep {
    /// Deletes proven orphans older than `grace`, which must not be zero.
    /// A few minutes covers a store's listing lag; more covers clocks that
    /// disagree (an object's age is the sweep's clock minus the store's).
    pub fn new(grace: Duration) -> Result<Sweep, ArtifactError> {
        if grace.is_zero() {
            return Err(ArtifactError::NoGrace);
        }
        Ok(Sweep {
            grace,
            dry_run: false,
            allow_unmarked: false,
            whole_store: false,
        })
    }

    /// Also requires the grace to exceed twice `longest_lease`, the longest
    /// lease any worker publishing under the prefix takes: the age guard of
    /// fencepost 0.1.0, kept for operators who want both.
    pub fn longest_lease(&mut self, longest_lease: Duration) -> Result<&mut Self, ArtifactError> {
        let twice = longest_lease.checked_mul(2);
        if longest_lease.is_zero() || twice.is_none_or(|twice| self.grace <= twice) {
            return Err(ArtifactError::GraceTooShort {
                grace: self.grace,
                longest_lease,
            });
        }
        Ok(self)
    }

    /// Reports what would be deleted, and deletes nothing.
    pub fn dry_run(&mut self, dry_run: bool) -> &mut Self {
        self.dry_run = dry_run;
        self
    }

    /// Sweeps a prefix no store opened to publish has marked (artefacts
    /// published by fencepost 0.1.0, which did not mark its prefixes).
    pub fn allow_unmarked(&mut self, allow: bool) -> &mut Self {
        self.allow_unmarked = allow;
        self
    }

    /// Sweeps the store's whole root when the prefix is empty, where other
    /// applications' objects are likeliest.
    pub fn whole_store(&mut self, allow: bool) -> &mut Self {
        self.whole_store = allow;
        self
    }

    /// Sweeps `prefix` of `store` as of `now`, calling `on_event` as it goes.
    /// A cancelled `stop` ends it between two objects: the report then says
    /// `interrupted`, and lists only what was looked at. A publication that
    /// cannot be read ends it too, reported in `failed`. A listing that
    /// fails, or a prefix the sweep may not walk, is an `Err`: nothing was
    /// done.
    pub async fn run(
        &self,
        store: &dyn ObjectStore,
        prefix: &Path,
        publications: &impl Publications,
        now: DateTime<Utc>,
        stop: &CancellationToken,
        mut on_event: impl FnMut(SweepEvent),
    ) -> Result<SweepReport, ArtifactError> {
        self.may_walk(store, prefix).await?;
        let listing = store.list(Some(prefix)).try_collect::<Vec<ObjectMeta>>();
        let mut objects = tokio::select! {
            listed = listing => listed.map_err(|source| ArtifactError::Store {
                action: "list",
                path: prefix.to_string(),
                source,
            })?,
            () = stop.cancelled() => {
                return Ok(SweepReport {
                    dry_run: self.dry_run,
                    interrupted: true,
                    ..SweepReport::default()
                });
            }
        };
        // The prefix's own mark is not an object to judge.
        let mark = marker_path(prefix);
        objects.retain(|object| object.location != mark);
        objects.sort_by(|a, b| a.location.cmp(&b.location));
        on_event(SweepEvent::Listed { objects: objects.len() });
        let mut report = SweepReport {
            dry_run: self.dry_run,
            listed: objects.len(),
            ..SweepReport::default()
        };
        let mut states: HashMap<String, Result<KeyState, String>> = HashMap::new();
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
                    let twin = case_folded_twin(prefix, &object.location);
                    match judge_artifact(&artifact, twin, publications, &mut states, stop).await {
                        Ok(verdict) => verdict,
                        Err(Stopped::Interrupted) => {
                            report.interrupted = true;
                            break;
                        }
                        // Without the publication nothing more can be
                        // judged; what was done so far is reported.
                        Err(Stopped::Failed(error)) => {
                            report.failed = Some(error);
                            break;
                        }
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

    /// Refuses a store's whole root and a prefix no publishing store has
    /// marked, unless told otherwise. [`run`](Sweep::run) asks this first;
    /// a caller may ask before anything else (connecting to the database).
    pub async fn may_walk(&self, store: &dyn ObjectStore, prefix: &Path) -> Result<(), ArtifactError> {
        if prefix.as_ref().is_empty() && !self.whole_store {
            return Err(ArtifactError::WholeStore);
        }
        if !self.allow_unmarked && !is_marked(store, prefix).await? {
            return Err(ArtifactError::UnmarkedPrefix {
                prefix: prefix.to_string(),
            });
        }
        Ok(())
    }
}

/// Why a sweep stopped before judging every object.
enum Stopped {
    Interrupted,
    Failed(String),
}

/// What the database proves of `artifact`, and of it as an artefact of
/// `twin` too when a case-insensitive file system may have put `twin`'s
/// uploads in its folder: deleted only when both prove it an orphan.
async fn judge_artifact(
    artifact: &ArtifactPath,
    twin: Option<String>,
    publications: &impl Publications,
    states: &mut HashMap<String, Result<KeyState, String>>,
    stop: &CancellationToken,
) -> Result<Verdict, Stopped> {
    let judged = match state_of(&artifact.key, publications, states, stop).await? {
        Ok(state) => state.judge(artifact),
        Err(error) => return Ok(Verdict::Keep(KeptBecause::UnreadableKey(error.clone()))),
    };
    let verdict = Verdict::of(judged);
    let Some(twin) = twin.filter(|_| judged == Judgement::Orphan) else {
        return Ok(verdict);
    };
    let as_twin = ArtifactPath {
        key: twin.clone(),
        ..artifact.clone()
    };
    Ok(match state_of(&twin, publications, states, stop).await? {
        Ok(state) => match state.judge(&as_twin) {
            // No publication of the twin can point to it either.
            Judgement::Orphan | Judgement::NotProvisioned => verdict,
            other => Verdict::of(other),
        },
        Err(error) => Verdict::Keep(KeptBecause::UnreadableKey(error.clone())),
    })
}

/// What the database says of `key`, read once per sweep. A key the engine
/// refuses (a character its text type cannot hold) is an `Err` of the key's
/// own, and its objects are kept in doubt; a failure that may pass (the
/// connection, a time-out) stops the sweep.
async fn state_of<'s>(
    key: &str,
    publications: &impl Publications,
    states: &'s mut HashMap<String, Result<KeyState, String>>,
    stop: &CancellationToken,
) -> Result<&'s Result<KeyState, String>, Stopped> {
    if !states.contains_key(key) {
        let read = tokio::select! {
            read = publications.key_state(key) => read,
            () = stop.cancelled() => return Err(Stopped::Interrupted),
        };
        let state = match read {
            Ok(state) => Ok(state),
            Err(ArtifactError::Fence(error)) if refuses_the_key(&error) => Err(error.to_string()),
            Err(error) => return Err(Stopped::Failed(format!("reading the publication of {key:?}: {error}"))),
        };
        states.insert(key.to_string(), state);
    }
    Ok(&states[key])
}

/// An error about the key itself, which reading it again cannot cure: the
/// engine refused the call (not its connection, not a time-out).
fn refuses_the_key(error: &crate::client::Error) -> bool {
    !error.is_transient() && (error.server_number().is_some() || error.parameter().is_some())
}

enum Kind {
    Artifact(ArtifactPath),
    Probe,
    Other,
}

/// What the name of the object at `location` says it is: an artefact, a
/// probe (`{prefix}/_probe/{uuid}`), or anything else.
fn classify(prefix: &Path, location: &Path) -> Kind {
    if let Some(artifact) = ArtifactPath::parse(prefix, location) {
        return Kind::Artifact(artifact);
    }
    let probe = prefix.clone().join(PROBE_SEGMENT);
    let rest: Option<Vec<_>> = location.prefix_match(&probe).map(Iterator::collect);
    match rest.as_deref() {
        Some([id]) if Uuid::parse_str(id.as_ref()).is_ok_and(|u| u.to_string() == id.as_ref()) => Kind::Probe,
        _ => Kind::Other,
    }
}

enum Verdict {
    Keep(KeptBecause),
    Delete(DeletedBecause),
}

impl Verdict {
    fn of(judgement: Judgement) -> Verdict {
        match judgement {
            Judgement::Orphan => Verdict::Delete(DeletedBecause::Orphan),
            Judgement::Published => Verdict::Keep(KeptBecause::Published),
            Judgement::PublishMayCommit => Verdict::Keep(KeptBecause::PublishMayCommit),
            Judgement::NotProvisioned => Verdict::Keep(KeptBecause::NotProvisioned),
            Judgement::UnreadablePublication => Verdict::Keep(KeptBecause::UnreadablePublication),
            Judgement::AheadOfDatabase => Verdict::Keep(KeptBecause::AheadOfDatabase),
        }
    }
}

#[cfg(test)]
mod tests {
    use object_store::memory::InMemory;
    use object_store::{ObjectStoreExt, PutPayload};
    use time::OffsetDateTime;

    use super::*;
    use crate::artifact::marker::mark;
    use crate::artifact::pointer::{POINTER_FORMAT, Pointer};
    use crate::client::{LeaseState, Publication};

    /// The database as the fence would answer it: each provisioned key's
    /// current generation, whether its lease is held, and its publication;
    /// a key not in it has no fence row.
    struct Database(HashMap<String, (i64, bool, Publication)>);

    impl Publications for Database {
        async fn key_state(&self, key: &str) -> Result<KeyState, ArtifactError> {
            Ok(match self.0.get(key) {
                Some((generation, is_held, publication)) => {
                    // A lease not held was given back, not left to expire.
                    let lease = LeaseState {
                        generation: *generation,
                        is_held: *is_held,
                        lease_until: is_held.then(|| OffsetDateTime::now_utc() + time::Duration::minutes(1)),
                        published_generation: None,
                        server_utc: OffsetDateTime::UNIX_EPOCH,
                        source_version: None,
                    };
                    KeyState::of(key, &lease, publication.clone())
                }
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

    fn pointer_to(location: &str) -> String {
        Pointer {
            format: POINTER_FORMAT.into(),
            location: location.into(),
            size: 1,
            sha256: String::new(),
            e_tag: None,
            version: None,
            source_version: None,
        }
        .to_payload()
    }

    /// A store whose `prefix` a publishing store marked.
    async fn marked(prefix: &str) -> (InMemory, Path) {
        let (store, prefix) = (InMemory::new(), Path::from(prefix));
        mark(&store, &prefix).await.unwrap();
        (store, prefix)
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
    async fn sweep_with(
        plan: &Sweep,
        store: &InMemory,
        prefix: &Path,
        database: &Database,
    ) -> Result<SweepReport, ArtifactError> {
        let later = Utc::now() + chrono::TimeDelta::hours(1);
        plan.run(store, prefix, database, later, &CancellationToken::new(), |_| {})
            .await
    }

    async fn sweep(store: &InMemory, prefix: &Path, database: &Database) -> SweepReport {
        let plan = Sweep::new(Duration::from_secs(30 * 60)).unwrap();
        sweep_with(&plan, store, prefix, database).await.unwrap()
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
        let (store, prefix) = marked("fenced").await;
        // A newer fencepost published this one in a format this build does
        // not know; the other is its predecessor's, an orphan to that build.
        let newer = upload(&store, &prefix, "newer", 3).await;
        upload(&store, &prefix, "newer", 2).await;
        let malformed = upload(&store, &prefix, "malformed", 1).await;
        // An ordinary payload is no artefact publication: its key's objects
        // are orphans.
        let plain = upload(&store, &prefix, "plain", 1).await;
        let newer_format = format!(r#"{{"format":"fencepost.artifact/2","location":"{newer}"}}"#);
        let malformed_pointer = format!(r#"{{"format":"fencepost.artifact/1","place":"{malformed}"}}"#);
        let database = Database(HashMap::from([
            ("newer".to_string(), (3, false, found(3, newer_format))),
            ("malformed".to_string(), (1, false, found(1, malformed_pointer))),
            ("plain".to_string(), (1, false, found(1, "a plain report".into()))),
        ]));
        let report = sweep(&store, &prefix, &database).await;
        assert_eq!(deleted(&report), [plain.as_str()], "{report:?}");
        let in_doubt: Vec<_> = report.kept.iter().filter(|k| k.why.in_doubt()).collect();
        assert_eq!(in_doubt.len(), 3, "{report:?}");
        assert!(
            in_doubt.iter().all(|k| k.why == KeptBecause::UnreadablePublication),
            "{report:?}"
        );
        assert_eq!(kept_because(&report, &malformed), KeptBecause::UnreadablePublication);
    }

    #[tokio::test]
    async fn a_key_with_no_fence_row_keeps_its_objects() {
        // Another application's file under the prefix, or a sweep run
        // against the wrong database: the name parses, the key is unknown.
        let (store, prefix) = marked("shared").await;
        let foreign = Path::from(format!("shared/uploads/2024/{}", Uuid::new_v4()));
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
        let (store, prefix) = marked("fenced").await;
        let published = upload(&store, &prefix, "k", 3).await;
        let orphan = upload(&store, &prefix, "k", 2).await;
        let ahead = upload(&store, &prefix, "k", 4).await;
        let database = Database(HashMap::from([(
            "k".to_string(),
            (3, false, found(3, pointer_to(&published))),
        )]));
        let report = sweep(&store, &prefix, &database).await;
        assert_eq!(deleted(&report), [orphan.as_str()], "{report:?}");
        assert_eq!(kept_because(&report, &ahead), KeptBecause::AheadOfDatabase);
        assert_eq!(kept_because(&report, &published), KeptBecause::Published);
    }

    #[tokio::test]
    async fn an_old_upload_of_a_lease_still_held_is_kept_however_old() {
        // A publish whose reply was lost, under a guard that keeps renewing:
        // its replay may still commit, an hour or a day later.
        let (store, prefix) = marked("fenced").await;
        let pending = upload(&store, &prefix, "k", 7).await;
        let superseded = upload(&store, &prefix, "k", 6).await;
        let database = Database(HashMap::from([(
            "k".to_string(),
            (7, true, Publication::NothingPublished),
        )]));
        let report = sweep(&store, &prefix, &database).await;
        assert_eq!(deleted(&report), [superseded.as_str()], "{report:?}");
        assert_eq!(kept_because(&report, &pending), KeptBecause::PublishMayCommit);
        assert!(!KeptBecause::PublishMayCommit.in_doubt());
        // Once the lease has ended no publish of generation 7 can commit.
        let ended = Database(HashMap::from([(
            "k".to_string(),
            (7, false, Publication::NothingPublished),
        )]));
        assert_eq!(deleted(&sweep(&store, &prefix, &ended).await), [pending.as_str()]);
    }

    #[tokio::test]
    async fn only_a_probe_s_own_name_is_swept_as_a_probe() {
        let (store, prefix) = marked("fenced").await;
        let probe = format!("fenced/_probe/{}", Uuid::new_v4());
        let not_a_probe = "fenced/_probe/notes.txt";
        for path in [probe.as_str(), not_a_probe] {
            store.put(&path.into(), PutPayload::from_static(b"x")).await.unwrap();
        }
        let report = sweep(&store, &prefix, &Database(HashMap::new())).await;
        assert_eq!(deleted(&report), [probe.as_str()], "{report:?}");
        assert_eq!(kept_because(&report, not_a_probe), KeptBecause::NotAnArtifact);
    }

    #[tokio::test]
    async fn an_unmarked_prefix_or_the_whole_store_is_refused_unless_allowed() {
        let store = InMemory::new();
        let orphan = upload(&store, &"old".into(), "k", 1).await;
        let database = Database(HashMap::from([(
            "k".to_string(),
            (2, false, Publication::NothingPublished),
        )]));
        let mut plan = Sweep::new(Duration::from_secs(60)).unwrap();
        let refused = sweep_with(&plan, &store, &"old".into(), &database).await.unwrap_err();
        assert!(matches!(refused, ArtifactError::UnmarkedPrefix { .. }), "{refused:?}");
        let refused = sweep_with(&plan, &store, &Path::from(""), &database).await.unwrap_err();
        assert!(matches!(refused, ArtifactError::WholeStore), "{refused:?}");
        assert!(
            store.head(&orphan.as_str().into()).await.is_ok(),
            "a refused sweep deleted"
        );

        plan.allow_unmarked(true);
        let report = sweep_with(&plan, &store, &"old".into(), &database).await.unwrap();
        assert_eq!(deleted(&report), [orphan.as_str()]);
    }

    #[test]
    fn a_grace_of_zero_or_not_above_twice_a_named_longest_lease_is_refused() {
        assert!(matches!(Sweep::new(Duration::ZERO), Err(ArtifactError::NoGrace)));
        let mut plan = Sweep::new(Duration::from_secs(3600)).unwrap();
        assert!(plan.longest_lease(Duration::from_secs(1800)).is_err());
        assert!(plan.longest_lease(Duration::MAX).is_err());
        assert!(plan.longest_lease(Duration::from_secs(1799)).is_ok());
    }
}
