//! The operators' commands on one key: `ForceRelease`, `ResetSourceVersion`
//! and `Retire`. Each is idempotent by an optional operation id: the first
//! call records what it answered, and a replay (the same id, command and key,
//! and for `ResetSourceVersion` the same version) answers that record and
//! changes nothing, whatever happened to the key since.

use time::OffsetDateTime;
use uuid::Uuid;

use super::answer::{Ending, ForceReleased, Reset, Retired};
use super::call::Session;
use super::check;
use super::refusal::{self, Refusal};
use super::state::{Command, CommandRecord, Fence};

impl Fence {
    /// The record a replay of `id` answers: `Ok(None)` for an id never
    /// used, 50130 (`used`) for one used by another command or key, or
    /// for which `matches` says no.
    fn replayed(
        &self,
        id: Option<Uuid>,
        command: Command,
        key: &str,
        matches: impl Fn(&CommandRecord) -> bool,
        used: Refusal,
    ) -> Result<Option<&CommandRecord>, Refusal> {
        let Some(record) = id.and_then(|id| self.commands.get(&id)) else {
            return Ok(None);
        };
        if record.command == command && record.key == key && matches(record) {
            Ok(Some(record))
        } else {
            Err(used)
        }
    }

    fn record(&mut self, id: Option<Uuid>, record: CommandRecord) {
        match id {
            Some(id) => {
                self.commands.insert(id, record);
            }
            None => self.anonymous_commands.push(record),
        }
    }

    /// `ForceRelease`: raises the generation by one and clears the lease, so
    /// the holder's next renew, publish or assert is refused; the holder's
    /// tenure ends as `ForceReleased` (or `Expired`, at its end, when it had
    /// run out).
    pub(super) fn force_release(
        &mut self,
        key: &Option<String>,
        operation_id: Option<Uuid>,
        now: OffsetDateTime,
    ) -> Result<ForceReleased, Refusal> {
        let key = check::key(key)?;
        let id = check::command_id(operation_id)?;
        if let Some(record) = self.replayed(id, Command::ForceRelease, key, |_| true, refusal::COMMAND_ID_USED)? {
            return Ok(match record.generation {
                Some(generation) if record.outcome == "Fenced" => ForceReleased::Fenced { generation },
                _ => ForceReleased::NotProvisioned,
            });
        }
        let answer = match self.resources.get_mut(key) {
            Some(row) => {
                let ended = row
                    .owner
                    .map(|owner| row.end_tenure(key, owner, now, Ending::ForceReleased));
                row.generation += 1;
                row.owner = None;
                row.lease_until = None;
                row.acquired_at = None;
                let generation = row.generation;
                if let Some(tenure) = ended {
                    self.tenures.insert((key.to_string(), tenure.generation), tenure);
                }
                ForceReleased::Fenced { generation }
            }
            None => ForceReleased::NotProvisioned,
        };
        if id.is_some() {
            let (outcome, generation) = match answer {
                ForceReleased::Fenced { generation } => ("Fenced", Some(generation)),
                ForceReleased::NotProvisioned => ("NotProvisioned", None),
            };
            self.record(
                id,
                CommandRecord {
                    operation_id: id,
                    command: Command::ForceRelease,
                    key: key.to_string(),
                    outcome,
                    generation,
                    source_version: None,
                    previous_source_version: None,
                    recorded_at: now,
                },
            );
        }
        Ok(answer)
    }

    /// `ResetSourceVersion`: sets the key's source version (lower, or NULL
    /// to clear it), leaving leases and publications as they are.
    pub(super) fn reset_source_version(
        &mut self,
        key: &Option<String>,
        source_version: Option<i64>,
        operation_id: Option<Uuid>,
        now: OffsetDateTime,
    ) -> Result<Reset, Refusal> {
        let key = check::key(key)?;
        let version = check::source_version(source_version, refusal::RESET_SOURCE_VERSION)?;
        let id = check::command_id(operation_id)?;
        let same_version = |record: &CommandRecord| record.source_version == version;
        if let Some(record) = self.replayed(
            id,
            Command::ResetSourceVersion,
            key,
            same_version,
            refusal::RESET_ID_USED,
        )? {
            return Ok(match record.outcome {
                "Reset" => Reset::Reset {
                    previous_source_version: record.previous_source_version,
                },
                _ => Reset::NotProvisioned,
            });
        }
        let answer = match self.resources.get_mut(key) {
            Some(row) => {
                let previous = std::mem::replace(&mut row.source_version, version);
                Reset::Reset {
                    previous_source_version: previous,
                }
            }
            None => Reset::NotProvisioned,
        };
        if id.is_some() {
            let (outcome, previous) = match answer {
                Reset::Reset {
                    previous_source_version,
                } => ("Reset", previous_source_version),
                Reset::NotProvisioned => ("NotProvisioned", None),
            };
            self.record(
                id,
                CommandRecord {
                    operation_id: id,
                    command: Command::ResetSourceVersion,
                    key: key.to_string(),
                    outcome,
                    generation: None,
                    source_version: version,
                    previous_source_version: previous,
                    recorded_at: now,
                },
            );
        }
        Ok(answer)
    }

    /// `Retire`: on its own only (50128); refused while an unexpired lease
    /// holds the key (50131). Deletes the key's row, its publish records and
    /// its tenures, and raises the retirement mark to its generation, so a
    /// key provisioned afterwards (this one again included) starts there or
    /// above. Its operator records stay. A retirement without an operation
    /// id is recorded too, under an id nobody can replay.
    pub(super) fn retire(
        &mut self,
        session: Session,
        key: &Option<String>,
        operation_id: Option<Uuid>,
        now: OffsetDateTime,
    ) -> Result<Retired, Refusal> {
        let key = check::key(key)?;
        let id = check::command_id(operation_id)?;
        if session == Session::InTransaction {
            return Err(refusal::RETIRE_IN_TRANSACTION);
        }
        if let Some(record) = self.replayed(id, Command::Retire, key, |_| true, refusal::COMMAND_ID_USED)? {
            return Ok(match record.generation {
                Some(generation) if record.outcome == "Retired" => Retired::Retired { generation },
                _ => Retired::NotProvisioned,
            });
        }
        let answer = match self.resources.get(key) {
            Some(row) if row.is_held(now) => return Err(refusal::RETIRE_HELD),
            Some(row) => {
                let generation = row.generation;
                let mark = &mut self.retirement;
                mark.highest_generation = mark.highest_generation.max(generation);
                mark.keys_retired += 1;
                mark.last_retired_at = Some(now);
                self.publishes.retain(|_, record| record.key != key);
                self.tenures.retain(|(tenure_key, _), _| tenure_key != key);
                self.resources.remove(key);
                Retired::Retired { generation }
            }
            None => Retired::NotProvisioned,
        };
        let generation = match answer {
            Retired::Retired { generation } => Some(generation),
            Retired::NotProvisioned if id.is_none() => return Ok(answer),
            Retired::NotProvisioned => None,
        };
        self.record(
            id,
            CommandRecord {
                operation_id: id,
                command: Command::Retire,
                key: key.to_string(),
                outcome: answer_name(answer),
                generation,
                source_version: None,
                previous_source_version: None,
                recorded_at: now,
            },
        );
        Ok(answer)
    }
}

fn answer_name(answer: Retired) -> &'static str {
    match answer {
        Retired::Retired { .. } => "Retired",
        Retired::NotProvisioned => "NotProvisioned",
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use crate::model::run::Run;
    use crate::model::{
        Answer, Call, Command, Ending, ForceReleased, Outcome, Provisioned, Published, Renewed, Reset, Retired, Session,
    };

    fn force(key: &str, id: Option<Uuid>) -> Call {
        Call::ForceRelease {
            resource_key: Some(key.into()),
            operation_id: id,
        }
    }

    fn reset(key: &str, version: Option<i64>, id: Option<Uuid>) -> Call {
        Call::ResetSourceVersion {
            resource_key: Some(key.into()),
            source_version: version,
            operation_id: id,
        }
    }

    fn retire(key: &str, id: Option<Uuid>) -> Call {
        Call::Retire {
            resource_key: Some(key.into()),
            operation_id: id,
        }
    }

    #[test]
    fn force_release_fences_the_holder_out_at_a_generation_nobody_holds() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        run.later(1);
        assert_eq!(
            run.ok(&force("k", None)),
            Answer::ForceRelease(ForceReleased::Fenced {
                generation: generation + 1
            })
        );
        assert_eq!(
            run.ok(&Call::renew("k", owner, generation, 30)),
            Answer::Renew(Renewed::Lost)
        );
        assert_eq!(
            run.ok(&Call::publish("k", owner, generation, Uuid::new_v4(), "x")),
            Answer::Publish(Published::Superseded)
        );
        let tenure = run.fence.tenures("k").next().unwrap();
        assert_eq!(
            (tenure.ending, tenure.ended_at),
            (Ending::ForceReleased, Some(run.at(1)))
        );
        assert_eq!(run.acquired("k", owner, 30), generation + 2);
        assert_eq!(
            run.ok(&force("none", None)),
            Answer::ForceRelease(ForceReleased::NotProvisioned)
        );
    }

    #[test]
    fn a_force_release_replay_answers_its_record_and_never_fences_a_later_holder() {
        let mut run = Run::with(&["k"]);
        let id = Uuid::new_v4();
        run.acquired("k", Uuid::new_v4(), 30);
        let first = run.ok(&force("k", Some(id)));
        let generation = run.acquired("k", Uuid::new_v4(), 30);
        let before = run.fence.clone();
        assert_eq!(run.ok(&force("k", Some(id))), first);
        assert_eq!(run.fence, before);
        assert_eq!(run.fence.resource("k").unwrap().generation, generation);
        // Another key or command is another command: 50130.
        run.ok(&Call::provision("j"));
        assert_eq!(run.refused(&force("j", Some(id)), Session::Autocommit), 50130);
        assert_eq!(run.refused(&reset("k", None, Some(id)), Session::Autocommit), 50130);
        assert_eq!(run.refused(&retire("k", Some(id)), Session::Autocommit), 50130);
        assert_eq!(run.refused(&force("k", Some(Uuid::nil())), Session::Autocommit), 50105);
    }

    #[test]
    fn a_not_provisioned_answer_is_recorded_and_replayed_once_the_key_exists() {
        let mut run = Run::with(&[]);
        let id = Uuid::new_v4();
        assert_eq!(
            run.ok(&force("k", Some(id))),
            Answer::ForceRelease(ForceReleased::NotProvisioned)
        );
        run.ok(&Call::provision("k"));
        assert_eq!(
            run.ok(&force("k", Some(id))),
            Answer::ForceRelease(ForceReleased::NotProvisioned)
        );
        assert_eq!(run.fence.resource("k").unwrap().generation, 0);
    }

    #[test]
    fn reset_source_version_sets_or_clears_it_and_a_replay_needs_the_same_version() {
        let mut run = Run::with(&["k"]);
        let id = Uuid::new_v4();
        assert_eq!(
            run.ok(&reset("k", Some(3), Some(id))),
            Answer::ResetSourceVersion(Reset::Reset {
                previous_source_version: None
            })
        );
        assert_eq!(
            run.ok(&reset("k", None, None)),
            Answer::ResetSourceVersion(Reset::Reset {
                previous_source_version: Some(3)
            })
        );
        let before = run.fence.clone();
        assert_eq!(
            run.ok(&reset("k", Some(3), Some(id))),
            Answer::ResetSourceVersion(Reset::Reset {
                previous_source_version: None
            }),
            "the record, not the key's state"
        );
        assert_eq!(run.fence, before);
        assert_eq!(run.refused(&reset("k", Some(4), Some(id)), Session::Autocommit), 50130);
        assert_eq!(
            run.refused(&reset("k", Some(-1), Some(Uuid::nil())), Session::Autocommit),
            50109
        );
        assert_eq!(
            run.ok(&reset("none", Some(1), None)),
            Answer::ResetSourceVersion(Reset::NotProvisioned)
        );
    }

    #[test]
    fn retire_runs_on_its_own_only_and_not_while_a_lease_is_held() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 10);
        assert_eq!(run.refused(&retire("k", None), Session::InTransaction), 50128);
        assert_eq!(run.refused(&retire("k", None), Session::Autocommit), 50131);
        run.later(10);
        assert_eq!(
            run.ok(&retire("k", None)),
            Answer::Retire(Retired::Retired { generation })
        );
    }

    #[test]
    fn retire_deletes_the_key_its_records_and_tenures_and_keeps_operator_records() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        let publish = Uuid::new_v4();
        run.ok(&Call::Publish {
            resource_key: Some("k".into()),
            owner: Some(owner),
            generation: Some(generation),
            operation_id: Some(publish),
            payload: Some("r".into()),
            release: Some(true),
            source_version: None,
        });
        let command = Uuid::new_v4();
        run.ok(&reset("k", Some(1), Some(command)));
        run.ok(&retire("k", None));
        assert!(run.fence.resource("k").is_none());
        assert_eq!(run.fence.tenures("k").count(), 0);
        assert_eq!(
            run.ok(&Call::get_outcome(publish)),
            Answer::GetOutcome(Outcome::Unknown)
        );
        assert!(run.fence.command_record(command).is_some());
        let retirements: Vec<_> = run
            .fence
            .command_records()
            .filter(|r| r.command == Command::Retire)
            .collect();
        assert_eq!(retirements.len(), 1, "recorded under an id nobody replays");
        assert_eq!(retirements[0].operation_id, None);
        // A holder of the retired generation finds no key.
        assert_eq!(
            run.ok(&Call::publish("k", owner, generation, Uuid::new_v4(), "x")),
            Answer::Publish(Published::NotProvisioned)
        );
    }

    #[test]
    fn a_key_provisioned_after_a_retirement_starts_at_the_retired_generation() {
        let mut run = Run::with(&["k", "j"]);
        for _ in 0..3 {
            run.ok(&force("k", None));
        }
        run.ok(&retire("k", None));
        assert_eq!(run.fence.retirement().highest_generation, 3);
        assert_eq!(run.ok(&Call::provision("k")), Answer::Provision(Provisioned::Created));
        assert_eq!(run.fence.resource("k").unwrap().generation, 3);
        assert_eq!(run.acquired("k", Uuid::new_v4(), 30), 4);
        // Every new key, not only the retired one; existing keys stay.
        run.ok(&Call::provision("new"));
        assert_eq!(run.fence.resource("new").unwrap().generation, 3);
        assert_eq!(run.fence.resource("j").unwrap().generation, 0);
    }

    #[test]
    fn a_retire_replay_answers_its_record_and_leaves_the_key_provisioned_since_alone() {
        let mut run = Run::with(&["k"]);
        let id = Uuid::new_v4();
        let first = run.ok(&retire("k", Some(id)));
        run.ok(&Call::provision("k"));
        assert_eq!(run.ok(&retire("k", Some(id))), first);
        assert!(run.fence.resource("k").is_some());
        // Without an id, a retirement that found no key records nothing.
        let before = run.fence.clone();
        assert_eq!(run.ok(&retire("none", None)), Answer::Retire(Retired::NotProvisioned));
        assert_eq!(run.fence, before);
    }
}
