//! `fence_admin.Recover`: after a restore from backup or a failover that lost
//! writes, the database may have forgotten generations it handed out. A
//! recovery raises every resource's generation to a new epoch (a multiple of
//! 2^40) above every one the database holds and above a floor the operator
//! knows, and voids every open lease.

use time::OffsetDateTime;
use uuid::Uuid;

use super::Admin;
use crate::client::call::Reply;
use crate::client::contract::Procedure;
use crate::client::span::About;
use crate::client::{Error, input};

/// One recovery to run: its id, and what it raises above and records.
/// Setters take `&mut self` and chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recovery {
    id: Uuid,
    floor: Option<i64>,
    database_identity: Option<Uuid>,
}

impl Recovery {
    /// A recovery with id `id`: repeating a recovery with the same id
    /// answers [`Recover::AlreadyRecovered`] and changes nothing, so one
    /// restore is recovered once.
    pub fn new(id: Uuid) -> Self {
        Recovery {
            id,
            floor: None,
            database_identity: None,
        }
    }

    /// The highest generation known to have been issued anywhere (e.g. the
    /// highest a downstream system stored), 0 to
    /// [`MAX_RECOVERY_FLOOR`](super::MAX_RECOVERY_FLOOR): the new
    /// generations start above it too.
    pub fn floor(&mut self, floor: i64) -> &mut Self {
        self.floor = Some(floor);
        self
    }

    /// The database identity (its recovery fork) this recovery answers,
    /// recorded so that `fencepost check` and `status` stop reporting the
    /// restore.
    pub fn database_identity(&mut self, identity: Uuid) -> &mut Self {
        self.database_identity = Some(identity);
        self
    }

    /// The recovery's id.
    pub fn id(&self) -> Uuid {
        self.id
    }

    pub(super) fn floor_given(&self) -> Option<i64> {
        self.floor
    }

    pub(super) fn database_identity_given(&self) -> Option<Uuid> {
        self.database_identity
    }
}

/// What `Recover` answered.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recover {
    /// Every generation was raised and every open lease voided (its holder's
    /// publish answers `Superseded`, its renew `Lost`).
    Recovered(RecoveryRecord),
    /// This recovery id already ran; nothing changed. The record is that
    /// first run's.
    AlreadyRecovered(RecoveryRecord),
}

impl Recover {
    /// The contract's name of the outcome: `Recovered` or `AlreadyRecovered`.
    pub fn name(&self) -> &'static str {
        match self {
            Recover::Recovered(_) => "Recovered",
            Recover::AlreadyRecovered(_) => "AlreadyRecovered",
        }
    }

    /// What the recovery did, this time or the first time.
    pub fn record(&self) -> &RecoveryRecord {
        match self {
            Recover::Recovered(record) | Recover::AlreadyRecovered(record) => record,
        }
    }
}

/// What a recovery did, as the database records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveryRecord {
    /// Every generation was raised to this one, so every next acquisition
    /// gets a higher one.
    pub generation_floor: i64,
    /// The open leases it voided.
    pub leases_voided: u64,
    /// When it ran, on the server clock.
    pub recovered_at: OffsetDateTime,
}

impl Admin {
    /// Runs `recovery`. Run it before services resume. Behind a transaction
    /// that stays open on a fence row the procedure gives up after 5 s
    /// ([`Error::Server`] 50129, or the engine's lock time-out);
    /// [`recover_watched`](Admin::recover_watched) names the session that
    /// holds it up. Needs `fence_recovery`.
    pub async fn recover(&self, recovery: &Recovery) -> Result<Recover, Error> {
        let id = input::recovery_id(recovery.id)?;
        let floor = input::recovery_floor(recovery.floor)?;
        let identity = input::database_identity(recovery.database_identity)?;
        let reply = self
            .client
            .call(Procedure::Recover, &[&id, &floor, &identity], About::default())
            .await?;
        recover(&reply)
    }
}

pub(super) fn recover(reply: &Reply) -> Result<Recover, Error> {
    let record = || -> Result<RecoveryRecord, Error> {
        let voided = reply.required::<i32>("LeasesVoided")?;
        Ok(RecoveryRecord {
            generation_floor: reply.required("GenerationFloor")?,
            leases_voided: u64::try_from(voided).map_err(|_| reply.unexpected(format!("LeasesVoided is {voided}")))?,
            recovered_at: reply.required_utc("RecoveredAtUtc")?,
        })
    };
    match reply.outcome()? {
        "Recovered" => Ok(Recover::Recovered(record()?)),
        "AlreadyRecovered" => Ok(Recover::AlreadyRecovered(record()?)),
        _ => Err(reply.unknown_outcome()),
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::super::test_rows::{big, int, reply, text, utc};
    use super::*;

    const AT: OffsetDateTime = datetime!(2025-03-01 12:00:00.5 UTC);

    fn row(outcome: &str) -> Reply {
        reply(
            Procedure::Recover,
            vec![
                text("Outcome", Some(outcome)),
                big("GenerationFloor", Some(1 << 40)),
                int("LeasesVoided", Some(3)),
                utc("RecoveredAtUtc", Some(AT)),
            ],
        )
    }

    #[test]
    fn a_first_and_a_repeated_recovery_carry_the_same_record() {
        let record = RecoveryRecord {
            generation_floor: 1 << 40,
            leases_voided: 3,
            recovered_at: AT,
        };
        let first = recover(&row("Recovered")).unwrap();
        assert_eq!(first, Recover::Recovered(record));
        let again = recover(&row("AlreadyRecovered")).unwrap();
        assert_eq!(again, Recover::AlreadyRecovered(record));
        assert_eq!((first.name(), again.name()), ("Recovered", "AlreadyRecovered"));
        assert_eq!(again.record(), &record);
    }

    #[test]
    fn an_unknown_outcome_is_outside_the_contract() {
        assert!(matches!(recover(&row("Restored")), Err(Error::UnexpectedReply { .. })));
    }

    #[test]
    fn a_recovery_starts_with_only_its_id_and_its_setters_chain() {
        let id = Uuid::new_v4();
        let identity = Uuid::new_v4();
        let mut recovery = Recovery::new(id);
        assert_eq!((recovery.floor, recovery.database_identity), (None, None));
        recovery.floor(7).database_identity(identity);
        assert_eq!(
            (recovery.id(), recovery.floor, recovery.database_identity),
            (id, Some(7), Some(identity))
        );
    }
}
