//! Generated schedules: several workers' calls on a few keys, one after
//! another, with waits that let leases run out. A step names its lease,
//! operation id or command symbolically ("this worker's last lease on the
//! key", "an operation id used before"), so a schedule shrinks to a shorter
//! one that still means something; [`Ctx`] turns each step into the call it
//! makes from what the earlier calls answered.

use std::collections::HashMap;
use std::time::Duration;

use fencepost::model::{Acquired, Answer, Call, ListedLease, Session, SetAcquired, SlotAcquired};
use proptest::prelude::*;
use uuid::Uuid;

/// The keys a schedule works on. `k` and `k\u{1}` differ only by a
/// character below a space after a shared prefix: where SQL Server's
/// padded comparison and plain code-point order sort two keys apart.
/// `k[j]%_` holds the characters `LIKE` reads as a pattern. `s` is a
/// resource with slots: `s#0` and `s#1` its slot keys, `s#01` a key that is
/// no slot (a leading zero), and no `s#2`, so a third slot is never granted.
pub const KEYS: [&str; 8] = ["k", "k\u{1}", "j", "k[j]%_", "s", "s#0", "s#1", "s#01"];
/// The index in [`KEYS`] of the resource with slots.
pub const SLOT_RESOURCE: usize = 4;
/// The database identities a `Recover` step may record: a replay of a
/// recovery id with another one must answer the first and record nothing.
pub const IDENTITIES: [Uuid; 2] = [
    Uuid::from_u128(0x0f3a_5c1e_0000_4000_8000_0000_0000_00a1),
    Uuid::from_u128(0x0f3a_5c1e_0000_4000_8000_0000_0000_00b2),
];
/// The keys every schedule starts with provisioned.
pub const PROVISIONED: [usize; 7] = [0, 2, 3, 4, 5, 6, 7];
/// The prefixes a `ListLeases` step (and the final state) asks for. Matched
/// as characters, `k%` and `k_` list nothing and `k[j]` lists `k[j]%_`; read
/// as a pattern, `k%` would list every `k` key, `k_` would list `k\u{1}` and
/// `k[j]%_`, and `k[j]` (`kj…`) none.
pub const PREFIXES: [&str; 8] = ["", "k", "j", "x", "k%", "k_", "k[j]", "s#"];
/// Workers, each on a session of its own.
pub const WORKERS: usize = 2;

/// Which key a lease step works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// The key of the worker's last acquired lease (the first key before one).
    Leased,
    /// One of [`KEYS`].
    Named(usize),
}

/// Which lease a step presents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    /// The worker's last acquired lease on the key; for a worker that has
    /// none, the last one anybody acquired on it (presented from this
    /// worker's session, as a process that took over the work would).
    Own,
    /// Its owner with the generation before (at least 1).
    Stale,
    /// A fresh owner with the generation of the worker's lease.
    Stranger,
}

/// An operation id, recovery id or operator command id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Id {
    Fresh,
    /// One used before in the schedule, counted back from the last (modulo
    /// how many there are), or a fresh one when none was.
    Again(usize),
}

/// A call the procedure must refuse for its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalid {
    KeyEndsInSpace,
    EmptyKey,
    LongKey,
    NoLeaseSeconds,
    LeaseTooLong,
    GenerationZero,
    NilOwner,
    NilOperationId,
    NullPayload,
    NullRelease,
    NegativeSourceVersion,
    ListNoRows,
    NegativeFloor,
    PruneZeroDays,
    SetKeysEmpty,
    SetKeysNotStrings,
    SetKeysNotArray,
    SetKeyTwice,
    SetKeyEndsInSpace,
    SetLeasesNotObjects,
    SetKeyMissing,
    SetGenerationFraction,
    SetGenerationNull,
    SetGenerationZeroText,
    SetOperationIdShort,
    SetOperationIdTwice,
    SetPayloadMissing,
    SetReleaseNull,
    SetSecondsBeforeOwner,
    SlotsZero,
    SlotResourceLong,
    SlotNilOwner,
}

/// One step of one worker (`by`, its session).
#[derive(Clone, Debug)]
pub enum Step {
    Provision {
        by: usize,
        key: usize,
    },
    Acquire {
        by: usize,
        key: Key,
        seconds: i32,
        again: bool,
    },
    Renew {
        by: usize,
        key: Key,
        lease: Lease,
        seconds: i32,
    },
    /// One `RenewMany` of several keys' leases of worker `by`.
    RenewMany {
        by: usize,
        keys: Vec<usize>,
        lease: Lease,
        seconds: i32,
    },
    Publish {
        by: usize,
        key: Key,
        lease: Lease,
        op: Id,
        release: bool,
        version: Option<i64>,
    },
    Release {
        by: usize,
        key: Key,
        lease: Lease,
    },
    AssertHolder {
        by: usize,
        key: Key,
        lease: Lease,
        version: Option<i64>,
        in_transaction: bool,
    },
    Inspect {
        by: usize,
        key: usize,
    },
    ReadPublication {
        by: usize,
        key: usize,
    },
    GetOutcome {
        by: usize,
        op: Id,
    },
    LeaseHistory {
        by: usize,
        key: usize,
        max_rows: i32,
    },
    ListLeases {
        by: usize,
        prefix: usize,
        held_only: bool,
        max_rows: i32,
        after: Option<usize>,
    },
    ForceRelease {
        by: usize,
        key: usize,
        command: Option<Id>,
    },
    ResetSourceVersion {
        by: usize,
        key: usize,
        version: Option<i64>,
        command: Option<Id>,
    },
    Retire {
        by: usize,
        key: usize,
        command: Option<Id>,
        in_transaction: bool,
    },
    Recover {
        by: usize,
        recovery: Id,
        floor: Option<i64>,
        /// `@DatabaseIdentity`: none, or one of [`IDENTITIES`].
        identity: Option<usize>,
    },
    PruneTenure {
        by: usize,
        in_transaction: bool,
    },
    PruneOutcomes {
        by: usize,
        in_transaction: bool,
    },
    /// Every worker idle for this long (real time: the server's clock is
    /// the only judge of a lease's end).
    Wait {
        millis: u64,
    },
    /// Every worker idle until the lease on the key has run out on the
    /// server's clock (no wait when nobody holds it).
    WaitOut {
        by: usize,
        key: Key,
    },
    Invalid {
        by: usize,
        key: usize,
        what: Invalid,
    },
    /// One `AcquireSet` of `keys`, in the order given; `again` as the owner
    /// of the worker's last one.
    AcquireSet {
        by: usize,
        keys: Vec<usize>,
        seconds: i32,
        again: bool,
    },
    /// A set call on the worker's last acquired set (presented as `lease`
    /// says, each key's generation alike).
    RenewSet {
        by: usize,
        lease: Lease,
        seconds: i32,
    },
    ReleaseSet {
        by: usize,
        lease: Lease,
    },
    /// `op`: fresh ids, or `Again(0)` the ids of the worker's last
    /// `PublishSet` (a replay), or `Again(n)` an id used before for the
    /// first key.
    PublishSet {
        by: usize,
        lease: Lease,
        op: Id,
        release: bool,
    },
    AssertHolderSet {
        by: usize,
        lease: Lease,
        in_transaction: bool,
    },
    /// One `AcquireSlot` of the resource with slots; `again` as the owner of
    /// the worker's last one.
    AcquireSlot {
        by: usize,
        slots: i32,
        seconds: i32,
        again: bool,
    },
}

impl Invalid {
    /// Where the set and slot procedures' input begins in [`Invalid::ALL`].
    const FIRST_SET: usize = 14;
    const ALL: [Invalid; 32] = [
        Invalid::KeyEndsInSpace,
        Invalid::EmptyKey,
        Invalid::LongKey,
        Invalid::NoLeaseSeconds,
        Invalid::LeaseTooLong,
        Invalid::GenerationZero,
        Invalid::NilOwner,
        Invalid::NilOperationId,
        Invalid::NullPayload,
        Invalid::NullRelease,
        Invalid::NegativeSourceVersion,
        Invalid::ListNoRows,
        Invalid::NegativeFloor,
        Invalid::PruneZeroDays,
        Invalid::SetKeysEmpty,
        Invalid::SetKeysNotStrings,
        Invalid::SetKeysNotArray,
        Invalid::SetKeyTwice,
        Invalid::SetKeyEndsInSpace,
        Invalid::SetLeasesNotObjects,
        Invalid::SetKeyMissing,
        Invalid::SetGenerationFraction,
        Invalid::SetGenerationNull,
        Invalid::SetGenerationZeroText,
        Invalid::SetOperationIdShort,
        Invalid::SetOperationIdTwice,
        Invalid::SetPayloadMissing,
        Invalid::SetReleaseNull,
        Invalid::SetSecondsBeforeOwner,
        Invalid::SlotsZero,
        Invalid::SlotResourceLong,
        Invalid::SlotNilOwner,
    ];
}

impl Step {
    /// The worker whose session makes the call (or whose lease a wait
    /// waits out); `None` for a plain wait.
    pub fn by(&self) -> Option<usize> {
        self.clone().by_mut().map(|by| *by)
    }

    /// The worker field, to reassign it.
    fn by_mut(&mut self) -> Option<&mut usize> {
        use Step::*;
        match self {
            Provision { by, .. }
            | Acquire { by, .. }
            | Renew { by, .. }
            | RenewMany { by, .. }
            | Publish { by, .. }
            | Release { by, .. }
            | AssertHolder { by, .. }
            | Inspect { by, .. }
            | ReadPublication { by, .. }
            | GetOutcome { by, .. }
            | LeaseHistory { by, .. }
            | ListLeases { by, .. }
            | ForceRelease { by, .. }
            | ResetSourceVersion { by, .. }
            | Retire { by, .. }
            | Recover { by, .. }
            | PruneTenure { by, .. }
            | PruneOutcomes { by, .. }
            | WaitOut { by, .. }
            | Invalid { by, .. }
            | AcquireSet { by, .. }
            | RenewSet { by, .. }
            | ReleaseSet { by, .. }
            | PublishSet { by, .. }
            | AssertHolderSet { by, .. }
            | AcquireSlot { by, .. } => Some(by),
            Wait { .. } => None,
        }
    }

    /// Points a lease step (or a wait-out) at `key`.
    fn set_key(&mut self, new: Key) {
        use Step::*;
        if let Acquire { key, .. }
        | Renew { key, .. }
        | Publish { key, .. }
        | Release { key, .. }
        | AssertHolder { key, .. }
        | WaitOut { key, .. } = self
        {
            *key = new;
        }
        // A renewal of many takes the episode's key with the others it names.
        if let (RenewMany { keys, .. }, Key::Named(index)) = (self, new)
            && !keys.contains(&index)
        {
            keys.insert(0, index);
        }
    }

    pub fn wait(&self) -> Option<Duration> {
        match self {
            Step::Wait { millis } => Some(Duration::from_millis(*millis)),
            _ => None,
        }
    }
}

/// What a schedule's earlier calls answered, as far as later steps need it.
#[derive(Debug, Default)]
pub struct Ctx {
    /// Each worker's last acquired lease per key: owner and generation.
    leases: HashMap<(usize, usize), (Uuid, i64)>,
    /// The key of each worker's last acquired lease.
    leased: HashMap<usize, usize>,
    /// The last lease anybody acquired on each key.
    latest: HashMap<usize, (Uuid, i64)>,
    /// Every publish operation id sent, in order.
    pub operations: Vec<Uuid>,
    commands: Vec<Uuid>,
    recoveries: Vec<Uuid>,
    /// Each worker's last acquired set: its owner, and each key with its
    /// generation.
    sets: HashMap<usize, (Uuid, Vec<(usize, i64)>)>,
    /// The owner of each worker's last `AcquireSet` and `AcquireSlot`.
    set_owners: HashMap<usize, Uuid>,
    slot_owners: HashMap<usize, Uuid>,
    /// The operation ids of each worker's last `PublishSet`.
    set_publishes: HashMap<usize, Vec<Uuid>>,
}

/// The index in [`KEYS`] of `key`.
fn index(key: &str) -> Option<usize> {
    KEYS.iter().position(|k| *k == key)
}

fn again(used: &[Uuid], id: Id) -> Uuid {
    match id {
        Id::Again(back) if !used.is_empty() => used[used.len() - 1 - back % used.len()],
        _ => Uuid::new_v4(),
    }
}

fn named(key: usize) -> Option<String> {
    Some(KEYS[key].to_string())
}

impl Ctx {
    /// The index in [`KEYS`] of `key` for worker `by`.
    pub fn key(&self, by: usize, key: Key) -> usize {
        match key {
            Key::Leased => self.leased.get(&by).copied().unwrap_or(0),
            Key::Named(key) => key,
        }
    }

    fn lease(&self, by: usize, key: usize, lease: Lease) -> (Uuid, i64) {
        let own = self.leases.get(&(by, key)).or_else(|| self.latest.get(&key)).copied();
        match (lease, own) {
            (Lease::Own, Some(own)) => own,
            (Lease::Stale, Some((owner, generation))) => (owner, (generation - 1).max(1)),
            (Lease::Stranger, Some((_, generation))) => (Uuid::new_v4(), generation),
            (_, None) => (Uuid::new_v4(), 1),
        }
    }

    /// The worker's last acquired set as `lease` presents it; a stranger's
    /// set of the first key before it has one.
    fn set(&self, by: usize, lease: Lease) -> (Uuid, Vec<(&'static str, i64)>) {
        let Some((owner, keys)) = self.sets.get(&by) else {
            return (Uuid::new_v4(), vec![(KEYS[0], 1)]);
        };
        let keys = |less: i64| keys.iter().map(|&(k, g)| (KEYS[k], (g - less).max(1))).collect();
        match lease {
            Lease::Own => (*owner, keys(0)),
            Lease::Stale => (*owner, keys(1)),
            Lease::Stranger => (Uuid::new_v4(), keys(0)),
        }
    }

    /// The call `step` makes now, and whether inside a transaction; `None`
    /// for a wait.
    pub fn resolve(&mut self, step: &Step) -> Option<(Call, Session)> {
        let session = |inside: bool| {
            if inside {
                Session::InTransaction
            } else {
                Session::Autocommit
            }
        };
        let auto = Session::Autocommit;
        Some(match *step {
            Step::Wait { .. } | Step::WaitOut { .. } => return None,
            Step::Provision { key: k, .. } => (Call::Provision { resource_key: named(k) }, auto),
            Step::Acquire {
                by,
                key,
                seconds,
                again,
            } => {
                let k = self.key(by, key);
                let owner = match self.leases.get(&(by, k)) {
                    Some((owner, _)) if again => *owner,
                    _ => Uuid::new_v4(),
                };
                (Call::acquire(KEYS[k], owner, seconds), auto)
            }
            Step::Renew {
                by,
                key,
                lease,
                seconds,
            } => {
                let k = self.key(by, key);
                let (owner, generation) = self.lease(by, k, lease);
                (Call::renew(KEYS[k], owner, generation, seconds), auto)
            }
            Step::RenewMany {
                by,
                ref keys,
                lease,
                seconds,
            } => {
                let leases = keys
                    .iter()
                    .map(|&k| {
                        let (owner, generation) = self.lease(by, k, lease);
                        ListedLease::new(KEYS[k], owner, generation, seconds)
                    })
                    .collect();
                (Call::RenewMany { leases: Some(leases) }, auto)
            }
            Step::Publish {
                by,
                key,
                lease,
                op,
                release,
                version,
            } => {
                let k = self.key(by, key);
                let (owner, generation) = self.lease(by, k, lease);
                let operation = again(&self.operations, op);
                self.operations.push(operation);
                let call = Call::Publish {
                    resource_key: named(k),
                    owner: Some(owner),
                    generation: Some(generation),
                    operation_id: Some(operation),
                    payload: Some(format!("w{by} g{generation} {}", operation.simple())),
                    release: Some(release),
                    source_version: version,
                };
                (call, auto)
            }
            Step::Release { by, key, lease } => {
                let k = self.key(by, key);
                let (owner, generation) = self.lease(by, k, lease);
                (Call::release(KEYS[k], owner, generation), auto)
            }
            Step::AssertHolder {
                by,
                key,
                lease,
                version,
                in_transaction,
            } => {
                let k = self.key(by, key);
                let (owner, generation) = self.lease(by, k, lease);
                let call = Call::AssertHolder {
                    resource_key: named(k),
                    owner: Some(owner),
                    generation: Some(generation),
                    source_version: version,
                };
                (call, session(in_transaction))
            }
            Step::Inspect { key: k, .. } => (Call::inspect(KEYS[k]), auto),
            Step::ReadPublication { key: k, .. } => (Call::read_publication(KEYS[k]), auto),
            Step::GetOutcome { op, .. } => (Call::get_outcome(again(&self.operations, op)), auto),
            Step::LeaseHistory { key: k, max_rows, .. } => (
                Call::LeaseHistory {
                    resource_key: named(k),
                    max_rows: Some(max_rows),
                },
                auto,
            ),
            Step::ListLeases {
                prefix,
                held_only,
                max_rows,
                after,
                ..
            } => (
                Call::ListLeases {
                    prefix: Some(PREFIXES[prefix].to_string()),
                    held_only: Some(held_only),
                    max_rows: Some(max_rows),
                    after: after.and_then(named),
                },
                auto,
            ),
            Step::ForceRelease { key: k, command, .. } => (
                Call::ForceRelease {
                    resource_key: named(k),
                    operation_id: self.command(command),
                },
                auto,
            ),
            Step::ResetSourceVersion {
                key: k,
                version,
                command,
                ..
            } => (
                Call::ResetSourceVersion {
                    resource_key: named(k),
                    source_version: version,
                    operation_id: self.command(command),
                },
                auto,
            ),
            Step::Retire {
                key: k,
                command,
                in_transaction,
                ..
            } => (
                Call::Retire {
                    resource_key: named(k),
                    operation_id: self.command(command),
                },
                session(in_transaction),
            ),
            Step::Recover {
                recovery,
                floor,
                identity,
                ..
            } => {
                let id = again(&self.recoveries, recovery);
                self.recoveries.push(id);
                (
                    Call::Recover {
                        recovery_id: Some(id),
                        floor,
                        database_identity: identity.map(|i| IDENTITIES[i]),
                    },
                    auto,
                )
            }
            Step::PruneTenure { in_transaction, .. } => (
                Call::PruneTenure {
                    older_than_days: Some(1),
                },
                session(in_transaction),
            ),
            Step::PruneOutcomes { in_transaction, .. } => (
                Call::PruneOutcomes {
                    older_than_days: Some(1),
                },
                session(in_transaction),
            ),
            Step::Invalid { by, key: k, what } => (self.invalid(by, k, what), auto),
            Step::AcquireSet {
                by,
                ref keys,
                seconds,
                again,
            } => {
                let owner = match self.set_owners.get(&by) {
                    Some(owner) if again => *owner,
                    _ => Uuid::new_v4(),
                };
                self.set_owners.insert(by, owner);
                let names: Vec<&str> = keys.iter().map(|&k| KEYS[k]).collect();
                (Call::acquire_set(&names, owner, seconds), auto)
            }
            Step::RenewSet { by, lease, seconds } => {
                let (owner, leases) = self.set(by, lease);
                (Call::renew_set(&leases, owner, seconds), auto)
            }
            Step::ReleaseSet { by, lease } => {
                let (owner, leases) = self.set(by, lease);
                (Call::release_set(&leases, owner), auto)
            }
            Step::AssertHolderSet {
                by,
                lease,
                in_transaction,
            } => {
                let (owner, leases) = self.set(by, lease);
                (Call::assert_holder_set(&leases, owner), session(in_transaction))
            }
            Step::PublishSet { by, lease, op, release } => {
                let (owner, leases) = self.set(by, lease);
                let last = self.set_publishes.get(&by).filter(|ids| ids.len() == leases.len());
                let ids: Vec<Uuid> = match (op, last) {
                    (Id::Again(0), Some(last)) => last.clone(),
                    (Id::Again(back), _) if back > 0 => std::iter::once(again(&self.operations, op))
                        .chain(std::iter::repeat_with(Uuid::new_v4))
                        .take(leases.len())
                        .collect(),
                    _ => leases.iter().map(|_| Uuid::new_v4()).collect(),
                };
                self.operations.extend(&ids);
                self.set_publishes.insert(by, ids.clone());
                let payloads: Vec<String> = leases
                    .iter()
                    .zip(&ids)
                    .map(|((_, generation), id)| format!("w{by} g{generation} {}", id.simple()))
                    .collect();
                let publishes: Vec<(&str, i64, Uuid, &str)> = leases
                    .iter()
                    .zip(&ids)
                    .zip(&payloads)
                    .map(|(((key, generation), id), payload)| (*key, *generation, *id, payload.as_str()))
                    .collect();
                (Call::publish_set(&publishes, owner, release), auto)
            }
            Step::AcquireSlot {
                by,
                slots,
                seconds,
                again,
            } => {
                let owner = match self.slot_owners.get(&by) {
                    Some(owner) if again => *owner,
                    _ => Uuid::new_v4(),
                };
                self.slot_owners.insert(by, owner);
                (Call::acquire_slot(KEYS[SLOT_RESOURCE], slots, owner, seconds), auto)
            }
        })
    }

    fn command(&mut self, id: Option<Id>) -> Option<Uuid> {
        let id = again(&self.commands, id?);
        self.commands.push(id);
        Some(id)
    }

    fn invalid(&mut self, by: usize, k: usize, what: Invalid) -> Call {
        let (owner, generation) = self.lease(by, k, Lease::Own);
        let publish = |operation_id: Option<Uuid>, payload: Option<String>, release, version| Call::Publish {
            resource_key: named(k),
            owner: Some(owner),
            generation: Some(generation),
            operation_id,
            payload,
            release,
            source_version: version,
        };
        let fresh = Some(Uuid::new_v4());
        let text = Some(String::from("x"));
        let keys = |json: &str| Call::AcquireSet {
            resource_keys: Some(json.to_string()),
            owner: Some(owner),
            lease_seconds: Some(1),
        };
        let leases = |json: &str| Call::RenewSet {
            leases: Some(json.to_string()),
            owner: Some(owner),
            lease_seconds: Some(1),
        };
        match what {
            Invalid::KeyEndsInSpace => Call::inspect(&format!("{} ", KEYS[k])),
            Invalid::EmptyKey => Call::provision(""),
            Invalid::LongKey => Call::read_publication(&"k".repeat(257)),
            Invalid::NoLeaseSeconds => Call::Acquire {
                resource_key: named(k),
                owner: Some(owner),
                lease_seconds: None,
            },
            Invalid::LeaseTooLong => Call::renew(KEYS[k], owner, generation, 86_401),
            Invalid::GenerationZero => Call::release(KEYS[k], owner, 0),
            Invalid::NilOwner => Call::acquire(KEYS[k], Uuid::nil(), 1),
            Invalid::NilOperationId => publish(Some(Uuid::nil()), text, Some(false), None),
            Invalid::NullPayload => publish(fresh, None, Some(false), None),
            Invalid::NullRelease => publish(fresh, text, None, None),
            Invalid::NegativeSourceVersion => publish(fresh, text, Some(false), Some(-1)),
            Invalid::ListNoRows => Call::ListLeases {
                prefix: Some(String::new()),
                held_only: Some(false),
                max_rows: Some(0),
                after: None,
            },
            Invalid::NegativeFloor => Call::Recover {
                recovery_id: fresh,
                floor: Some(-1),
                database_identity: None,
            },
            Invalid::PruneZeroDays => Call::PruneTenure {
                older_than_days: Some(0),
            },
            Invalid::SetKeysEmpty => keys("[]"),
            Invalid::SetKeysNotStrings => keys(r#"["k", 1]"#),
            Invalid::SetKeysNotArray => keys(r#"{"k": 1}"#),
            Invalid::SetKeyTwice => keys(r#"["k", "j", "k"]"#),
            Invalid::SetKeyEndsInSpace => keys(r#"["k", "j "]"#),
            Invalid::SetLeasesNotObjects => leases(r#"["k"]"#),
            Invalid::SetKeyMissing => leases(r#"[{"Generation": 1}]"#),
            Invalid::SetGenerationFraction => leases(r#"[{"ResourceKey": "k", "Generation": 1.5}]"#),
            Invalid::SetGenerationNull => leases(r#"[{"ResourceKey": "k", "Generation": null}]"#),
            Invalid::SetGenerationZeroText => leases(r#"[{"ResourceKey": "k", "Generation": "0"}]"#),
            Invalid::SetOperationIdShort => Call::PublishSet {
                leases: Some(format!(
                    r#"[{{"ResourceKey": "k", "Generation": 1, "OperationId": "{}", "Payload": "x"}}]"#,
                    Uuid::new_v4().simple()
                )),
                owner: Some(owner),
                release: Some(false),
            },
            Invalid::SetOperationIdTwice => {
                let id = Uuid::new_v4();
                let leases = [("k", generation, id, "x"), ("j", generation, id, "y")];
                Call::publish_set(&leases, owner, false)
            }
            Invalid::SetPayloadMissing => Call::PublishSet {
                leases: Some(format!(
                    r#"[{{"ResourceKey": "k", "Generation": 1, "OperationId": "{}"}}]"#,
                    Uuid::new_v4()
                )),
                owner: Some(owner),
                release: Some(false),
            },
            Invalid::SetReleaseNull => {
                let Call::PublishSet { leases, owner, .. } =
                    Call::publish_set(&[(KEYS[k], generation, Uuid::new_v4(), "x")], owner, false)
                else {
                    unreachable!()
                };
                Call::PublishSet {
                    leases,
                    owner,
                    release: None,
                }
            }
            Invalid::SetSecondsBeforeOwner => {
                let Call::RenewSet { leases, .. } = Call::renew_set(&[(KEYS[k], generation)], owner, 1) else {
                    unreachable!()
                };
                Call::RenewSet {
                    leases,
                    owner: Some(Uuid::nil()),
                    lease_seconds: Some(0),
                }
            }
            Invalid::SlotsZero => Call::acquire_slot(KEYS[SLOT_RESOURCE], 0, owner, 1),
            Invalid::SlotResourceLong => Call::acquire_slot(&"s".repeat(252), 1, owner, 1),
            Invalid::SlotNilOwner => Call::acquire_slot(KEYS[SLOT_RESOURCE], 1, Uuid::nil(), 1),
        }
    }

    /// Takes in what `call` answered: an acquired lease becomes the
    /// worker's lease on the key; an acquired set or slot, the worker's
    /// leases on its keys (the first its leased key).
    pub fn learn(&mut self, step: &Step, call: &Call, answer: &Result<Answer, (u32, String)>) {
        let by = step.by().unwrap_or(0);
        let take = |ctx: &mut Ctx, owner: Uuid, keys: &[(usize, i64)]| {
            for &(key, generation) in keys {
                ctx.leases.insert((by, key), (owner, generation));
                ctx.latest.insert(key, (owner, generation));
            }
            if let Some(&(first, _)) = keys.first() {
                ctx.leased.insert(by, first);
            }
        };
        match (call, answer) {
            (Call::AcquireSet { owner: Some(owner), .. }, Ok(Answer::AcquireSet { rows, .. })) => {
                let keys: Vec<(usize, i64)> = rows
                    .iter()
                    .filter_map(|(key, row)| match row {
                        SetAcquired::Acquired { generation, .. } => Some((index(key)?, *generation)),
                        _ => None,
                    })
                    .collect();
                if keys.len() == rows.len() {
                    take(self, *owner, &keys);
                    self.sets.insert(by, (*owner, keys));
                }
            }
            (
                Call::AcquireSlot { owner: Some(owner), .. },
                Ok(Answer::AcquireSlot(SlotAcquired::Acquired {
                    resource_key,
                    generation,
                    ..
                })),
            ) => {
                if let Some(key) = index(resource_key) {
                    take(self, *owner, &[(key, *generation)]);
                }
            }
            _ => {}
        }
        if let (Step::Acquire { by, key, .. }, Call::Acquire { owner: Some(owner), .. }) = (step, call)
            && let Ok(Answer::Acquire(Acquired::Acquired { generation, .. })) = answer
        {
            let key = self.key(*by, *key);
            self.leases.insert((*by, key), (*owner, *generation));
            self.latest.insert(key, (*owner, *generation));
            self.leased.insert(*by, key);
        }
    }
}

fn worker() -> impl Strategy<Value = usize> {
    0..WORKERS
}

fn key_index() -> impl Strategy<Value = usize> {
    // The odd key less often: most steps should meet each other.
    prop_oneof![4 => Just(0usize), 1 => Just(1usize), 3 => Just(2usize), 1 => Just(3usize)]
}

fn lease_key() -> impl Strategy<Value = Key> {
    prop_oneof![3 => Just(Key::Leased), 1 => key_index().prop_map(Key::Named)]
}

fn lease() -> impl Strategy<Value = Lease> {
    prop_oneof![6 => Just(Lease::Own), 1 => Just(Lease::Stale), 1 => Just(Lease::Stranger)]
}

fn id() -> impl Strategy<Value = Id> {
    prop_oneof![3 => Just(Id::Fresh), 1 => (0usize..4).prop_map(Id::Again)]
}

fn version() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![1 => Just(None), 4 => (0i64..3).prop_map(Some)]
}

fn seconds() -> impl Strategy<Value = i32> {
    // Mostly one second, which one wait outlasts.
    prop_oneof![3 => Just(1i32), 1 => Just(2i32)]
}

fn invalid() -> impl Strategy<Value = Invalid> {
    proptest::sample::select(Invalid::ALL.to_vec())
}

/// One step, weighted towards the lease calls that meet each other.
pub fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        1 => (worker(), key_index()).prop_map(|(by, key)| Step::Provision { by, key }),
        4 => (worker(), lease_key(), seconds(), proptest::bool::weighted(0.2))
            .prop_map(|(by, key, seconds, again)| Step::Acquire { by, key, seconds, again }),
        5 => (worker(), lease_key(), lease(), seconds())
            .prop_map(|(by, key, lease, seconds)| Step::Renew { by, key, lease, seconds }),
        2 => (worker(), proptest::sample::subsequence((0..KEYS.len()).collect::<Vec<_>>(), 1..=3), lease(), seconds())
            .prop_map(|(by, keys, lease, seconds)| Step::RenewMany { by, keys, lease, seconds }),
        5 => (worker(), lease_key(), lease(), id(), proptest::bool::ANY, version()).prop_map(
            |(by, key, lease, op, release, version)| Step::Publish { by, key, lease, op, release, version }
        ),
        2 => (worker(), lease_key(), lease()).prop_map(|(by, key, lease)| Step::Release { by, key, lease }),
        2 => (worker(), lease_key(), lease(), version(), proptest::bool::weighted(0.85)).prop_map(
            |(by, key, lease, version, in_transaction)| Step::AssertHolder { by, key, lease, version, in_transaction }
        ),
        // Waiting a lease out, what the rules about an ended lease need
        // before the next call, costs only the lease's time left.
        4 => (worker(), lease_key()).prop_map(|(by, key)| Step::WaitOut { by, key }),
        1 => Just(Step::Wait { millis: 300 }),
        1 => (worker(), key_index()).prop_map(|(by, key)| Step::Inspect { by, key }),
        1 => (worker(), key_index()).prop_map(|(by, key)| Step::ReadPublication { by, key }),
        1 => (worker(), id()).prop_map(|(by, op)| Step::GetOutcome { by, op }),
        1 => (worker(), key_index(), 1i32..4).prop_map(|(by, key, max_rows)| Step::LeaseHistory { by, key, max_rows }),
        1 => (worker(), 0..PREFIXES.len(), proptest::bool::ANY, 1i32..4, proptest::option::of(key_index())).prop_map(
            |(by, prefix, held_only, max_rows, after)| Step::ListLeases { by, prefix, held_only, max_rows, after }
        ),
        1 => (worker(), key_index(), proptest::option::of(id()))
            .prop_map(|(by, key, command)| Step::ForceRelease { by, key, command }),
        1 => (worker(), key_index(), version(), proptest::option::of(id())).prop_map(
            |(by, key, version, command)| Step::ResetSourceVersion { by, key, version, command }
        ),
        1 => (worker(), key_index(), proptest::option::of(id()), proptest::bool::weighted(0.1)).prop_map(
            |(by, key, command, in_transaction)| Step::Retire { by, key, command, in_transaction }
        ),
        1 => (worker(), id(), proptest::option::of(0i64..(1 << 41)), proptest::option::of(0..IDENTITIES.len()))
            .prop_map(|(by, recovery, floor, identity)| Step::Recover { by, recovery, floor, identity }),
        1 => (worker(), proptest::bool::ANY, proptest::bool::ANY).prop_map(|(by, tenure, in_transaction)| {
            if tenure {
                Step::PruneTenure { by, in_transaction }
            } else {
                Step::PruneOutcomes { by, in_transaction }
            }
        }),
        1 => (worker(), key_index(), invalid()).prop_map(|(by, key, what)| Step::Invalid { by, key, what }),
        // The set and slot procedures' own input rules, as often again.
        1 => (worker(), key_index(), proptest::sample::select(Invalid::ALL[Invalid::FIRST_SET..].to_vec()))
            .prop_map(|(by, key, what)| Step::Invalid { by, key, what }),
        2 => acquire_set(),
        1 => (worker(), lease(), seconds()).prop_map(|(by, lease, seconds)| Step::RenewSet { by, lease, seconds }),
        1 => (worker(), lease()).prop_map(|(by, lease)| Step::ReleaseSet { by, lease }),
        1 => (worker(), lease(), id(), proptest::bool::ANY)
            .prop_map(|(by, lease, op, release)| Step::PublishSet { by, lease, op, release }),
        1 => (worker(), lease(), proptest::bool::weighted(0.85))
            .prop_map(|(by, lease, in_transaction)| Step::AssertHolderSet { by, lease, in_transaction }),
        2 => acquire_slot(),
    ]
}

/// An `AcquireSet` of 1 to 3 keys of any kind, in any order.
fn acquire_set() -> impl Strategy<Value = Step> {
    let keys = proptest::sample::subsequence((0..KEYS.len()).collect::<Vec<_>>(), 1..=3).prop_shuffle();
    (worker(), keys, seconds(), proptest::bool::weighted(0.2)).prop_map(|(by, keys, seconds, again)| Step::AcquireSet {
        by,
        keys,
        seconds,
        again,
    })
}

/// An `AcquireSlot` of one to three slots (only two are provisioned).
fn acquire_slot() -> impl Strategy<Value = Step> {
    (worker(), 1i32..=3, seconds(), proptest::bool::weighted(0.2)).prop_map(|(by, slots, seconds, again)| {
        Step::AcquireSlot {
            by,
            slots,
            seconds,
            again,
        }
    })
}

/// A call on the worker's last set, or on its first key, or a wait, that a
/// set's episode makes after its acquire.
fn use_of_set() -> impl Strategy<Value = Step> {
    let (by, key) = (0, Key::Leased);
    prop_oneof![
        3 => Just(Step::WaitOut { by, key }),
        3 => (lease(), seconds()).prop_map(move |(lease, seconds)| Step::RenewSet { by, lease, seconds }),
        3 => (lease(), id(), proptest::bool::ANY)
            .prop_map(move |(lease, op, release)| Step::PublishSet { by, lease, op, release }),
        1 => lease().prop_map(move |lease| Step::ReleaseSet { by, lease }),
        2 => (lease(), proptest::bool::weighted(0.85))
            .prop_map(move |(lease, in_transaction)| Step::AssertHolderSet { by, lease, in_transaction }),
        2 => use_of_lease(),
    ]
}

/// A call on a lease, or a wait, that an episode makes after its acquire
/// (its worker and key set there).
fn use_of_lease() -> impl Strategy<Value = Step> {
    let (by, key) = (0, Key::Leased);
    prop_oneof![
        3 => Just(Step::WaitOut { by, key }),
        1 => Just(Step::Wait { millis: 300 }),
        3 => (lease(), seconds()).prop_map(move |(lease, seconds)| Step::Renew { by, key, lease, seconds }),
        2 => (lease(), seconds(), proptest::sample::subsequence((0..KEYS.len()).collect::<Vec<_>>(), 0..=2))
            .prop_map(move |(lease, seconds, keys)| Step::RenewMany { by, keys, lease, seconds }),
        3 => (lease(), id(), proptest::bool::ANY, version())
            .prop_map(move |(lease, op, release, version)| Step::Publish { by, key, lease, op, release, version }),
        1 => lease().prop_map(move |lease| Step::Release { by, key, lease }),
        1 => (lease(), version(), proptest::bool::weighted(0.85)).prop_map(move |(lease, version, in_transaction)| {
            Step::AssertHolder { by, key, lease, version, in_transaction }
        }),
    ]
}

/// One worker's acquire of a key and what it does with the lease after:
/// waits it out, renews, publishes, releases, asserts.
fn episode() -> impl Strategy<Value = Vec<Step>> {
    let uses = proptest::collection::vec(use_of_lease(), 0..5);
    (worker(), key_index(), seconds(), proptest::bool::weighted(0.2), uses).prop_map(
        |(worker, index, seconds, again, uses)| {
            let key = Key::Named(index);
            let mut steps = vec![Step::Acquire {
                by: worker,
                key,
                seconds,
                again,
            }];
            steps.extend(uses.into_iter().map(|mut step| {
                if let Some(by) = step.by_mut() {
                    *by = worker;
                }
                step.set_key(key);
                step
            }));
            steps
        },
    )
}

/// One worker's set (or slot) acquired and then used: each later step is
/// that worker's, on its set or the set's first key (the slot's key).
fn set_episode() -> impl Strategy<Value = Vec<Step>> {
    let uses = proptest::collection::vec(use_of_set(), 0..5);
    let first = prop_oneof![2 => acquire_set(), 1 => acquire_slot()];
    (first, uses).prop_map(|(first, uses)| {
        let worker = first.by().expect("an acquire is a worker's");
        let mut steps = vec![first];
        steps.extend(uses.into_iter().map(|mut step| {
            if let Some(by) = step.by_mut() {
                *by = worker;
            }
            step
        }));
        steps
    })
}

/// One fixed schedule: every input rule of the set and slot procedures
/// broken once, then the slots of a resource with two provisioned slot keys
/// filled by a count of three (the third slot has no key), retried by a
/// holder, and refused to a count of one.
pub fn set_and_slot_rules() -> Vec<Step> {
    let mut steps: Vec<Step> = Invalid::ALL[Invalid::FIRST_SET..]
        .iter()
        .map(|&what| Step::Invalid { by: 0, key: 0, what })
        .collect();
    let slot = |by, slots, again| Step::AcquireSlot {
        by,
        slots,
        seconds: 2,
        again,
    };
    steps.extend([
        slot(0, 3, false),
        slot(1, 3, false),
        slot(0, 3, false),
        slot(1, 3, true),
        slot(0, 1, false),
        Step::AcquireSet {
            by: 0,
            keys: vec![2, 1, 0],
            seconds: 2,
            again: false,
        },
    ]);
    steps
}

/// A schedule: up to `max_parts` parts, each an episode (a lease, set or
/// slot taken and used) or one step of anything, by any worker. Shrinking
/// drops parts and steps inside them.
pub fn schedule(max_parts: usize) -> impl Strategy<Value = Vec<Step>> {
    let part = prop_oneof![2 => episode(), 1 => set_episode(), 1 => step().prop_map(|step| vec![step])];
    proptest::collection::vec(part, 1..=max_parts).prop_map(|parts| parts.into_iter().flatten().collect())
}
