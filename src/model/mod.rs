//! The procedure contract (v1.8) as an executable model: a pure,
//! deterministic state machine of what the procedures answer and change,
//! with the server's clock supplied by the caller. No I/O, no locks, no
//! waiting.
//!
//! It is the contract's second statement: `docs/contract.md` says it in
//! prose, the procedures in `procedures/*.sql` in T-SQL, and this module in
//! Rust. A live test holds the three together: it runs generated schedules of
//! several workers' calls against the deployed procedures and against this
//! model, with the server's observed times fed in, and every answer and the
//! final state of every key must agree (`tests/it/live/model_differential.rs`).
//! With feature `fake`, `Client::fake` runs the client on it, for a
//! service's own unit tests.
//!
//! ```
//! use fencepost::model::{Acquired, Answer, Call, Fence, Published, Session};
//! use time::macros::datetime;
//! use uuid::Uuid;
//!
//! let mut fence = Fence::new();
//! let t0 = datetime!(2030-01-01 00:00 UTC);
//! let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
//! fence.call(&Call::provision("report"), Session::Autocommit, t0).unwrap();
//! let Ok(Answer::Acquire(Acquired::Acquired { generation, .. })) =
//!     fence.call(&Call::acquire("report", a, 30), Session::Autocommit, t0)
//! else {
//!     unreachable!()
//! };
//! // A's lease runs out; B takes over, and A's late publish is refused.
//! let t1 = t0 + time::Duration::seconds(31);
//! fence.call(&Call::acquire("report", b, 30), Session::Autocommit, t1).unwrap();
//! let late = Call::publish("report", a, generation, Uuid::new_v4(), "stale");
//! assert_eq!(
//!     fence.call(&late, Session::Autocommit, t1),
//!     Ok(Answer::Publish(Published::Superseded))
//! );
//! ```
//!
//! # The state
//!
//! Per key ([`Resource`]): a generation, an owner and a lease end, the last
//! accepted publish (generation, payload, time, source version), and the
//! key's source version. Beside the keys: the ended tenures of each key
//! ([`Tenure`], one per generation), a record per accepted publish by
//! operation id ([`PublishRecord`]), a record per operator command that named
//! an operation id and per retirement ([`CommandRecord`]), the recoveries by
//! id ([`RecoveryRecord`]) and the retirement mark ([`Retirement`]).
//!
//! # The rules
//!
//! Every call is [`Fence::call`]: the [`Call`] with its parameters as the
//! procedure declares them (each may be NULL), whether it runs inside the
//! caller's transaction ([`Session`]), and the server's clock when the
//! procedure reads it (after the row lock). Invalid input is a [`Refusal`]
//! (50101–50131), checked in the order of the procedure's parameters, and
//! changes nothing. Otherwise the answer is one of the outcomes in
//! [`Answer`]:
//!
//! - **A lease is held** by an owner whose lease ends after now. A lease
//!   that ran out stays in the row until someone acts; nothing revives it.
//! - **`Provision`** creates a row at the highest recovery floor and
//!   retirement mark (0 on a fresh database); an existing row is never
//!   touched (`Exists`).
//! - **`Acquire`** takes a free or expired lease at generation + 1 (an
//!   expired holder's tenure ends `Expired`, at its end); the owner still
//!   holding it gets the same generation with a lease from now; another
//!   live owner's lease is `Busy` until its end.
//! - **`Renew`** extends this owner's and generation's unexpired lease from
//!   now; anything else is `Lost`. **`RenewMany`** checks its whole list
//!   first (any bad value refuses the call, 50133, renewing nothing), then
//!   judges each lease as `Renew` would at the one clock the call read.
//! - **`Publish`**: an operation id recorded for this key and generation is
//!   `AlreadyPublished` (a replay, whatever else it says); recorded for
//!   another is 50107. Otherwise it is accepted only for the current owner
//!   and generation, unexpired, with nothing published in the generation and
//!   no newer source version; else, in this order, `NotProvisioned`,
//!   `Superseded` (another generation or owner is current),
//!   `GenerationAlreadyPublished`, `StaleSource` (only the current, unexpired
//!   holder), `Expired`. A refusal changes and records nothing. Accepted, it
//!   records the operation, raises the key's source version to its own (an
//!   unversioned publish leaves it), and with `@Release = 1` releases the
//!   lease (the tenure ends `Released`, published).
//! - **`Release`**: only the exact owner and generation, expired or not
//!   (then the tenure ends `Expired`, at its end); the generation stays.
//! - **`AssertHolder`**: only inside a transaction (50113); 50112 without a
//!   row, 50110 superseded, 50111 expired or released, then 50114 for an
//!   older source version; otherwise the source version rises to the one
//!   given, and the answer is `Holding`.
//! - **`ForceRelease`** raises the generation by one and clears the lease
//!   (tenure `ForceReleased`); **`ResetSourceVersion`** sets the source
//!   version; **`Retire`** (on its own only, not while held: 50131) deletes
//!   the key with its publish records and tenures and raises the retirement
//!   mark. With an operation id each records its answer; a replay answers
//!   the record and changes nothing, and the id used for another command,
//!   key or version is 50130.
//! - **`Recover`** raises every generation to the next multiple of 2^40 above
//!   the highest and the floor, voids every lease (a lease still running
//!   ends its tenure `Superseded` now, one that had run out `Expired` at its
//!   end), and is idempotent per recovery id.
//! - **`PruneTenure`**, **`PruneOutcomes`** (on their own only, 50128) delete
//!   tenures and records older than their window.
//! - **Lease sets** (contract 1.8) take their keys as JSON text, read as
//!   `OPENJSON` reads it: `AcquireSet`'s `@ResourceKeys` (50134) and the
//!   others' `@Leases` (50135), any item at fault refusing the whole call.
//!   Keys are judged and answered in key order, each as the single-key
//!   procedure judges it. **`AcquireSet`** grants every key or none (a
//!   key `Busy` or `NotProvisioned` leaves the others `Withheld`);
//!   **`RenewSet`** renews every key or none (`Lost`, the others
//!   `Withheld` at their old end); **`ReleaseSet`** releases each key held;
//!   **`PublishSet`** accepts every publish or none (an operation id used
//!   for another key or generation is 50107 naming the key; a replay is
//!   `AlreadyPublished`; with `@Release = 1` the replays' leases end too
//!   when any key was published); **`AssertHolderSet`** (in a transaction
//!   only, 50113) refuses with the first key not held, naming it (50112,
//!   50110, 50111).
//! - **`AcquireSlot`** extends the owner's live slot, else grants the lowest
//!   free slot below `@Slots` (keys `<resource>#<n>`, no leading zero) while
//!   fewer slot rows of any number are live than `@Slots`; otherwise `Busy`
//!   until the earliest live end, or `NotProvisioned`.
//! - **Readers** (`GetOutcome`, `ReadPublication`, `Inspect`, `ListLeases`,
//!   `LeaseHistory`, `ContractVersion`) change nothing and never show an
//!   owner.
//!
//! # What it leaves out
//!
//! Locks and waiting (a call behind another session's transaction, the 5 s
//! bounds, 50127, 50129, deadlocks), the caller's transaction and isolation
//! level (the model answers as if every call commits), the engine's own
//! errors, and `fence.Retirement` missing its row (50132). JSON is read as
//! SQL Server reads it: Babelfish's refusals of `\u0000` and half a
//! surrogate pair are left out (a Rust string cannot hold half a pair: such
//! a text is refused as not JSON), and so are field names matched without
//! regard to case under a case-insensitive database collation.

mod answer;
mod call;
mod check;
mod key_order;
mod lease;
mod operator;
mod publish;
mod publish_set;
mod read;
mod recovery;
mod refusal;
mod renew_many;
mod set;
mod set_answer;
mod set_input;
mod slot;
mod state;

use time::OffsetDateTime;

pub use answer::{
    Acquired, Answer, Ending, ForceReleased, History, Holding, Inspected, LeaseState, Listed, Outcome, Provisioned,
    Publication, Published, Recovered, Recovery, Released, Renewed, Reset, Retired, TenureRow,
};
pub use call::{Call, Session};
pub use check::{MAX_FLOOR, MAX_KEY_UNITS, MAX_LEASE_SECONDS, MAX_PRUNE_DAYS, MAX_ROWS};
pub use key_order::KeyOrder;
pub use read::CONTRACT_VERSION;
pub use recovery::EPOCH;
pub use refusal::Refusal;
pub use renew_many::{ListedLease, MAX_RENEW_MANY};
pub use set_answer::{SetAcquired, SetPublished, SetRenewed, SlotAcquired};
pub use set_input::MAX_SET_KEYS;
pub use slot::{MAX_SLOT_RESOURCE_UNITS, MAX_SLOTS, slot_number};
pub use state::{
    Command, CommandRecord, Fence, PublishRecord, RecoveryRecord, Resource, Retirement, Tenure, owner_hash,
};

impl Fence {
    /// Runs `call` as the procedure would with the server's clock at `now`
    /// (read after its row lock), inside a caller's transaction or not, and
    /// returns its answer or the error it raises. A refused call changes
    /// nothing.
    pub fn call(&mut self, call: &Call, session: Session, now: OffsetDateTime) -> Result<Answer, Refusal> {
        let now = check::server_time(now);
        Ok(match call {
            Call::Provision { resource_key } => Answer::Provision(self.provision(resource_key, now)?),
            Call::Acquire {
                resource_key,
                owner,
                lease_seconds,
            } => Answer::Acquire(self.acquire(resource_key, *owner, *lease_seconds, now)?),
            Call::Renew {
                resource_key,
                owner,
                generation,
                lease_seconds,
            } => Answer::Renew(self.renew(resource_key, *owner, *generation, *lease_seconds, now)?),
            Call::RenewMany { leases } => Answer::RenewMany(self.renew_many(leases, now)?),
            Call::Publish {
                resource_key,
                owner,
                generation,
                operation_id,
                payload,
                release,
                source_version,
            } => Answer::Publish(self.publish(
                resource_key,
                *owner,
                *generation,
                *operation_id,
                payload,
                *release,
                *source_version,
                now,
            )?),
            Call::Release {
                resource_key,
                owner,
                generation,
            } => Answer::Release(self.release(resource_key, *owner, *generation, now)?),
            Call::GetOutcome { operation_id } => Answer::GetOutcome(self.get_outcome(*operation_id)?),
            Call::ReadPublication { resource_key } => Answer::ReadPublication(self.read_publication(resource_key)?),
            Call::Inspect { resource_key } => Answer::Inspect(self.inspect(resource_key, now)?),
            Call::AssertHolder {
                resource_key,
                owner,
                generation,
                source_version,
            } => Answer::AssertHolder(self.assert_holder(
                session,
                resource_key,
                *owner,
                *generation,
                *source_version,
                now,
            )?),
            Call::ContractVersion => Answer::ContractVersion {
                major: CONTRACT_VERSION.0,
                minor: CONTRACT_VERSION.1,
            },
            Call::ListLeases {
                prefix,
                held_only,
                max_rows,
                after,
            } => Answer::ListLeases(self.list_leases(prefix, *held_only, *max_rows, after, now)?),
            Call::ForceRelease {
                resource_key,
                operation_id,
            } => Answer::ForceRelease(self.force_release(resource_key, *operation_id, now)?),
            Call::LeaseHistory { resource_key, max_rows } => {
                Answer::LeaseHistory(self.lease_history(resource_key, *max_rows, now)?)
            }
            Call::PruneTenure { older_than_days } => {
                let (deleted, ended_before) = self.prune_tenure(session, *older_than_days, now)?;
                Answer::PruneTenure { deleted, ended_before }
            }
            Call::Recover {
                recovery_id,
                floor,
                database_identity,
            } => Answer::Recover(self.recover(*recovery_id, *floor, *database_identity, now)?),
            Call::ResetSourceVersion {
                resource_key,
                source_version,
                operation_id,
            } => Answer::ResetSourceVersion(self.reset_source_version(
                resource_key,
                *source_version,
                *operation_id,
                now,
            )?),
            Call::Retire {
                resource_key,
                operation_id,
            } => Answer::Retire(self.retire(session, resource_key, *operation_id, now)?),
            Call::PruneOutcomes { older_than_days } => {
                let (publishes_deleted, commands_deleted, recorded_before) =
                    self.prune_outcomes(session, *older_than_days, now)?;
                Answer::PruneOutcomes {
                    publishes_deleted,
                    commands_deleted,
                    recorded_before,
                }
            }
            Call::AcquireSet {
                resource_keys,
                owner,
                lease_seconds,
            } => Answer::AcquireSet {
                rows: self.acquire_set(resource_keys, *owner, *lease_seconds, now)?,
                server_utc: now,
            },
            Call::RenewSet {
                leases,
                owner,
                lease_seconds,
            } => Answer::RenewSet(self.renew_set(leases, *owner, *lease_seconds, now)?),
            Call::ReleaseSet { leases, owner } => Answer::ReleaseSet(self.release_set(leases, *owner, now)?),
            Call::PublishSet { leases, owner, release } => {
                Answer::PublishSet(self.publish_set(leases, *owner, *release, now)?)
            }
            Call::AssertHolderSet { leases, owner } => {
                Answer::AssertHolderSet(self.assert_holder_set(session, leases, *owner, now)?)
            }
            Call::AcquireSlot {
                resource_key,
                slots,
                owner,
                lease_seconds,
            } => Answer::AcquireSlot(self.acquire_slot(resource_key, *slots, *owner, *lease_seconds, now)?),
        })
    }
}

/// A fence and a clock for the tests of each rule.
#[cfg(test)]
mod run {
    use time::macros::datetime;
    use time::{Duration, OffsetDateTime};

    use super::{Answer, Call, Fence, Refusal, Session};

    pub(super) const T0: OffsetDateTime = datetime!(2030-01-01 00:00 UTC);

    pub(super) struct Run {
        pub(super) fence: Fence,
        pub(super) now: OffsetDateTime,
    }

    impl Run {
        /// An empty fence at `T0`, with `keys` provisioned.
        pub(super) fn with(keys: &[&str]) -> Run {
            let mut run = Run {
                fence: Fence::new(),
                now: T0,
            };
            for key in keys {
                run.ok(&Call::provision(key));
            }
            run
        }

        pub(super) fn later(&mut self, seconds: i64) {
            self.now += Duration::seconds(seconds);
        }

        pub(super) fn call(&mut self, call: &Call) -> Result<Answer, Refusal> {
            self.fence.call(call, Session::Autocommit, self.now)
        }

        pub(super) fn in_transaction(&mut self, call: &Call) -> Result<Answer, Refusal> {
            self.fence.call(call, Session::InTransaction, self.now)
        }

        pub(super) fn ok(&mut self, call: &Call) -> Answer {
            self.call(call).unwrap_or_else(|refusal| panic!("{call:?}: {refusal}"))
        }

        /// The error number of a refused call, with the fence unchanged.
        pub(super) fn refused(&mut self, call: &Call, session: Session) -> u32 {
            let before = self.fence.clone();
            let number = match self.fence.call(call, session, self.now) {
                Err(refusal) => refusal.number,
                Ok(answer) => panic!("{call:?} answered {answer:?}"),
            };
            assert_eq!(self.fence, before, "a refusal changes nothing");
            number
        }

        /// Acquires `key` as `owner` for `seconds` and returns the generation.
        pub(super) fn acquired(&mut self, key: &str, owner: uuid::Uuid, seconds: i32) -> i64 {
            match self.ok(&Call::acquire(key, owner, seconds)) {
                Answer::Acquire(super::Acquired::Acquired { generation, .. }) => generation,
                other => panic!("expected Acquired, got {other:?}"),
            }
        }

        pub(super) fn at(&self, seconds: i64) -> OffsetDateTime {
            T0 + Duration::seconds(seconds)
        }
    }
}
