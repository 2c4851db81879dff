//! A call of one procedure with its parameters as the procedure declares
//! them: every one may be NULL (`None`), as any caller may send, so the model
//! answers bad input with the refusal the procedure raises.

use super::renew_many::ListedLease;
use uuid::Uuid;

/// Whether the call runs on its own or inside a transaction the caller
/// opened (implicit-transaction mode counts as inside one). Only the
/// refusals depend on it: `AssertHolder` needs a transaction (50113);
/// `Retire`, `PruneTenure` and `PruneOutcomes` refuse one (50128).
///
/// The model answers every call as if its transaction commits. A caller
/// that rolls back undoes the call, which the model does not see.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Session {
    /// Called on its own: the procedure's transaction is the whole call.
    #[default]
    Autocommit,
    /// Called inside the caller's open transaction.
    InTransaction,
}

/// One call of a procedure of the contract, with its parameters.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    /// `fence_api.Provision`.
    Provision {
        /// `@ResourceKey`.
        resource_key: Option<String>,
    },
    /// `fence_api.Acquire`.
    Acquire {
        /// `@ResourceKey`.
        resource_key: Option<String>,
        /// `@Owner`.
        owner: Option<Uuid>,
        /// `@LeaseSeconds`.
        lease_seconds: Option<i32>,
    },
    /// `fence_api.Renew`.
    Renew {
        /// `@ResourceKey`.
        resource_key: Option<String>,
        /// `@Owner`.
        owner: Option<Uuid>,
        /// `@Generation`.
        generation: Option<i64>,
        /// `@LeaseSeconds`.
        lease_seconds: Option<i32>,
    },
    /// `fence_api.RenewMany` (contract 1.7): `None` is an `@Leases` that is
    /// NULL or not a JSON array.
    RenewMany {
        /// `@Leases`, one object per lease.
        leases: Option<Vec<ListedLease>>,
    },
    /// `fence_api.Publish`.
    Publish {
        /// `@ResourceKey`.
        resource_key: Option<String>,
        /// `@Owner`.
        owner: Option<Uuid>,
        /// `@Generation`.
        generation: Option<i64>,
        /// `@OperationId`.
        operation_id: Option<Uuid>,
        /// `@Payload`.
        payload: Option<String>,
        /// `@Release` (its default is 0).
        release: Option<bool>,
        /// `@SourceVersion` (its default is NULL).
        source_version: Option<i64>,
    },
    /// `fence_api.Release`.
    Release {
        /// `@ResourceKey`.
        resource_key: Option<String>,
        /// `@Owner`.
        owner: Option<Uuid>,
        /// `@Generation`.
        generation: Option<i64>,
    },
    /// `fence_api.GetOutcome`.
    GetOutcome {
        /// `@OperationId`.
        operation_id: Option<Uuid>,
    },
    /// `fence_api.ReadPublication`.
    ReadPublication {
        /// `@ResourceKey`.
        resource_key: Option<String>,
    },
    /// `fence_api.Inspect`.
    Inspect {
        /// `@ResourceKey`.
        resource_key: Option<String>,
    },
    /// `fence_api.AssertHolder`.
    AssertHolder {
        /// `@ResourceKey`.
        resource_key: Option<String>,
        /// `@Owner`.
        owner: Option<Uuid>,
        /// `@Generation`.
        generation: Option<i64>,
        /// `@SourceVersion` (its default is NULL).
        source_version: Option<i64>,
    },
    /// `fence_api.ContractVersion`.
    ContractVersion,
    /// `fence_admin.ListLeases`.
    ListLeases {
        /// `@Prefix` (its default is the empty string).
        prefix: Option<String>,
        /// `@HeldOnly` (its default is 0).
        held_only: Option<bool>,
        /// `@MaxRows` (its default is 1000).
        max_rows: Option<i32>,
        /// `@After` (its default is NULL).
        after: Option<String>,
    },
    /// `fence_admin.ForceRelease`.
    ForceRelease {
        /// `@ResourceKey`.
        resource_key: Option<String>,
        /// `@OperationId` (its default is NULL: no record).
        operation_id: Option<Uuid>,
    },
    /// `fence_admin.LeaseHistory`.
    LeaseHistory {
        /// `@ResourceKey`.
        resource_key: Option<String>,
        /// `@MaxRows` (its default is 100).
        max_rows: Option<i32>,
    },
    /// `fence_admin.PruneTenure`.
    PruneTenure {
        /// `@OlderThanDays`.
        older_than_days: Option<i32>,
    },
    /// `fence_admin.Recover`.
    Recover {
        /// `@RecoveryId`.
        recovery_id: Option<Uuid>,
        /// `@Floor` (its default is NULL).
        floor: Option<i64>,
        /// `@DatabaseIdentity` (its default is NULL).
        database_identity: Option<Uuid>,
    },
    /// `fence_admin.ResetSourceVersion`.
    ResetSourceVersion {
        /// `@ResourceKey`.
        resource_key: Option<String>,
        /// `@SourceVersion` (NULL clears it).
        source_version: Option<i64>,
        /// `@OperationId` (its default is NULL: no record).
        operation_id: Option<Uuid>,
    },
    /// `fence_admin.Retire`.
    Retire {
        /// `@ResourceKey`.
        resource_key: Option<String>,
        /// `@OperationId` (its default is NULL).
        operation_id: Option<Uuid>,
    },
    /// `fence_admin.PruneOutcomes`.
    PruneOutcomes {
        /// `@OlderThanDays`.
        older_than_days: Option<i32>,
    },
    /// `fence_api.AcquireSet` (contract 1.8).
    AcquireSet {
        /// `@ResourceKeys`: the JSON text, as sent (`["a", "b"]`).
        resource_keys: Option<String>,
        /// `@Owner`.
        owner: Option<Uuid>,
        /// `@LeaseSeconds`.
        lease_seconds: Option<i32>,
    },
    /// `fence_api.RenewSet` (contract 1.8).
    RenewSet {
        /// `@Leases`: the JSON text, as sent
        /// (`[{"ResourceKey": "a", "Generation": 7}]`).
        leases: Option<String>,
        /// `@Owner`.
        owner: Option<Uuid>,
        /// `@LeaseSeconds`.
        lease_seconds: Option<i32>,
    },
    /// `fence_api.ReleaseSet` (contract 1.8).
    ReleaseSet {
        /// `@Leases`: the JSON text, as sent.
        leases: Option<String>,
        /// `@Owner`.
        owner: Option<Uuid>,
    },
    /// `fence_api.PublishSet` (contract 1.8).
    PublishSet {
        /// `@Leases`: the JSON text, as sent, each object also with an
        /// `OperationId` and a `Payload`.
        leases: Option<String>,
        /// `@Owner`.
        owner: Option<Uuid>,
        /// `@Release` (its default is 0).
        release: Option<bool>,
    },
    /// `fence_api.AssertHolderSet` (contract 1.8).
    AssertHolderSet {
        /// `@Leases`: the JSON text, as sent.
        leases: Option<String>,
        /// `@Owner`.
        owner: Option<Uuid>,
    },
    /// `fence_api.AcquireSlot` (contract 1.8).
    AcquireSlot {
        /// `@ResourceKey`: the resource, whose slot keys are
        /// `<resource>#<slot>`.
        resource_key: Option<String>,
        /// `@Slots`.
        slots: Option<i32>,
        /// `@Owner`.
        owner: Option<Uuid>,
        /// `@LeaseSeconds`.
        lease_seconds: Option<i32>,
    },
}

/// Calls with every parameter given, for the common case.
impl Call {
    /// `Provision` of `key`.
    pub fn provision(key: &str) -> Call {
        Call::Provision {
            resource_key: Some(key.to_string()),
        }
    }

    /// `Acquire` of `key` as `owner` for `lease_seconds`.
    pub fn acquire(key: &str, owner: Uuid, lease_seconds: i32) -> Call {
        Call::Acquire {
            resource_key: Some(key.to_string()),
            owner: Some(owner),
            lease_seconds: Some(lease_seconds),
        }
    }

    /// `Renew` of the lease `owner` holds at `generation`.
    pub fn renew(key: &str, owner: Uuid, generation: i64, lease_seconds: i32) -> Call {
        Call::Renew {
            resource_key: Some(key.to_string()),
            owner: Some(owner),
            generation: Some(generation),
            lease_seconds: Some(lease_seconds),
        }
    }

    /// `Publish` of `payload` under the lease `owner` holds at `generation`,
    /// keeping the lease and checking no source version.
    pub fn publish(key: &str, owner: Uuid, generation: i64, operation_id: Uuid, payload: &str) -> Call {
        Call::Publish {
            resource_key: Some(key.to_string()),
            owner: Some(owner),
            generation: Some(generation),
            operation_id: Some(operation_id),
            payload: Some(payload.to_string()),
            release: Some(false),
            source_version: None,
        }
    }

    /// `Release` of the lease `owner` holds at `generation`.
    pub fn release(key: &str, owner: Uuid, generation: i64) -> Call {
        Call::Release {
            resource_key: Some(key.to_string()),
            owner: Some(owner),
            generation: Some(generation),
        }
    }

    /// `GetOutcome` of `operation_id`.
    pub fn get_outcome(operation_id: Uuid) -> Call {
        Call::GetOutcome {
            operation_id: Some(operation_id),
        }
    }

    /// `ReadPublication` of `key`.
    pub fn read_publication(key: &str) -> Call {
        Call::ReadPublication {
            resource_key: Some(key.to_string()),
        }
    }

    /// `Inspect` of `key`.
    pub fn inspect(key: &str) -> Call {
        Call::Inspect {
            resource_key: Some(key.to_string()),
        }
    }

    /// `AssertHolder` of the lease `owner` holds at `generation`, checking no
    /// source version.
    pub fn assert_holder(key: &str, owner: Uuid, generation: i64) -> Call {
        Call::AssertHolder {
            resource_key: Some(key.to_string()),
            owner: Some(owner),
            generation: Some(generation),
            source_version: None,
        }
    }

    /// `ForceRelease` of `key`, with no operation id.
    pub fn force_release(key: &str) -> Call {
        Call::ForceRelease {
            resource_key: Some(key.to_string()),
            operation_id: None,
        }
    }

    /// `LeaseHistory` of `key`, at most 100 rows.
    pub fn lease_history(key: &str) -> Call {
        Call::LeaseHistory {
            resource_key: Some(key.to_string()),
            max_rows: Some(100),
        }
    }

    /// `ListLeases` of every key, at most 1000 rows.
    pub fn list_leases() -> Call {
        Call::ListLeases {
            prefix: Some(String::new()),
            held_only: Some(false),
            max_rows: Some(1000),
            after: None,
        }
    }

    /// `AcquireSet` of `keys` (in the order given) as `owner`.
    pub fn acquire_set(keys: &[&str], owner: Uuid, lease_seconds: i32) -> Call {
        Call::AcquireSet {
            resource_keys: Some(serde_json::Value::from(keys.to_vec()).to_string()),
            owner: Some(owner),
            lease_seconds: Some(lease_seconds),
        }
    }

    /// `RenewSet` of the leases `owner` holds on `leases` (key and
    /// generation).
    pub fn renew_set(leases: &[(&str, i64)], owner: Uuid, lease_seconds: i32) -> Call {
        Call::RenewSet {
            leases: Some(set_json(leases, |_| serde_json::Map::new())),
            owner: Some(owner),
            lease_seconds: Some(lease_seconds),
        }
    }

    /// `ReleaseSet` of the leases `owner` holds on `leases`.
    pub fn release_set(leases: &[(&str, i64)], owner: Uuid) -> Call {
        Call::ReleaseSet {
            leases: Some(set_json(leases, |_| serde_json::Map::new())),
            owner: Some(owner),
        }
    }

    /// `AssertHolderSet` of the leases `owner` holds on `leases`.
    pub fn assert_holder_set(leases: &[(&str, i64)], owner: Uuid) -> Call {
        Call::AssertHolderSet {
            leases: Some(set_json(leases, |_| serde_json::Map::new())),
            owner: Some(owner),
        }
    }

    /// `PublishSet` under the leases `owner` holds: per key its generation,
    /// operation id and payload.
    pub fn publish_set(publishes: &[(&str, i64, Uuid, &str)], owner: Uuid, release: bool) -> Call {
        let leases: Vec<(&str, i64)> = publishes.iter().map(|(key, g, _, _)| (*key, *g)).collect();
        Call::PublishSet {
            leases: Some(set_json(&leases, |i| {
                let mut extra = serde_json::Map::new();
                extra.insert("OperationId".into(), publishes[i].2.to_string().into());
                extra.insert("Payload".into(), publishes[i].3.into());
                extra
            })),
            owner: Some(owner),
            release: Some(release),
        }
    }

    /// `AcquireSlot` of one of `slots` slots of `resource` as `owner`.
    pub fn acquire_slot(resource: &str, slots: i32, owner: Uuid, lease_seconds: i32) -> Call {
        Call::AcquireSlot {
            resource_key: Some(resource.to_string()),
            slots: Some(slots),
            owner: Some(owner),
            lease_seconds: Some(lease_seconds),
        }
    }

    /// The procedure's schema-qualified name.
    pub fn procedure(&self) -> &'static str {
        match self {
            Call::Provision { .. } => "fence_api.Provision",
            Call::Acquire { .. } => "fence_api.Acquire",
            Call::Renew { .. } => "fence_api.Renew",
            Call::RenewMany { .. } => "fence_api.RenewMany",
            Call::Publish { .. } => "fence_api.Publish",
            Call::Release { .. } => "fence_api.Release",
            Call::GetOutcome { .. } => "fence_api.GetOutcome",
            Call::ReadPublication { .. } => "fence_api.ReadPublication",
            Call::Inspect { .. } => "fence_api.Inspect",
            Call::AssertHolder { .. } => "fence_api.AssertHolder",
            Call::ContractVersion => "fence_api.ContractVersion",
            Call::ListLeases { .. } => "fence_admin.ListLeases",
            Call::ForceRelease { .. } => "fence_admin.ForceRelease",
            Call::LeaseHistory { .. } => "fence_admin.LeaseHistory",
            Call::PruneTenure { .. } => "fence_admin.PruneTenure",
            Call::Recover { .. } => "fence_admin.Recover",
            Call::ResetSourceVersion { .. } => "fence_admin.ResetSourceVersion",
            Call::Retire { .. } => "fence_admin.Retire",
            Call::PruneOutcomes { .. } => "fence_admin.PruneOutcomes",
            Call::AcquireSet { .. } => "fence_api.AcquireSet",
            Call::RenewSet { .. } => "fence_api.RenewSet",
            Call::ReleaseSet { .. } => "fence_api.ReleaseSet",
            Call::PublishSet { .. } => "fence_api.PublishSet",
            Call::AssertHolderSet { .. } => "fence_api.AssertHolderSet",
            Call::AcquireSlot { .. } => "fence_api.AcquireSlot",
        }
    }
}

/// `@Leases` for `leases`, each object with its key, its generation (a JSON
/// number) and what `extra` adds for its index.
fn set_json(leases: &[(&str, i64)], extra: impl Fn(usize) -> serde_json::Map<String, serde_json::Value>) -> String {
    let objects: Vec<serde_json::Value> = leases
        .iter()
        .enumerate()
        .map(|(i, (key, generation))| {
            let mut object = serde_json::Map::new();
            object.insert("ResourceKey".into(), (*key).into());
            object.insert("Generation".into(), (*generation).into());
            object.extend(extra(i));
            serde_json::Value::Object(object)
        })
        .collect();
    serde_json::Value::Array(objects).to_string()
}
