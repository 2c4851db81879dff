//! What acts on every key at once: `Recover`, `PruneTenure` and
//! `PruneOutcomes`.

use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::answer::{Ending, Recovered, Recovery};
use super::call::Session;
use super::check;
use super::refusal::{self, Refusal};
use super::state::{Fence, RecoveryRecord};

/// Generations per recovery epoch (2^40).
pub const EPOCH: i64 = 1 << 40;

impl Fence {
    /// `Recover`: raises every key's generation to the next multiple of
    /// 2^40 above both the highest generation held and `floor`, voids every
    /// open lease (its tenure ends as `Superseded`, or `Expired` at its end
    /// when it had run out) and records the recovery; the same recovery id
    /// again answers `AlreadyRecovered` and changes nothing. A key
    /// provisioned afterwards starts at the floor.
    pub(super) fn recover(
        &mut self,
        recovery_id: Option<Uuid>,
        floor: Option<i64>,
        database_identity: Option<Uuid>,
        now: OffsetDateTime,
    ) -> Result<Recovered, Refusal> {
        let recovery_id = recovery_id.filter(|id| !id.is_nil()).ok_or(refusal::RECOVERY_ID)?;
        if floor.is_some_and(|f| !(0..=check::MAX_FLOOR).contains(&f)) {
            return Err(refusal::FLOOR);
        }
        if database_identity.is_some_and(|identity| identity.is_nil()) {
            return Err(refusal::DATABASE_IDENTITY);
        }
        if let Some(record) = self.recoveries.get(&recovery_id) {
            return Ok(Recovered::AlreadyRecovered(recovery(record)));
        }
        let highest = match self.resources.values().map(|row| row.generation).max() {
            // `@Highest < @Floor` is unknown when @Floor is NULL: kept.
            Some(highest) => floor.map_or(highest, |floor| highest.max(floor)),
            None => floor.unwrap_or(0),
        };
        let generation_floor = (highest / EPOCH + 1) * EPOCH;
        let mut voided = 0;
        for (key, row) in self.resources.iter_mut() {
            if row.is_held(now) {
                voided += 1;
            }
            if let Some(owner) = row.owner {
                let tenure = row.end_tenure(key, owner, now, Ending::Superseded);
                self.tenures.insert((key.clone(), tenure.generation), tenure);
            }
            row.generation = generation_floor;
            row.owner = None;
            row.lease_until = None;
            row.acquired_at = None;
        }
        let record = RecoveryRecord {
            recovered_at: now,
            generation_floor,
            leases_voided: voided,
            database_identity,
        };
        self.recoveries.insert(recovery_id, record);
        if database_identity.is_some() {
            self.database_identity = database_identity;
        }
        Ok(Recovered::Recovered(recovery(&record)))
    }

    /// `PruneTenure`: on its own only (50128), deletes the tenures that
    /// ended more than `older_than_days` days ago.
    pub(super) fn prune_tenure(
        &mut self,
        session: Session,
        older_than_days: Option<i32>,
        now: OffsetDateTime,
    ) -> Result<(i32, OffsetDateTime), Refusal> {
        let days = check::older_than_days(older_than_days)?;
        if session == Session::InTransaction {
            return Err(refusal::PRUNE_TENURE_IN_TRANSACTION);
        }
        let before = now - Duration::days(days.into());
        let was = self.tenures.len();
        // A NULL end compares as unknown: kept.
        self.tenures
            .retain(|_, tenure| tenure.ended_at.is_none_or(|ended| ended >= before));
        Ok((count(was - self.tenures.len()), before))
    }

    /// `PruneOutcomes`: on its own only (50128), deletes the records of
    /// publishes and operator commands made more than `older_than_days` days
    /// ago. A replay older than that is judged afresh: a publish is refused
    /// by the fence row (never `Published` twice in one generation), an
    /// operator command applies again.
    pub(super) fn prune_outcomes(
        &mut self,
        session: Session,
        older_than_days: Option<i32>,
        now: OffsetDateTime,
    ) -> Result<(i32, i32, OffsetDateTime), Refusal> {
        let days = check::older_than_days(older_than_days)?;
        if session == Session::InTransaction {
            return Err(refusal::PRUNE_OUTCOMES_IN_TRANSACTION);
        }
        let before = now - Duration::days(days.into());
        let publishes = self.publishes.len();
        self.publishes.retain(|_, record| record.published_at >= before);
        let commands = self.commands.len() + self.anonymous_commands.len();
        self.commands.retain(|_, record| record.recorded_at >= before);
        self.anonymous_commands.retain(|record| record.recorded_at >= before);
        let commands_left = self.commands.len() + self.anonymous_commands.len();
        Ok((
            count(publishes - self.publishes.len()),
            count(commands - commands_left),
            before,
        ))
    }
}

fn recovery(record: &RecoveryRecord) -> Recovery {
    Recovery {
        generation_floor: record.generation_floor,
        leases_voided: record.leases_voided,
        recovered_at: record.recovered_at,
    }
}

/// A row count as the procedures answer it (`int`).
fn count(rows: usize) -> i32 {
    i32::try_from(rows).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use time::Duration;
    use uuid::Uuid;

    use super::EPOCH;
    use crate::model::run::Run;
    use crate::model::{Answer, Call, Ending, Recovered, Recovery, Renewed, Session};

    fn recover(id: Uuid, floor: Option<i64>) -> Call {
        Call::Recover {
            recovery_id: Some(id),
            floor,
            database_identity: None,
        }
    }

    #[test]
    fn recover_raises_every_key_to_the_next_epoch_and_voids_every_lease() {
        let mut run = Run::with(&["k", "j", "idle"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        run.acquired("j", Uuid::new_v4(), 5);
        run.later(10);
        let id = Uuid::new_v4();
        let recovered = Recovery {
            generation_floor: EPOCH,
            leases_voided: 1,
            recovered_at: run.at(10),
        };
        assert_eq!(
            run.ok(&recover(id, None)),
            Answer::Recover(Recovered::Recovered(recovered))
        );
        for key in ["k", "j", "idle"] {
            let row = run.fence.resource(key).unwrap();
            assert_eq!((row.generation, row.owner), (EPOCH, None));
        }
        assert_eq!(run.fence.tenures("k").next().unwrap().ending, Ending::Superseded);
        assert_eq!(run.fence.tenures("j").next().unwrap().ending, Ending::Expired);
        assert_eq!(
            run.ok(&Call::renew("k", owner, generation, 30)),
            Answer::Renew(Renewed::Lost)
        );
        assert_eq!(run.acquired("k", owner, 30), EPOCH + 1);
        // The same recovery again changes nothing.
        let before = run.fence.clone();
        assert_eq!(
            run.ok(&recover(id, Some(10 * EPOCH))),
            Answer::Recover(Recovered::AlreadyRecovered(recovered))
        );
        assert_eq!(run.fence, before);
    }

    #[test]
    fn the_floor_is_the_next_epoch_above_the_highest_generation_and_the_floor_given() {
        let mut run = Run::with(&[]);
        let floor = |answer: Answer| match answer {
            Answer::Recover(Recovered::Recovered(r)) => r.generation_floor,
            other => panic!("{other:?}"),
        };
        assert_eq!(floor(run.ok(&recover(Uuid::new_v4(), None))), EPOCH, "an empty table");
        assert_eq!(floor(run.ok(&recover(Uuid::new_v4(), Some(EPOCH)))), 2 * EPOCH);
        run.ok(&Call::provision("k"));
        assert_eq!(
            run.fence.resource("k").unwrap().generation,
            2 * EPOCH,
            "new keys start at the floor"
        );
        assert_eq!(floor(run.ok(&recover(Uuid::new_v4(), Some(5)))), 3 * EPOCH);
    }

    #[test]
    fn recover_refuses_bad_ids_and_floors() {
        let mut run = Run::with(&[]);
        let auto = Session::Autocommit;
        assert_eq!(
            run.refused(
                &Call::Recover {
                    recovery_id: None,
                    floor: None,
                    database_identity: None
                },
                auto
            ),
            50124
        );
        assert_eq!(run.refused(&recover(Uuid::nil(), None), auto), 50124);
        assert_eq!(run.refused(&recover(Uuid::new_v4(), Some(-1)), auto), 50125);
        assert_eq!(run.refused(&recover(Uuid::new_v4(), Some(1 << 62)), auto), 50125);
        let nil_identity = Call::Recover {
            recovery_id: Some(Uuid::new_v4()),
            floor: None,
            database_identity: Some(Uuid::nil()),
        };
        assert_eq!(run.refused(&nil_identity, auto), 50126);
        let identity = Uuid::new_v4();
        run.ok(&Call::Recover {
            recovery_id: Some(Uuid::new_v4()),
            floor: None,
            database_identity: Some(identity),
        });
        assert_eq!(run.fence.database_identity(), Some(identity));
    }

    #[test]
    fn the_prunes_delete_what_is_older_than_their_window_and_run_on_their_own_only() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        run.ok(&Call::publish("k", owner, generation, Uuid::new_v4(), "r"));
        run.ok(&Call::release("k", owner, generation));
        run.ok(&Call::ForceRelease {
            resource_key: Some("k".into()),
            operation_id: Some(Uuid::new_v4()),
        });
        let tenure = Call::PruneTenure {
            older_than_days: Some(1),
        };
        let outcomes = Call::PruneOutcomes {
            older_than_days: Some(1),
        };
        assert_eq!(run.refused(&tenure, Session::InTransaction), 50128);
        assert_eq!(run.refused(&outcomes, Session::InTransaction), 50128);
        assert_eq!(
            run.refused(
                &Call::PruneTenure {
                    older_than_days: Some(0)
                },
                Session::InTransaction
            ),
            50123,
            "the bound first"
        );
        let a_day = run.at(0) + Duration::days(1);
        run.now = a_day;
        assert_eq!(
            run.ok(&tenure),
            Answer::PruneTenure {
                deleted: 0,
                ended_before: run.at(0)
            },
            "ended exactly a day ago: kept"
        );
        run.now = a_day + Duration::nanoseconds(100);
        assert!(matches!(run.ok(&tenure), Answer::PruneTenure { deleted: 1, .. }));
        assert!(matches!(
            run.ok(&outcomes),
            Answer::PruneOutcomes {
                publishes_deleted: 1,
                commands_deleted: 1,
                ..
            }
        ));
    }
}
