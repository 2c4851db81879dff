//! The fenced write and its records: `Publish`, `GetOutcome` and
//! `ReadPublication`.

use time::OffsetDateTime;
use uuid::Uuid;

use super::answer::{Ending, Outcome, Publication, Published};
use super::check;
use super::refusal::{self, Refusal};
use super::state::{Fence, PublishRecord};

/// A publish's parameters, checked.
struct Request<'a> {
    key: &'a str,
    owner: Uuid,
    generation: i64,
    operation_id: Uuid,
    payload: &'a str,
    release: bool,
    source_version: Option<i64>,
}

impl Fence {
    /// `Publish`: the operation id decides first (used for this key and
    /// generation: `AlreadyPublished`, whatever the rest; used elsewhere:
    /// 50107). Then the write is accepted only for the current owner and
    /// generation, unexpired, with nothing published in the generation and
    /// no newer source version; a refusal is judged in the order
    /// `NotProvisioned`, `Superseded`, `GenerationAlreadyPublished`,
    /// `StaleSource` (only the current, unexpired holder), `Expired`, and
    /// changes nothing.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn publish(
        &mut self,
        key: &Option<String>,
        owner: Option<Uuid>,
        generation: Option<i64>,
        operation_id: Option<Uuid>,
        payload: &Option<String>,
        release: Option<bool>,
        source_version: Option<i64>,
        now: OffsetDateTime,
    ) -> Result<Published, Refusal> {
        let request = Request {
            key: check::key(key)?,
            owner: check::owner(owner)?,
            generation: check::generation(generation)?,
            operation_id: operation_id
                .filter(|id| !id.is_nil())
                .ok_or(refusal::PUBLISH_OPERATION_ID)?,
            payload: payload.as_deref().ok_or(refusal::PAYLOAD)?,
            release: release.ok_or(refusal::RELEASE)?,
            source_version: check::source_version(source_version, refusal::PUBLISH_SOURCE_VERSION)?,
        };
        if let Some(record) = self.publishes.get(&request.operation_id) {
            if record.key == request.key && record.generation == request.generation {
                return Ok(Published::AlreadyPublished);
            }
            return Err(refusal::OPERATION_ID_USED);
        }
        let answer = self.judge(&request, now);
        if answer == Published::Published {
            self.accept(&request, now);
        }
        Ok(answer)
    }

    /// What the fence row says of a publish that is not a replay.
    fn judge(&self, request: &Request<'_>, now: OffsetDateTime) -> Published {
        let Some(row) = self.resources.get(request.key) else {
            return Published::NotProvisioned;
        };
        if row.generation != request.generation || row.owner.is_some_and(|holder| holder != request.owner) {
            return Published::Superseded;
        }
        if row
            .published_generation
            .is_some_and(|published| published >= request.generation)
        {
            return Published::GenerationAlreadyPublished;
        }
        let holding = row.owner == Some(request.owner) && row.is_held(now);
        if !holding {
            return Published::Expired;
        }
        // Equal is a rebuild of the same source under a newer generation.
        let stale = match (row.source_version, request.source_version) {
            (Some(stored), Some(version)) => stored > version,
            _ => false,
        };
        if stale {
            return Published::StaleSource;
        }
        Published::Published
    }

    fn accept(&mut self, request: &Request<'_>, now: OffsetDateTime) {
        let row = self
            .resources
            .get_mut(request.key)
            .expect("an accepted publish has its row");
        row.published_generation = Some(request.generation);
        row.payload = Some(request.payload.to_string());
        row.published_at = Some(now);
        row.published_source_version = request.source_version;
        row.source_version = request.source_version.or(row.source_version);
        self.publishes.insert(
            request.operation_id,
            PublishRecord {
                key: request.key.to_string(),
                generation: request.generation,
                published_at: now,
                source_version: request.source_version,
            },
        );
        if request.release {
            // As `Release` does: the generation stays, the lease ends, and
            // the tenure ends published.
            let tenure = row.end_tenure(request.key, request.owner, now, Ending::Released);
            row.owner = None;
            row.lease_until = None;
            self.tenures
                .insert((request.key.to_string(), request.generation), tenure);
        }
    }

    /// `GetOutcome`: the record of an accepted publish, or `Unknown`.
    pub(super) fn get_outcome(&self, operation_id: Option<Uuid>) -> Result<Outcome, Refusal> {
        let operation_id = operation_id
            .filter(|id| !id.is_nil())
            .ok_or(refusal::PUBLISH_OPERATION_ID)?;
        Ok(match self.publishes.get(&operation_id) {
            Some(record) => Outcome::Published {
                resource_key: record.key.clone(),
                generation: record.generation,
                published_at: record.published_at,
                source_version: record.source_version,
            },
            None => Outcome::Unknown,
        })
    }

    /// `ReadPublication`: the key's last accepted publish.
    pub(super) fn read_publication(&self, key: &Option<String>) -> Result<Publication, Refusal> {
        let key = check::key(key)?;
        Ok(match self.resources.get(key) {
            Some(row) => Publication::Found {
                published_generation: row.published_generation,
                payload: row.payload.clone(),
                published_at: row.published_at,
                source_version: row.published_source_version,
            },
            None => Publication::NotProvisioned,
        })
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use crate::model::run::Run;
    use crate::model::{Answer, Call, Ending, Outcome, Publication, Published, Session};

    fn versioned(key: &str, owner: Uuid, generation: i64, id: Uuid, version: Option<i64>, release: bool) -> Call {
        Call::Publish {
            resource_key: Some(key.into()),
            owner: Some(owner),
            generation: Some(generation),
            operation_id: Some(id),
            payload: Some(format!("v{version:?}")),
            release: Some(release),
            source_version: version,
        }
    }

    fn published(answer: Published) -> Answer {
        Answer::Publish(answer)
    }

    #[test]
    fn the_holders_publish_is_accepted_recorded_and_readable() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        let id = Uuid::new_v4();
        run.later(1);
        assert_eq!(
            run.ok(&Call::publish("k", owner, generation, id, "r")),
            published(Published::Published)
        );
        assert_eq!(
            run.ok(&Call::get_outcome(id)),
            Answer::GetOutcome(Outcome::Published {
                resource_key: "k".into(),
                generation,
                published_at: run.at(1),
                source_version: None,
            })
        );
        assert_eq!(
            run.ok(&Call::read_publication("k")),
            Answer::ReadPublication(Publication::Found {
                published_generation: Some(generation),
                payload: Some("r".into()),
                published_at: Some(run.at(1)),
                source_version: None,
            })
        );
        // The lease stays held.
        assert!(run.fence.resource("k").unwrap().is_held(run.now));
    }

    #[test]
    fn a_replay_answers_already_published_whatever_happened_since_and_whatever_it_names() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 5);
        let id = Uuid::new_v4();
        run.ok(&versioned("k", owner, generation, id, Some(3), true));
        run.later(10);
        run.acquired("k", Uuid::new_v4(), 5);
        let before = run.fence.clone();
        assert_eq!(
            run.ok(&versioned("k", owner, generation, id, Some(1), false)),
            published(Published::AlreadyPublished)
        );
        assert_eq!(run.fence, before);
    }

    #[test]
    fn an_operation_id_used_for_another_key_or_generation_is_refused_with_50107() {
        let mut run = Run::with(&["k", "j"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        let id = Uuid::new_v4();
        run.ok(&Call::publish("k", owner, generation, id, "r"));
        let other = run.acquired("j", owner, 30);
        assert_eq!(
            run.refused(&Call::publish("j", owner, other, id, "r"), Session::Autocommit),
            50107
        );
        // Also for a key with no row: the id decides first.
        assert_eq!(
            run.refused(&Call::publish("none", owner, 1, id, "r"), Session::Autocommit),
            50107
        );
    }

    #[test]
    fn a_refused_publish_is_judged_in_the_contracts_order_and_changes_nothing() {
        let mut run = Run::with(&["k"]);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let refused = |run: &mut Run, call: &Call| {
            let before = run.fence.clone();
            let answer = run.ok(call);
            assert_eq!(run.fence, before, "{call:?}");
            answer
        };
        assert_eq!(
            refused(&mut run, &Call::publish("none", a, 1, Uuid::new_v4(), "x")),
            published(Published::NotProvisioned)
        );
        let first = run.acquired("k", a, 5);
        // Not the holder's generation: superseded, even unexpired.
        assert_eq!(
            refused(&mut run, &Call::publish("k", a, first + 1, Uuid::new_v4(), "x")),
            published(Published::Superseded)
        );
        assert_eq!(
            refused(&mut run, &Call::publish("k", b, first, Uuid::new_v4(), "x")),
            published(Published::Superseded)
        );
        run.later(5);
        assert_eq!(
            refused(&mut run, &Call::publish("k", a, first, Uuid::new_v4(), "x")),
            published(Published::Expired)
        );
        let second = run.acquired("k", b, 5);
        assert_eq!(
            refused(&mut run, &Call::publish("k", a, first, Uuid::new_v4(), "x")),
            published(Published::Superseded)
        );
        run.ok(&Call::publish("k", b, second, Uuid::new_v4(), "y"));
        assert_eq!(
            refused(&mut run, &Call::publish("k", b, second, Uuid::new_v4(), "z")),
            published(Published::GenerationAlreadyPublished)
        );
    }

    #[test]
    fn a_released_holder_is_expired_and_after_its_publish_generation_already_published() {
        let mut run = Run::with(&["k", "j"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        run.ok(&Call::release("k", owner, generation));
        assert_eq!(
            run.ok(&Call::publish("k", owner, generation, Uuid::new_v4(), "x")),
            published(Published::Expired)
        );
        let other = run.acquired("j", owner, 30);
        run.ok(&versioned("j", owner, other, Uuid::new_v4(), None, true));
        assert_eq!(
            run.ok(&Call::publish("j", owner, other, Uuid::new_v4(), "x")),
            published(Published::GenerationAlreadyPublished)
        );
    }

    #[test]
    fn an_older_source_is_stale_for_the_holder_only_and_keeps_the_lease_even_with_release() {
        let mut run = Run::with(&["k"]);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let first = run.acquired("k", a, 5);
        run.ok(&versioned("k", a, first, Uuid::new_v4(), Some(7), true));
        let second = run.acquired("k", b, 5);
        let before = run.fence.clone();
        assert_eq!(
            run.ok(&versioned("k", b, second, Uuid::new_v4(), Some(6), true)),
            published(Published::StaleSource)
        );
        assert_eq!(run.fence, before, "nothing recorded, the lease still held");
        // Ownership first: a superseded or expired caller is told so, whatever its version.
        assert_eq!(
            run.ok(&versioned("k", a, first, Uuid::new_v4(), Some(6), false)),
            published(Published::Superseded)
        );
        run.later(5);
        assert_eq!(
            run.ok(&versioned("k", b, second, Uuid::new_v4(), Some(6), false)),
            published(Published::Expired)
        );
    }

    #[test]
    fn an_equal_source_is_accepted_and_an_unversioned_publish_leaves_the_version() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let first = run.acquired("k", owner, 30);
        run.ok(&versioned("k", owner, first, Uuid::new_v4(), Some(4), true));
        let second = run.acquired("k", owner, 30);
        assert_eq!(
            run.ok(&versioned("k", owner, second, Uuid::new_v4(), Some(4), true)),
            published(Published::Published)
        );
        let third = run.acquired("k", owner, 30);
        run.ok(&versioned("k", owner, third, Uuid::new_v4(), None, false));
        let row = run.fence.resource("k").unwrap();
        assert_eq!((row.source_version, row.published_source_version), (Some(4), None));
    }

    #[test]
    fn publish_and_release_ends_the_tenure_released_and_published_with_its_version() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        run.later(2);
        run.ok(&versioned("k", owner, generation, Uuid::new_v4(), Some(9), true));
        let row = run.fence.resource("k").unwrap();
        assert_eq!((row.owner, row.lease_until, row.generation), (None, None, generation));
        let tenure = run.fence.tenures("k").next().unwrap();
        assert_eq!(
            (tenure.ending, tenure.ended_at, tenure.published, tenure.source_version),
            (Ending::Released, Some(run.at(2)), true, Some(9))
        );
    }

    #[test]
    fn publish_checks_its_parameters_in_their_order() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let call =
            |id: Option<Uuid>, payload: Option<&str>, release: Option<bool>, version: Option<i64>| Call::Publish {
                resource_key: Some("k".into()),
                owner: Some(owner),
                generation: Some(1),
                operation_id: id,
                payload: payload.map(str::to_string),
                release,
                source_version: version,
            };
        let auto = Session::Autocommit;
        let id = Some(Uuid::new_v4());
        assert_eq!(run.refused(&call(Some(Uuid::nil()), None, None, None), auto), 50105);
        assert_eq!(run.refused(&call(None, Some(""), Some(false), None), auto), 50105);
        assert_eq!(run.refused(&call(id, None, None, Some(-1)), auto), 50106);
        assert_eq!(run.refused(&call(id, Some(""), None, Some(-1)), auto), 50108);
        assert_eq!(run.refused(&call(id, Some(""), Some(true), Some(-1)), auto), 50109);
        assert_eq!(run.refused(&Call::get_outcome(Uuid::nil()), auto), 50105);
        assert_eq!(
            run.ok(&Call::get_outcome(Uuid::new_v4())),
            Answer::GetOutcome(Outcome::Unknown)
        );
        assert_eq!(
            run.ok(&Call::read_publication("none")),
            Answer::ReadPublication(Publication::NotProvisioned)
        );
    }
}
