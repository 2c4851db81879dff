//! The lease: `Provision`, `Acquire`, `Renew`, `Release` and `AssertHolder`.

use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::answer::{Acquired, Ending, Holding, Provisioned, Released, Renewed};
use super::call::Session;
use super::check;
use super::refusal::{self, Refusal};
use super::state::{Fence, Resource};

impl Fence {
    /// `Provision`: creates the key's row, never touching an existing one. A
    /// new key starts at the highest of every recovery's floor and the
    /// retirement mark (0 on a fresh database), so no generation issued
    /// before is issued again.
    pub(super) fn provision(&mut self, key: &Option<String>, now: OffsetDateTime) -> Result<Provisioned, Refusal> {
        let key = check::key(key)?;
        if self.resources.contains_key(key) {
            return Ok(Provisioned::Exists);
        }
        let floor = self
            .recoveries
            .values()
            .map(|r| r.generation_floor)
            .max()
            .unwrap_or(0)
            .max(self.retirement.highest_generation);
        self.resources.insert(
            key.to_string(),
            Resource {
                generation: floor,
                owner: None,
                lease_until: None,
                acquired_at: None,
                published_generation: None,
                payload: None,
                published_at: None,
                published_source_version: None,
                source_version: None,
                provisioned_at: now,
            },
        );
        Ok(Provisioned::Created)
    }

    /// `Acquire`: the owner still holding an unexpired lease extends it at
    /// the same generation; a free or expired lease is taken at the next
    /// generation, ending an expired holder's tenure as `Expired`; a live
    /// lease of another owner is `Busy` until its end.
    pub(super) fn acquire(
        &mut self,
        key: &Option<String>,
        owner: Option<Uuid>,
        lease_seconds: Option<i32>,
        now: OffsetDateTime,
    ) -> Result<Acquired, Refusal> {
        let key = check::key(key)?;
        let owner = check::owner(owner)?;
        let seconds = check::lease_seconds(lease_seconds)?;
        let until = now + Duration::seconds(seconds.into());
        let Some(row) = self.resources.get_mut(key) else {
            return Ok(Acquired::NotProvisioned { server_utc: now });
        };
        if row.is_held(now) {
            if row.owner != Some(owner) {
                return Ok(Acquired::Busy {
                    lease_until: row.lease_until.expect("a held lease has an end"),
                    server_utc: now,
                });
            }
            // The holder's retry: the same generation, a longer lease.
            row.lease_until = Some(until);
        } else {
            let ended = row
                .owner
                .map(|holder| row.end_tenure(key, holder, now, Ending::Expired));
            row.generation += 1;
            row.owner = Some(owner);
            row.lease_until = Some(until);
            row.acquired_at = Some(now);
            if let Some(tenure) = ended {
                self.tenures.insert((key.to_string(), tenure.generation), tenure);
            }
        }
        let generation = self.resources[key].generation;
        Ok(Acquired::Acquired {
            generation,
            lease_until: until,
            server_utc: now,
        })
    }

    /// `Renew`: extends the lease of this owner and generation by its
    /// seconds from now, only while it is unexpired: an expired lease is
    /// never revived, even with nobody after it.
    pub(super) fn renew(
        &mut self,
        key: &Option<String>,
        owner: Option<Uuid>,
        generation: Option<i64>,
        lease_seconds: Option<i32>,
        now: OffsetDateTime,
    ) -> Result<Renewed, Refusal> {
        let key = check::key(key)?;
        let owner = check::owner(owner)?;
        let generation = check::generation(generation)?;
        let seconds = check::lease_seconds(lease_seconds)?;
        match self.resources.get_mut(key) {
            Some(row) if row.owner == Some(owner) && row.generation == generation && row.is_held(now) => {
                let until = now + Duration::seconds(seconds.into());
                row.lease_until = Some(until);
                Ok(Renewed::Renewed { lease_until: until })
            }
            _ => Ok(Renewed::Lost),
        }
    }

    /// `Release`: only the exact owner and generation release, also after
    /// the lease ran out with nobody after it (the tenure then ends as
    /// `Expired`, at its end). The generation stays.
    pub(super) fn release(
        &mut self,
        key: &Option<String>,
        owner: Option<Uuid>,
        generation: Option<i64>,
        now: OffsetDateTime,
    ) -> Result<Released, Refusal> {
        let key = check::key(key)?;
        let owner = check::owner(owner)?;
        let generation = check::generation(generation)?;
        let Some(row) = self.resources.get_mut(key) else {
            return Ok(Released::NotHolder);
        };
        if row.owner != Some(owner) || row.generation != generation {
            return Ok(Released::NotHolder);
        }
        let tenure = row.end_tenure(key, owner, now, Ending::Released);
        row.owner = None;
        row.lease_until = None;
        self.tenures.insert((key.to_string(), generation), tenure);
        Ok(Released::Released)
    }

    /// `AssertHolder`: inside the caller's transaction only (50113), the
    /// caller must hold the current, unexpired lease: 50112 without a row,
    /// 50110 when another owner or generation is current, 50111 when it ran
    /// out or was released with nobody after it; then, with a source
    /// version, 50114 when the key's is newer, and otherwise the key's source
    /// version rises to it (inside the caller's transaction).
    pub(super) fn assert_holder(
        &mut self,
        session: Session,
        key: &Option<String>,
        owner: Option<Uuid>,
        generation: Option<i64>,
        source_version: Option<i64>,
        now: OffsetDateTime,
    ) -> Result<Holding, Refusal> {
        if session == Session::Autocommit {
            return Err(refusal::OUTSIDE_TRANSACTION);
        }
        let key = check::key(key)?;
        let owner = check::owner(owner)?;
        let generation = check::generation(generation)?;
        let version = check::source_version(source_version, refusal::ASSERT_SOURCE_VERSION)?;
        let Some(row) = self.resources.get_mut(key) else {
            return Err(refusal::NOT_PROVISIONED);
        };
        if row.generation != generation || row.owner.is_some_and(|holder| holder != owner) {
            return Err(refusal::SUPERSEDED);
        }
        if !row.is_held(now) {
            return Err(refusal::EXPIRED);
        }
        if let Some(version) = version {
            match row.source_version {
                Some(stored) if stored > version => return Err(refusal::STALE_SOURCE),
                _ => row.source_version = Some(version),
            }
        }
        Ok(Holding {
            generation: row.generation,
            lease_until: row.lease_until.expect("a held lease has an end"),
        })
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use crate::model::run::Run;
    use crate::model::{Acquired, Answer, Call, Ending, Holding, Provisioned, Released, Renewed, Session};

    #[test]
    fn provision_creates_a_row_at_generation_zero_and_never_touches_an_existing_one() {
        let mut run = Run::with(&[]);
        assert_eq!(run.ok(&Call::provision("k")), Answer::Provision(Provisioned::Created));
        run.acquired("k", Uuid::new_v4(), 30);
        assert_eq!(run.ok(&Call::provision("k")), Answer::Provision(Provisioned::Exists));
        assert_eq!(run.fence.resource("k").unwrap().generation, 1);
    }

    #[test]
    fn acquire_takes_a_free_key_at_the_next_generation_with_a_lease_from_now() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        assert_eq!(
            run.ok(&Call::acquire("k", owner, 30)),
            Answer::Acquire(Acquired::Acquired {
                generation: 1,
                lease_until: run.at(30),
                server_utc: run.at(0),
            })
        );
        let row = run.fence.resource("k").unwrap();
        assert_eq!((row.owner, row.acquired_at), (Some(owner), Some(run.at(0))));
    }

    #[test]
    fn the_holders_retry_keeps_its_generation_and_extends_the_lease_from_now() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        run.acquired("k", owner, 30);
        run.later(10);
        assert_eq!(
            run.ok(&Call::acquire("k", owner, 5)),
            Answer::Acquire(Acquired::Acquired {
                generation: 1,
                lease_until: run.at(15),
                server_utc: run.at(10),
            })
        );
        assert_eq!(run.fence.resource("k").unwrap().acquired_at, Some(run.at(0)));
    }

    #[test]
    fn another_owner_is_busy_until_the_holders_end_and_changes_nothing() {
        let mut run = Run::with(&["k"]);
        run.acquired("k", Uuid::new_v4(), 30);
        let before = run.fence.clone();
        run.later(29);
        assert_eq!(
            run.ok(&Call::acquire("k", Uuid::new_v4(), 30)),
            Answer::Acquire(Acquired::Busy {
                lease_until: run.at(30),
                server_utc: run.at(29),
            })
        );
        assert_eq!(run.fence, before);
    }

    #[test]
    fn an_expired_lease_is_taken_at_the_next_generation_and_its_tenure_ends_expired_at_its_end() {
        let mut run = Run::with(&["k"]);
        let first = Uuid::new_v4();
        run.acquired("k", first, 30);
        // At its end exactly the lease is over: it is held while it ends after now.
        run.later(30);
        assert_eq!(run.acquired("k", Uuid::new_v4(), 30), 2);
        let tenure = run.fence.tenures("k").next().unwrap().clone();
        assert_eq!(tenure.generation, 1);
        assert_eq!(tenure.owner_hash, crate::model::owner_hash(first));
        assert_eq!((tenure.ended_at, tenure.ending), (Some(run.at(30)), Ending::Expired));
    }

    #[test]
    fn the_expired_owner_itself_acquires_at_the_next_generation() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        run.acquired("k", owner, 1);
        run.later(2);
        assert_eq!(run.acquired("k", owner, 1), 2);
    }

    #[test]
    fn acquire_of_a_key_with_no_row_is_not_provisioned() {
        let mut run = Run::with(&[]);
        assert_eq!(
            run.ok(&Call::acquire("k", Uuid::new_v4(), 30)),
            Answer::Acquire(Acquired::NotProvisioned { server_utc: run.at(0) })
        );
    }

    #[test]
    fn renew_extends_only_an_unexpired_lease_of_this_owner_and_generation() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 10);
        run.later(5);
        assert_eq!(
            run.ok(&Call::renew("k", owner, generation, 10)),
            Answer::Renew(Renewed::Renewed {
                lease_until: run.at(15)
            })
        );
        assert_eq!(
            run.ok(&Call::renew("k", Uuid::new_v4(), generation, 10)),
            Answer::Renew(Renewed::Lost)
        );
        assert_eq!(
            run.ok(&Call::renew("k", owner, generation + 1, 10)),
            Answer::Renew(Renewed::Lost)
        );
        assert_eq!(
            run.ok(&Call::renew("nobody", owner, generation, 10)),
            Answer::Renew(Renewed::Lost)
        );
    }

    #[test]
    fn an_expired_lease_is_never_revived_even_with_nobody_after_it() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 10);
        run.later(10);
        let before = run.fence.clone();
        assert_eq!(
            run.ok(&Call::renew("k", owner, generation, 10)),
            Answer::Renew(Renewed::Lost)
        );
        assert_eq!(run.fence, before);
    }

    #[test]
    fn release_by_the_holder_ends_its_tenure_and_keeps_the_generation() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        run.later(3);
        assert_eq!(
            run.ok(&Call::release("k", owner, generation)),
            Answer::Release(Released::Released)
        );
        let row = run.fence.resource("k").unwrap();
        assert_eq!((row.generation, row.owner, row.lease_until), (1, None, None));
        let tenure = run.fence.tenures("k").next().unwrap();
        assert_eq!((tenure.ended_at, tenure.ending), (Some(run.at(3)), Ending::Released));
        // Once released, the same lease is no holder any more.
        assert_eq!(
            run.ok(&Call::release("k", owner, generation)),
            Answer::Release(Released::NotHolder)
        );
    }

    #[test]
    fn a_release_after_the_lease_ran_out_with_nobody_after_it_is_released_and_ends_expired() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 5);
        run.later(9);
        assert_eq!(
            run.ok(&Call::release("k", owner, generation)),
            Answer::Release(Released::Released)
        );
        let tenure = run.fence.tenures("k").next().unwrap();
        assert_eq!((tenure.ended_at, tenure.ending), (Some(run.at(5)), Ending::Expired));
    }

    #[test]
    fn release_by_another_owner_or_generation_is_not_holder_and_changes_nothing() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        let before = run.fence.clone();
        for call in [
            Call::release("k", Uuid::new_v4(), generation),
            Call::release("k", owner, generation + 1),
            Call::release("other", owner, generation),
        ] {
            assert_eq!(run.ok(&call), Answer::Release(Released::NotHolder));
        }
        assert_eq!(run.fence, before);
    }

    #[test]
    fn assert_holder_runs_only_inside_a_transaction() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        let call = Call::assert_holder("k", owner, generation);
        assert_eq!(run.refused(&call, Session::Autocommit), 50113);
        // Before any other check, bad input included.
        assert_eq!(
            run.refused(&Call::assert_holder("", owner, 0), Session::Autocommit),
            50113
        );
        assert_eq!(
            run.in_transaction(&call),
            Ok(Answer::AssertHolder(Holding {
                generation,
                lease_until: run.at(30)
            }))
        );
    }

    #[test]
    fn assert_holder_refuses_a_missing_row_then_a_successor_then_an_ended_lease() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let inside = Session::InTransaction;
        assert_eq!(run.refused(&Call::assert_holder("none", owner, 1), inside), 50112);
        let generation = run.acquired("k", owner, 10);
        assert_eq!(
            run.refused(&Call::assert_holder("k", Uuid::new_v4(), generation), inside),
            50110
        );
        assert_eq!(
            run.refused(&Call::assert_holder("k", owner, generation + 1), inside),
            50110
        );
        run.later(10);
        assert_eq!(run.refused(&Call::assert_holder("k", owner, generation), inside), 50111);
        run.ok(&Call::release("k", owner, generation));
        // Released: nobody holds the generation, and it is still current.
        assert_eq!(run.refused(&Call::assert_holder("k", owner, generation), inside), 50111);
    }

    #[test]
    fn assert_holder_with_a_source_version_refuses_an_older_one_and_raises_to_a_newer() {
        let mut run = Run::with(&["k"]);
        let owner = Uuid::new_v4();
        let generation = run.acquired("k", owner, 30);
        let asserted = |version: i64| Call::AssertHolder {
            resource_key: Some("k".into()),
            owner: Some(owner),
            generation: Some(generation),
            source_version: Some(version),
        };
        assert!(run.in_transaction(&asserted(5)).is_ok());
        assert_eq!(run.fence.resource("k").unwrap().source_version, Some(5));
        assert!(run.in_transaction(&asserted(5)).is_ok(), "equal is accepted");
        assert_eq!(run.refused(&asserted(4), Session::InTransaction), 50114);
        assert_eq!(run.refused(&asserted(-1), Session::InTransaction), 50109);
    }

    #[test]
    fn each_procedure_checks_its_parameters_in_their_order() {
        let mut run = Run::with(&["k"]);
        let auto = Session::Autocommit;
        let acquire = |key: Option<&str>, owner: Option<Uuid>, seconds: Option<i32>| Call::Acquire {
            resource_key: key.map(str::to_string),
            owner,
            lease_seconds: seconds,
        };
        assert_eq!(run.refused(&acquire(None, None, None), auto), 50101);
        assert_eq!(run.refused(&acquire(Some("k"), Some(Uuid::nil()), None), auto), 50102);
        assert_eq!(
            run.refused(&acquire(Some("k"), Some(Uuid::new_v4()), Some(0)), auto),
            50103
        );
        assert_eq!(
            run.refused(&acquire(Some("k"), Some(Uuid::new_v4()), Some(86_401)), auto),
            50103
        );
        assert_eq!(
            run.refused(&Call::acquire(&"k".repeat(257), Uuid::new_v4(), 1), auto),
            50101
        );
        // Renew checks the generation before the seconds.
        assert_eq!(run.refused(&Call::renew("k", Uuid::new_v4(), 0, 0), auto), 50104);
        assert_eq!(run.refused(&Call::renew("k", Uuid::new_v4(), 1, 0), auto), 50103);
        assert_eq!(run.refused(&Call::release("k ", Uuid::new_v4(), 1), auto), 50101);
        assert_eq!(run.refused(&Call::release("k", Uuid::new_v4(), 0), auto), 50104);
        assert_eq!(run.refused(&Call::provision(""), auto), 50101);
    }
}
