//! `RenewMany` (contract 1.7): many leases renewed in one call, each judged
//! as `Renew` judges one, at the one clock the call read.

use std::collections::HashSet;

use time::OffsetDateTime;
use uuid::Uuid;

use super::answer::Renewed;
use super::check;
use super::refusal::{self, Refusal};
use super::state::Fence;

/// The most leases one call may list.
pub const MAX_RENEW_MANY: usize = 1000;

/// One object of `@Leases`: a field missing, or a value that is not what
/// the procedure reads it as (a non-GUID owner, a generation or length that
/// is not digits), is `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ListedLease {
    /// `ResourceKey`.
    pub resource_key: Option<String>,
    /// `Owner`.
    pub owner: Option<Uuid>,
    /// `Generation`.
    pub generation: Option<i64>,
    /// `LeaseSeconds`.
    pub lease_seconds: Option<i32>,
}

impl ListedLease {
    /// The lease `owner` holds on `key` at `generation`, for `seconds` more.
    pub fn new(key: &str, owner: Uuid, generation: i64, seconds: i32) -> ListedLease {
        ListedLease {
            resource_key: Some(key.to_string()),
            owner: Some(owner),
            generation: Some(generation),
            lease_seconds: Some(seconds),
        }
    }
}

impl Fence {
    /// `RenewMany`: the whole list is checked first, and any bad value
    /// refuses the call (50133) with nothing renewed; then each lease is
    /// renewed or `Lost` exactly as `Renew` would answer it at `now`. The
    /// answer is one row per lease, in the fence's key order.
    pub(super) fn renew_many(
        &mut self,
        leases: &Option<Vec<ListedLease>>,
        now: OffsetDateTime,
    ) -> Result<Vec<(String, Renewed)>, Refusal> {
        let leases = leases.as_ref().ok_or(refusal::LEASES_ARRAY)?;
        check_listed(leases)?;
        let mut answers = Vec::with_capacity(leases.len());
        for lease in leases {
            let renewed = self.renew(
                &lease.resource_key,
                lease.owner,
                lease.generation,
                lease.lease_seconds,
                now,
            )?;
            answers.push((lease.resource_key.clone().unwrap_or_default(), renewed));
        }
        let order = self.key_order;
        answers.sort_by(|(a, _), (b, _)| order.compare(a, b));
        Ok(answers)
    }
}

/// The procedure's checks of `@Leases`, in its order.
fn check_listed(leases: &[ListedLease]) -> Result<(), Refusal> {
    if !(1..=MAX_RENEW_MANY).contains(&leases.len()) {
        return Err(refusal::LEASES_ARRAY);
    }
    if leases
        .iter()
        .any(|l| check::key(&l.resource_key) == Err(refusal::KEY_LENGTH))
    {
        return Err(refusal::LEASES_KEY_LENGTH);
    }
    if leases.iter().any(|l| check::key(&l.resource_key).is_err()) {
        return Err(refusal::LEASES_KEY_TRAILING_SPACE);
    }
    let mut seen = HashSet::with_capacity(leases.len());
    if !leases.iter().all(|l| seen.insert(l.resource_key.as_deref())) {
        return Err(refusal::LEASES_KEY_TWICE);
    }
    if leases.iter().any(|l| check::owner(l.owner).is_err()) {
        return Err(refusal::LEASES_OWNER);
    }
    if leases.iter().any(|l| l.generation.is_none_or(|g| g < 1)) {
        return Err(refusal::LEASES_GENERATION);
    }
    if leases.iter().any(|l| check::lease_seconds(l.lease_seconds).is_err()) {
        return Err(refusal::LEASES_LEASE_SECONDS);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::super::run::Run;
    use super::super::{Answer, Call, Renewed, Session};
    use super::{ListedLease, MAX_RENEW_MANY};

    fn renew_many(leases: Vec<ListedLease>) -> Call {
        Call::RenewMany { leases: Some(leases) }
    }

    #[test]
    fn each_lease_is_judged_as_renew_judges_one_at_the_same_clock() {
        let mut run = Run::with(&["a", "b", "c"]);
        let (mine, theirs) = (Uuid::new_v4(), Uuid::new_v4());
        let a = run.acquired("a", mine, 10);
        let b = run.acquired("b", mine, 2);
        let c = run.acquired("c", theirs, 10);
        run.later(5);
        let answer = run.ok(&renew_many(vec![
            ListedLease::new("c", mine, c, 10),
            ListedLease::new("b", mine, b, 10),
            ListedLease::new("a", mine, a, 10),
            ListedLease::new("unknown", mine, 1, 10),
        ]));
        assert_eq!(
            answer,
            Answer::RenewMany(vec![
                (
                    "a".into(),
                    Renewed::Renewed {
                        lease_until: run.at(15)
                    }
                ),
                // Ran out at 2 with nobody after it: never revived.
                ("b".into(), Renewed::Lost),
                // Another owner's.
                ("c".into(), Renewed::Lost),
                ("unknown".into(), Renewed::Lost),
            ])
        );
        assert_eq!(run.fence.resource("b").and_then(|row| row.lease_until), Some(run.at(2)));
    }

    #[test]
    fn any_bad_value_refuses_the_whole_call_and_renews_nothing() {
        let mut run = Run::with(&["a"]);
        let owner = Uuid::new_v4();
        let a = run.acquired("a", owner, 10);
        let good = ListedLease::new("a", owner, a, 10);
        let with = |change: fn(&mut ListedLease)| {
            let mut bad = ListedLease::new("b", Uuid::new_v4(), 1, 10);
            change(&mut bad);
            renew_many(vec![good.clone(), bad])
        };
        let auto = Session::Autocommit;
        assert_eq!(run.refused(&Call::RenewMany { leases: None }, auto), 50133);
        assert_eq!(run.refused(&renew_many(Vec::new()), auto), 50133);
        assert_eq!(
            run.refused(&renew_many(vec![good.clone(); MAX_RENEW_MANY + 1]), auto),
            50133
        );
        assert_eq!(run.refused(&renew_many(vec![good.clone(), good.clone()]), auto), 50133);
        assert_eq!(run.refused(&with(|l| l.resource_key = None), auto), 50133);
        assert_eq!(run.refused(&with(|l| l.resource_key = Some("b ".into())), auto), 50133);
        assert_eq!(run.refused(&with(|l| l.owner = Some(Uuid::nil())), auto), 50133);
        assert_eq!(run.refused(&with(|l| l.generation = Some(0)), auto), 50133);
        assert_eq!(run.refused(&with(|l| l.generation = Some(-1)), auto), 50133);
        assert_eq!(run.refused(&with(|l| l.lease_seconds = Some(86_401)), auto), 50133);
        assert_eq!(run.refused(&with(|l| l.lease_seconds = None), auto), 50133);
    }
}
