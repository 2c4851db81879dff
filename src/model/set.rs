//! Lease sets (contract 1.8): `AcquireSet`, `RenewSet`, `ReleaseSet` and
//! `AssertHolderSet`. Each key stays an ordinary fence row judged as the
//! single-key procedure judges it; the set call answers one row per key in
//! the fence's key order, the order it locks them in. Nothing records the
//! set itself.

use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::answer::{Holding, Released};
use super::call::Session;
use super::check;
use super::refusal::{self, Refusal};
use super::set_answer::{SetAcquired, SetRenewed};
use super::set_input::{self, Item};
use super::state::Fence;

impl Fence {
    /// Sorts `keys` as the procedures lock them: binary, as the key column
    /// compares.
    pub(super) fn in_lock_order<T>(&self, items: &mut [T], key: impl Fn(&T) -> &str) {
        let order = self.key_order;
        items.sort_by(|a, b| order.compare(key(a), key(b)));
    }

    /// `AcquireSet`: every key granted as `Acquire` grants it, or none. A
    /// key without a row is `NotProvisioned`, another owner's live lease
    /// `Busy` until its end; then every other key is `Withheld` and nothing
    /// changes.
    pub(super) fn acquire_set(
        &mut self,
        keys: &Option<String>,
        owner: Option<Uuid>,
        lease_seconds: Option<i32>,
        now: OffsetDateTime,
    ) -> Result<Vec<(String, SetAcquired)>, Refusal> {
        let mut keys = set_input::keys(keys)?;
        let owner = check::owner(owner)?;
        let seconds = check::lease_seconds(lease_seconds)?;
        self.in_lock_order(&mut keys, |key| key);
        let refusals: Vec<Option<SetAcquired>> = keys
            .iter()
            .map(|key| match self.resources.get(key) {
                None => Some(SetAcquired::NotProvisioned),
                Some(row) if row.is_held(now) && row.owner != Some(owner) => Some(SetAcquired::Busy {
                    lease_until: row.lease_until.expect("a held lease has an end"),
                }),
                Some(_) => None,
            })
            .collect();
        if refusals.iter().any(Option::is_some) {
            return Ok(keys
                .into_iter()
                .zip(refusals)
                .map(|(key, refused)| (key, refused.unwrap_or(SetAcquired::Withheld)))
                .collect());
        }
        let mut rows = Vec::with_capacity(keys.len());
        for key in keys {
            let acquired = self.acquire(&Some(key.clone()), Some(owner), Some(seconds), now)?;
            let super::answer::Acquired::Acquired {
                generation,
                lease_until,
                ..
            } = acquired
            else {
                unreachable!("every key was found grantable: {acquired:?}");
            };
            rows.push((
                key,
                SetAcquired::Acquired {
                    generation,
                    lease_until,
                },
            ));
        }
        Ok(rows)
    }

    /// `RenewSet`: every key renewed as `Renew` renews one (this owner's
    /// live lease at its generation, never revived), or none: then the
    /// renewable keys are `Withheld` with their lease end unchanged.
    /// `@LeaseSeconds` is checked before `@Owner`, as the procedure does.
    pub(super) fn renew_set(
        &mut self,
        leases: &Option<String>,
        owner: Option<Uuid>,
        lease_seconds: Option<i32>,
        now: OffsetDateTime,
    ) -> Result<Vec<(String, SetRenewed)>, Refusal> {
        let mut items = set_input::leases(leases, false)?;
        let seconds = check::lease_seconds(lease_seconds)?;
        let owner = check::owner(owner)?;
        self.in_lock_order(&mut items, |item| &item.key);
        let held: Vec<Option<OffsetDateTime>> = items
            .iter()
            .map(|item| {
                self.resources
                    .get(&item.key)
                    .filter(|row| row.owner == Some(owner) && row.generation == item.generation && row.is_held(now))
                    .and_then(|row| row.lease_until)
            })
            .collect();
        let until = now + Duration::seconds(seconds.into());
        let all = held.iter().all(Option::is_some);
        Ok(items
            .into_iter()
            .zip(held)
            .map(|(item, held)| {
                let outcome = match held {
                    None => SetRenewed::Lost,
                    Some(_) if all => {
                        let row = self.resources.get_mut(&item.key).expect("a held key has a row");
                        row.lease_until = Some(until);
                        SetRenewed::Renewed { lease_until: until }
                    }
                    Some(lease_until) => SetRenewed::Withheld { lease_until },
                };
                (item.key, outcome)
            })
            .collect())
    }

    /// `ReleaseSet`: each key released as `Release` releases it (this
    /// owner and generation, expired or not), the others `NotHolder`.
    pub(super) fn release_set(
        &mut self,
        leases: &Option<String>,
        owner: Option<Uuid>,
        now: OffsetDateTime,
    ) -> Result<Vec<(String, Released)>, Refusal> {
        let mut items = set_input::leases(leases, false)?;
        let owner = check::owner(owner)?;
        self.in_lock_order(&mut items, |item| &item.key);
        items
            .into_iter()
            .map(|Item { key, generation, .. }| {
                let released = self.release(&Some(key.clone()), Some(owner), Some(generation), now)?;
                Ok((key, released))
            })
            .collect()
    }

    /// `AssertHolderSet`: inside the caller's transaction only (50113), every
    /// key must be this owner's live lease at its generation; the first key
    /// in key order that is not refuses the call, naming it: 50112 without a
    /// row, 50110 superseded, 50111 expired or released. Nothing changes.
    pub(super) fn assert_holder_set(
        &self,
        session: Session,
        leases: &Option<String>,
        owner: Option<Uuid>,
        now: OffsetDateTime,
    ) -> Result<Vec<(String, Holding)>, Refusal> {
        if session == Session::Autocommit {
            return Err(refusal::SET_OUTSIDE_TRANSACTION);
        }
        let mut items = set_input::leases(leases, false)?;
        let owner = check::owner(owner)?;
        self.in_lock_order(&mut items, |item| &item.key);
        items
            .into_iter()
            .map(|Item { key, generation, .. }| {
                let Some(row) = self.resources.get(&key) else {
                    return Err(refusal::naming(
                        50112,
                        format!("@Leases: the key \"{key}\" is not provisioned."),
                    ));
                };
                if row.generation != generation || row.owner.is_some_and(|holder| holder != owner) {
                    return Err(refusal::naming(
                        50110,
                        format!(
                            "@Leases: the lease on \"{key}\" was superseded: another owner or a newer generation is \
                             current."
                        ),
                    ));
                }
                if !row.is_held(now) {
                    return Err(refusal::naming(
                        50111,
                        format!("@Leases: the lease on \"{key}\" expired or was released, and nobody has taken over."),
                    ));
                }
                let lease_until = row.lease_until.expect("a held lease has an end");
                Ok((
                    key,
                    Holding {
                        generation,
                        lease_until,
                    },
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use crate::model::run::Run;
    use crate::model::{Answer, Call, Ending, Holding, Released, Session, SetAcquired, SetRenewed};

    fn acquired_set(run: &mut Run, keys: &[&str], owner: Uuid, seconds: i32) -> Vec<(String, SetAcquired)> {
        match run.ok(&Call::acquire_set(keys, owner, seconds)) {
            Answer::AcquireSet { rows, server_utc } => {
                assert_eq!(server_utc, run.now);
                rows
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_set_is_granted_whole_in_key_order_each_key_at_its_own_next_generation() {
        let mut run = Run::with(&["a", "b"]);
        let owner = Uuid::new_v4();
        run.acquired("b", Uuid::new_v4(), 5);
        run.later(6);
        let rows = acquired_set(&mut run, &["b", "a"], owner, 30);
        let until = run.at(36);
        assert_eq!(
            rows,
            vec![
                (
                    "a".into(),
                    SetAcquired::Acquired {
                        generation: 1,
                        lease_until: until
                    }
                ),
                (
                    "b".into(),
                    SetAcquired::Acquired {
                        generation: 2,
                        lease_until: until
                    }
                ),
            ]
        );
        let ended: Vec<_> = run.fence.tenures("b").map(|t| (t.generation, t.ending)).collect();
        assert_eq!(ended, vec![(1, Ending::Expired)], "the run-out holder's tenure ends");
    }

    #[test]
    fn one_busy_key_refuses_the_set_and_changes_nothing() {
        let mut run = Run::with(&["a", "b"]);
        let theirs = run.acquired("b", Uuid::new_v4(), 30);
        assert_eq!(theirs, 1);
        let before = run.fence.clone();
        let rows = acquired_set(&mut run, &["a", "b", "c"], Uuid::new_v4(), 30);
        assert_eq!(
            rows,
            vec![
                ("a".into(), SetAcquired::Withheld),
                (
                    "b".into(),
                    SetAcquired::Busy {
                        lease_until: run.at(30)
                    }
                ),
                ("c".into(), SetAcquired::NotProvisioned),
            ]
        );
        assert_eq!(run.fence, before);
    }

    #[test]
    fn the_owners_retry_keeps_each_generation_and_extends_the_leases() {
        let mut run = Run::with(&["a", "b"]);
        let owner = Uuid::new_v4();
        acquired_set(&mut run, &["a", "b"], owner, 30);
        run.later(10);
        let rows = acquired_set(&mut run, &["a", "b"], owner, 30);
        assert!(
            rows.iter()
                .all(|(_, row)| matches!(row, SetAcquired::Acquired { generation: 1, .. }))
        );
        assert_eq!(run.fence.resource("a").unwrap().lease_until, Some(run.at(40)));
    }

    #[test]
    fn a_set_renews_every_key_or_none_and_withheld_keys_keep_their_end() {
        let mut run = Run::with(&["a", "b"]);
        let owner = Uuid::new_v4();
        acquired_set(&mut run, &["a", "b"], owner, 30);
        run.later(10);
        assert_eq!(
            run.ok(&Call::renew_set(&[("a", 1), ("b", 1)], owner, 30)),
            Answer::RenewSet(vec![
                (
                    "a".into(),
                    SetRenewed::Renewed {
                        lease_until: run.at(40)
                    }
                ),
                (
                    "b".into(),
                    SetRenewed::Renewed {
                        lease_until: run.at(40)
                    }
                ),
            ])
        );
        run.ok(&Call::force_release("b"));
        assert_eq!(
            run.ok(&Call::renew_set(&[("b", 1), ("a", 1)], owner, 30)),
            Answer::RenewSet(vec![
                (
                    "a".into(),
                    SetRenewed::Withheld {
                        lease_until: run.at(40)
                    }
                ),
                ("b".into(), SetRenewed::Lost),
            ])
        );
    }

    #[test]
    fn renew_set_checks_its_seconds_before_its_owner() {
        let mut run = Run::with(&["a"]);
        let call = Call::RenewSet {
            leases: Some("[{\"ResourceKey\":\"a\",\"Generation\":1}]".into()),
            owner: None,
            lease_seconds: Some(0),
        };
        assert_eq!(run.refused(&call, Session::Autocommit), 50103);
    }

    #[test]
    fn release_set_gives_back_each_key_held_and_names_the_rest_not_holder() {
        let mut run = Run::with(&["a", "b"]);
        let owner = Uuid::new_v4();
        acquired_set(&mut run, &["a", "b"], owner, 30);
        run.ok(&Call::force_release("a"));
        assert_eq!(
            run.ok(&Call::release_set(&[("a", 1), ("b", 1)], owner)),
            Answer::ReleaseSet(vec![
                ("a".into(), Released::NotHolder),
                ("b".into(), Released::Released)
            ])
        );
        assert_eq!(run.fence.resource("b").unwrap().owner, None);
    }

    #[test]
    fn assert_holder_set_names_the_first_key_not_held_in_key_order() {
        let mut run = Run::with(&["a", "b", "c"]);
        let owner = Uuid::new_v4();
        acquired_set(&mut run, &["a", "b", "c"], owner, 30);
        let all = [("c", 1), ("a", 1), ("b", 1)];
        assert_eq!(
            run.refused(&Call::assert_holder_set(&all, owner), Session::Autocommit),
            50113
        );
        let holding = Holding {
            generation: 1,
            lease_until: run.at(30),
        };
        assert_eq!(
            run.in_transaction(&Call::assert_holder_set(&all, owner)),
            Ok(Answer::AssertHolderSet(vec![
                ("a".into(), holding),
                ("b".into(), holding),
                ("c".into(), holding),
            ]))
        );
        run.ok(&Call::force_release("c"));
        run.ok(&Call::release("b", owner, 1));
        let refused = run.in_transaction(&Call::assert_holder_set(&all, owner)).unwrap_err();
        assert_eq!(refused.number, 50111);
        assert!(refused.message.contains("\"b\""), "{refused}");
        assert_eq!(
            run.in_transaction(&Call::assert_holder_set(&[("z", 1)], owner))
                .unwrap_err()
                .number,
            50112
        );
    }
}
