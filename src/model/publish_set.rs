//! `PublishSet` (contract 1.8): a publish per key of a set, all or none,
//! each judged as `Publish` judges one, without a source version.

use time::OffsetDateTime;
use uuid::Uuid;

use super::answer::Ending;
use super::refusal::{self, Refusal};
use super::set_answer::SetPublished;
use super::set_input::{self, Item};
use super::state::{Fence, PublishRecord};

impl Fence {
    /// `PublishSet`: an operation id recorded for another key or generation
    /// refuses the call (50107, naming the first such key in key order); one
    /// recorded for this key and generation is `AlreadyPublished`, not
    /// judged again. Every other key is judged as `Publish` judges it; only
    /// when none refuses are they all accepted, each recorded, the key's
    /// source version left as it is. With `@Release = 1` each published key
    /// is released, and, when any key was published, each replayed key this
    /// owner still holds at its generation too.
    pub(super) fn publish_set(
        &mut self,
        leases: &Option<String>,
        owner: Option<Uuid>,
        release: Option<bool>,
        now: OffsetDateTime,
    ) -> Result<Vec<(String, SetPublished)>, Refusal> {
        let mut items = set_input::leases(leases, true)?;
        let release = release.ok_or(refusal::SET_RELEASE)?;
        let owner = super::check::owner(owner)?;
        self.in_lock_order(&mut items, |item| &item.key);
        let id = |item: &Item| item.operation_id.expect("a publish item has an operation id");
        if let Some(item) = items.iter().find(|item| {
            self.publishes
                .get(&id(item))
                .is_some_and(|record| record.key != item.key || record.generation != item.generation)
        }) {
            return Err(refusal::naming(
                50107,
                format!(
                    "@Leases: the OperationId for \"{}\" was already used by a publish to another resource or \
                     generation.",
                    item.key
                ),
            ));
        }
        let outcomes: Vec<SetPublished> = items.iter().map(|item| self.judge_publish(item, owner, now)).collect();
        let accepted = outcomes
            .iter()
            .all(|o| matches!(o, SetPublished::Published | SetPublished::AlreadyPublished));
        if !accepted {
            let withheld = |o: SetPublished| match o {
                SetPublished::Published => SetPublished::Withheld,
                other => other,
            };
            return Ok(items
                .into_iter()
                .zip(outcomes)
                .map(|(i, o)| (i.key, withheld(o)))
                .collect());
        }
        let any_published = outcomes.contains(&SetPublished::Published);
        for (item, outcome) in items.iter().zip(&outcomes) {
            match outcome {
                SetPublished::Published => self.accept_publish(item, owner, release, now),
                // A replay changes nothing, unless this call published and
                // releases: then every lease it names that this owner still
                // holds at its generation ends, the replays' included.
                _ if release && any_published => {
                    let row = self.resources.get_mut(&item.key).expect("a replayed key has a row");
                    if row.owner == Some(owner) && row.generation == item.generation {
                        let tenure = row.end_tenure(&item.key, owner, now, Ending::Released);
                        row.owner = None;
                        row.lease_until = None;
                        self.tenures.insert((item.key.clone(), item.generation), tenure);
                    }
                }
                _ => {}
            }
        }
        Ok(items.into_iter().zip(outcomes).map(|(i, o)| (i.key, o)).collect())
    }

    /// One key of a `PublishSet` as `Publish` judges it, in its order.
    fn judge_publish(&self, item: &Item, owner: Uuid, now: OffsetDateTime) -> SetPublished {
        if item.operation_id.is_some_and(|id| self.publishes.contains_key(&id)) {
            return SetPublished::AlreadyPublished;
        }
        let Some(row) = self.resources.get(&item.key) else {
            return SetPublished::NotProvisioned;
        };
        if row.generation != item.generation || row.owner.is_some_and(|holder| holder != owner) {
            SetPublished::Superseded
        } else if row.published_generation.is_some_and(|g| g >= item.generation) {
            SetPublished::GenerationAlreadyPublished
        } else if !row.is_held(now) {
            SetPublished::Expired
        } else {
            SetPublished::Published
        }
    }

    /// Writes one accepted publish of a set: the publication (with no
    /// source version), its record, and with `release` the lease's end.
    fn accept_publish(&mut self, item: &Item, owner: Uuid, release: bool, now: OffsetDateTime) {
        let row = self.resources.get_mut(&item.key).expect("a published key has a row");
        row.published_generation = Some(item.generation);
        row.payload = item.payload.clone();
        row.published_at = Some(now);
        row.published_source_version = None;
        if release {
            let tenure = row.end_tenure(&item.key, owner, now, Ending::Released);
            row.owner = None;
            row.lease_until = None;
            self.tenures.insert((item.key.clone(), item.generation), tenure);
        }
        let id = item.operation_id.expect("a publish item has an operation id");
        self.publishes.insert(
            id,
            PublishRecord {
                key: item.key.clone(),
                generation: item.generation,
                published_at: now,
                source_version: None,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use crate::model::run::Run;
    use crate::model::{Answer, Call, Ending, Session, SetPublished};

    #[test]
    fn a_set_publishes_every_key_or_none_and_names_each_refusal() {
        let mut run = Run::with(&["a", "b"]);
        let owner = Uuid::new_v4();
        run.ok(&Call::acquire_set(&["a", "b"], owner, 30));
        run.ok(&Call::force_release("b"));
        let (x, y) = (Uuid::new_v4(), Uuid::new_v4());
        let before = run.fence.clone();
        assert_eq!(
            run.ok(&Call::publish_set(
                &[("a", 1, x, "pa"), ("b", 1, y, "pb")],
                owner,
                false
            )),
            Answer::PublishSet(vec![
                ("a".into(), SetPublished::Withheld),
                ("b".into(), SetPublished::Superseded),
            ])
        );
        assert_eq!(run.fence, before, "a refused set changes nothing");
        assert_eq!(
            run.ok(&Call::publish_set(&[("a", 1, x, "pa")], owner, true)),
            Answer::PublishSet(vec![("a".into(), SetPublished::Published)])
        );
        let row = run.fence.resource("a").unwrap();
        assert_eq!((row.payload.as_deref(), row.owner), (Some("pa"), None));
        let tenure = run.fence.tenures("a").next().unwrap();
        assert_eq!((tenure.ending, tenure.published), (Ending::Released, true));
        assert_eq!(run.fence.publish_record(x).unwrap().generation, 1);
    }

    #[test]
    fn a_publish_and_release_that_publishes_any_key_gives_back_the_replayed_keys_too() {
        let mut run = Run::with(&["a", "b"]);
        let owner = Uuid::new_v4();
        run.ok(&Call::acquire_set(&["a", "b"], owner, 30));
        let (x, y) = (Uuid::new_v4(), Uuid::new_v4());
        run.ok(&Call::publish_set(&[("a", 1, x, "pa")], owner, false));
        // Replays alone change nothing, with release or not.
        let before = run.fence.clone();
        run.ok(&Call::publish_set(&[("a", 1, x, "pa")], owner, true));
        assert_eq!(run.fence, before);
        run.later(5);
        assert_eq!(
            run.ok(&Call::publish_set(&[("a", 1, x, "pa"), ("b", 1, y, "pb")], owner, true)),
            Answer::PublishSet(vec![
                ("a".into(), SetPublished::AlreadyPublished),
                ("b".into(), SetPublished::Published),
            ])
        );
        for key in ["a", "b"] {
            assert_eq!(run.fence.resource(key).unwrap().owner, None, "{key} given back");
            let tenure = run.fence.tenures(key).next().unwrap();
            assert_eq!((tenure.ending, tenure.ended_at), (Ending::Released, Some(run.at(5))));
        }
    }

    #[test]
    fn a_replay_answers_already_published_and_an_id_used_elsewhere_is_50107() {
        let mut run = Run::with(&["a", "b"]);
        let owner = Uuid::new_v4();
        run.ok(&Call::acquire_set(&["a", "b"], owner, 30));
        let (x, y) = (Uuid::new_v4(), Uuid::new_v4());
        let call = Call::publish_set(&[("a", 1, x, "pa"), ("b", 1, y, "pb")], owner, false);
        run.ok(&call);
        let before = run.fence.clone();
        assert_eq!(
            run.ok(&call),
            Answer::PublishSet(vec![
                ("a".into(), SetPublished::AlreadyPublished),
                ("b".into(), SetPublished::AlreadyPublished),
            ])
        );
        assert_eq!(run.fence, before);
        let elsewhere = Call::publish_set(&[("b", 1, x, "pb")], owner, false);
        assert_eq!(run.refused(&elsewhere, Session::Autocommit), 50107);
        let refused = run.call(&elsewhere).unwrap_err();
        assert!(refused.message.contains("\"b\""), "{refused}");
    }
}
