//! What the database says of one key, and what that proves of each of the
//! key's objects.
//!
//! An object named (key, generation *g*, operation id) is published only by
//! a publish of generation *g* that the fence accepts, and the fence accepts
//! one only while *g* is the key's current generation, its lease is held
//! (unexpired on the server clock) and nothing was published under *g* yet.
//! None of those comes back once gone: every acquisition raises the
//! generation, a renewal extends only an unexpired lease, and one
//! generation publishes once. So when the database shows the generation
//! past *g*, or *g*'s lease ended, or *g* published something else, no
//! publish of that object can ever commit: if no publication points to it,
//! none ever will. That is the sweep's proof; the age of an object is only
//! a second guard.
//!
//! "Its lease ended" means ended by a committed write: given back (Release,
//! a publish that releases), fenced (ForceRelease, Recover) or taken over
//! (the next Acquire). Each of those waits for the fence row's lock, so none
//! commits while a publish holding that row is still open. An expiry is
//! reached by the clock alone and waits for nothing: a publish made inside
//! a caller's transaction was judged when it locked the row, and commits
//! whenever the caller commits, however long after the expiry. So a lease
//! that expired without being given back keeps its generation's uploads
//! until a committed write ends its tenure (an operator ends an abandoned
//! one with `lease force-release`).

use std::future::Future;

use super::super::error::ArtifactError;
use super::super::layout::ArtifactPath;
use super::super::pointer::{POINTER_FORMAT_FAMILY, Pointer};
use crate::client::{Client, Inspection, LeaseState, Publication};

/// What the database says of each resource: what the sweep keeps.
pub trait Publications {
    /// What the database says of `key`.
    fn key_state(&self, key: &str) -> impl Future<Output = Result<KeyState, ArtifactError>> + Send;
}

impl Publications for Client {
    async fn key_state(&self, key: &str) -> Result<KeyState, ArtifactError> {
        // The lease first: a publish that lands between the two calls is
        // seen by the second, and its generation is at least this one.
        let lease = match self.inspect(key).await? {
            Inspection::Found(lease) => lease,
            Inspection::NotProvisioned => return Ok(KeyState::NotProvisioned),
        };
        Ok(KeyState::of(key, &lease, self.read_publication(key).await?))
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
        /// The lease of `generation`, as far as a publish under it cares.
        lease: CurrentLease,
        /// The generation of its publication, if it has one.
        published_generation: Option<i64>,
        /// The artefact its publication points to; `None` when nothing is
        /// published or the payload is not an artefact pointer.
        published: Option<ArtifactPath>,
    },
    /// The key has no fence row.
    NotProvisioned,
    /// Its publication claims to be an artefact pointer (its `format` is
    /// `fencepost.artifact/…`) but this build cannot read it (a newer
    /// format, a malformed one), or it names no artefact of this key, or it
    /// is older than the publication `Inspect` saw. It may point to any of
    /// the key's objects.
    UnreadablePublication,
}

impl KeyState {
    /// The state of `key`, whose lease `Inspect` showed as `lease` and whose
    /// publication `ReadPublication` then answered.
    pub fn of(key: &str, lease: &LeaseState, publication: Publication) -> KeyState {
        let (published_generation, payload) = match publication {
            Publication::NotProvisioned => return KeyState::NotProvisioned,
            Publication::NothingPublished => (None, None),
            Publication::Found {
                generation, payload, ..
            } => (Some(generation), Some(payload)),
        };
        let published = match payload.as_deref().map(Pointer::from_payload) {
            None => None,
            Some(Ok(pointer)) => match ArtifactPath::from_location(&pointer.location) {
                Some(artifact) if artifact.key == key => Some(artifact),
                _ => return KeyState::UnreadablePublication,
            },
            Some(Err(_)) if claims_to_be_a_pointer(payload.as_deref().unwrap_or_default()) => {
                return KeyState::UnreadablePublication;
            }
            Some(Err(_)) => None,
        };
        // Inspect saw a later publication than ReadPublication answers: the
        // two reads came from different states (a replica, a failover in
        // between), and the one that points is not the latest.
        if lease.published_generation > published_generation {
            return KeyState::UnreadablePublication;
        }
        // A publish of a newer tenure between the two calls: its
        // generation is the current one, and the lease read belongs to an
        // older one.
        let generation = lease.generation.max(published_generation.unwrap_or(0));
        KeyState::Provisioned {
            generation,
            lease: CurrentLease::of(lease, generation),
            published_generation,
            published,
        }
    }

    /// What this state proves of `object`, one of the key's artefacts.
    pub fn judge(&self, object: &ArtifactPath) -> Judgement {
        let KeyState::Provisioned {
            generation,
            lease,
            published_generation,
            published,
        } = self
        else {
            return match self {
                KeyState::NotProvisioned => Judgement::NotProvisioned,
                _ => Judgement::UnreadablePublication,
            };
        };
        if published.as_ref() == Some(object) {
            return Judgement::Published;
        }
        if object.generation > *generation {
            // No publish above the current generation can have been
            // accepted: the database is behind the store.
            return Judgement::AheadOfDatabase;
        }
        let published_its_generation = published_generation.is_some_and(|p| p >= object.generation);
        let may_publish = matches!(lease, CurrentLease::Held | CurrentLease::Expired);
        if object.generation == *generation && may_publish && !published_its_generation {
            return Judgement::PublishMayCommit;
        }
        Judgement::Orphan
    }
}

/// The lease of a key's current generation, as a publish under it sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CurrentLease {
    /// Held: unexpired on the server clock.
    Held,
    /// Expired on the server clock but never given back: a publish judged
    /// before the expiry may still commit, in a caller's transaction that
    /// commits late.
    Expired,
    /// Ended by a committed write (given back, fenced) or never taken: no
    /// publish under the current generation can commit.
    Ended,
}

impl CurrentLease {
    /// The lease `Inspect` showed, for a key whose current generation is
    /// `generation` (above the inspected one when a newer tenure began in
    /// between: that one's lease was not read, and counts as held).
    fn of(lease: &LeaseState, generation: i64) -> CurrentLease {
        if lease.is_held || lease.generation != generation {
            return CurrentLease::Held;
        }
        match lease.lease_until {
            Some(_) => CurrentLease::Expired,
            None => CurrentLease::Ended,
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

/// What the database proves of one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Judgement {
    /// Its key's publication points to it.
    Published,
    /// Its generation is current, its tenure was not ended by a committed
    /// write (its lease is held, or expired but never given back) and
    /// nothing is published under it: its publish may still commit.
    PublishMayCommit,
    /// No publication points to it and none ever can.
    Orphan,
    /// Its key has no fence row.
    NotProvisioned,
    /// Its key's publication cannot be read as a pointer to one of its
    /// artefacts.
    UnreadablePublication,
    /// Its generation is above its key's current one.
    AheadOfDatabase,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use time::OffsetDateTime;
    use uuid::Uuid;

    use super::*;

    /// A lease of `generation`, held, or expired `expired_for` ago (on the
    /// server clock), or given back (`None`).
    fn lease(generation: i64, expired_for: Option<Option<Duration>>) -> LeaseState {
        let now = OffsetDateTime::now_utc();
        let (is_held, lease_until) = match expired_for {
            None => (true, Some(now + time::Duration::minutes(1))),
            Some(Some(ago)) => (false, Some(now - ago)),
            Some(None) => (false, None),
        };
        LeaseState {
            generation,
            is_held,
            lease_until,
            published_generation: None,
            server_utc: now,
            source_version: None,
        }
    }

    const HELD: Option<Option<Duration>> = None;
    const GIVEN_BACK: Option<Option<Duration>> = Some(None);

    fn expired_for(ago: Duration) -> Option<Option<Duration>> {
        Some(Some(ago))
    }

    fn artifact(generation: i64) -> ArtifactPath {
        ArtifactPath {
            key: "k".into(),
            generation,
            operation_id: Uuid::new_v4(),
        }
    }

    fn pointing_to(generation: i64, to: &ArtifactPath, under: &str) -> Publication {
        let pointer = Pointer {
            format: super::super::super::pointer::POINTER_FORMAT.into(),
            location: to.to_path(&under.into()).to_string(),
            size: 1,
            sha256: String::new(),
            e_tag: None,
            version: None,
            source_version: None,
        };
        Publication::Found {
            generation,
            payload: pointer.to_payload(),
            published_at: OffsetDateTime::UNIX_EPOCH,
            source_version: None,
        }
    }

    #[test]
    fn a_publication_keeps_its_object_whatever_root_the_publisher_spelt_it_under() {
        let published = artifact(3);
        let state = KeyState::of("k", &lease(3, GIVEN_BACK), pointing_to(3, &published, "daily"));
        // The sweep lists the same object under another root.
        let listed = ArtifactPath::from_location(published.to_path(&"var/reports/daily".into()).as_ref());
        assert_eq!(state.judge(&listed.unwrap()), Judgement::Published);
        assert_eq!(state.judge(&artifact(3)), Judgement::Orphan);
    }

    #[test]
    fn an_upload_of_the_held_generation_that_published_nothing_may_still_be_published() {
        let state = KeyState::of("k", &lease(5, HELD), Publication::NothingPublished);
        assert_eq!(state.judge(&artifact(5)), Judgement::PublishMayCommit);
        assert_eq!(state.judge(&artifact(4)), Judgement::Orphan);
        assert_eq!(state.judge(&artifact(6)), Judgement::AheadOfDatabase);
        // Given back: no publish of generation 5 can commit any more.
        let ended = KeyState::of("k", &lease(5, GIVEN_BACK), Publication::NothingPublished);
        assert_eq!(ended.judge(&artifact(5)), Judgement::Orphan);
        // Generation 5 published another object: it publishes only once.
        let other = artifact(5);
        let published = KeyState::of("k", &lease(5, HELD), pointing_to(5, &other, "p"));
        assert_eq!(published.judge(&artifact(5)), Judgement::Orphan);
        assert_eq!(published.judge(&other), Judgement::Published);
    }

    #[test]
    fn a_lease_left_to_expire_keeps_its_upload_however_long_ago_it_expired() {
        // A publish judged before the expiry, inside a caller's transaction,
        // commits whenever the caller commits: only a committed write that
        // ends the tenure (waiting for that transaction) proves it never will.
        for ago in [Duration::from_secs(1), Duration::from_secs(30 * 24 * 3600)] {
            let expired = KeyState::of("k", &lease(5, expired_for(ago)), Publication::NothingPublished);
            assert_eq!(expired.judge(&artifact(5)), Judgement::PublishMayCommit, "{ago:?}");
        }
    }

    #[test]
    fn a_publish_of_a_newer_tenure_between_the_two_reads_is_the_current_generation() {
        // Inspect saw generation 5 held; by ReadPublication, generation 6
        // had been acquired and published.
        let newer = artifact(6);
        let state = KeyState::of("k", &lease(5, HELD), pointing_to(6, &newer, "p"));
        assert_eq!(state.judge(&artifact(5)), Judgement::Orphan);
        assert_eq!(state.judge(&newer), Judgement::Published);
    }

    #[test]
    fn a_pointer_that_names_no_artefact_of_its_key_keeps_every_object_in_doubt() {
        let elsewhere = ArtifactPath {
            key: "another".into(),
            ..artifact(3)
        };
        let state = KeyState::of("k", &lease(3, GIVEN_BACK), pointing_to(3, &elsewhere, "p"));
        assert_eq!(state, KeyState::UnreadablePublication);
        assert_eq!(state.judge(&artifact(2)), Judgement::UnreadablePublication);
    }
}
