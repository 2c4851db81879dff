//! A model [`Call`] sent to the deployed procedure, every parameter named
//! (NULL as a literal: Babelfish refuses an untyped NULL string parameter),
//! and its row or rows read back into the model's [`Answer`], so the two
//! compare with `==`.

use fencepost::Connection;
use fencepost::model::{
    Acquired, Answer, Call, Ending, ForceReleased, History, Holding, Inspected, LeaseState, Listed, ListedLease,
    Outcome, Provisioned, Publication, Published, Recovered, Recovery, Released, Renewed, Reset, Retired, Session,
    SetAcquired, SetPublished, SetRenewed, SlotAcquired, TenureRow,
};
use tiberius::{Row, ToSql};
use time::OffsetDateTime;
use uuid::Uuid;

/// What the server answered: the procedure's answer, or the number and
/// message of the error it raised.
pub type Seen = Result<Answer, (u32, String)>;

enum Value {
    Text(Option<String>),
    Id(Option<Uuid>),
    Int(Option<i32>),
    Big(Option<i64>),
    Bit(Option<bool>),
}

/// `@Leases` for `leases`: every value given, as the client writes it.
fn leases_json(leases: &[ListedLease]) -> String {
    let objects: Vec<serde_json::Value> = leases
        .iter()
        .map(|lease| {
            serde_json::json!({
                "ResourceKey": lease.resource_key,
                "Owner": lease.owner.map(|owner| owner.to_string()),
                "Generation": lease.generation,
                "LeaseSeconds": lease.lease_seconds,
            })
        })
        .collect();
    serde_json::Value::Array(objects).to_string()
}

/// The procedure and its parameters in declaration order.
fn parameters(call: &Call) -> Vec<(&'static str, Value)> {
    use Value::*;
    let key = |k: &Option<String>| ("@ResourceKey", Text(k.clone()));
    match call {
        Call::Provision { resource_key } => vec![key(resource_key)],
        Call::Acquire {
            resource_key,
            owner,
            lease_seconds,
        } => vec![
            key(resource_key),
            ("@Owner", Id(*owner)),
            ("@LeaseSeconds", Int(*lease_seconds)),
        ],
        Call::Renew {
            resource_key,
            owner,
            generation,
            lease_seconds,
        } => vec![
            key(resource_key),
            ("@Owner", Id(*owner)),
            ("@Generation", Big(*generation)),
            ("@LeaseSeconds", Int(*lease_seconds)),
        ],
        Call::RenewMany { leases } => vec![("@Leases", Text(leases.as_deref().map(leases_json)))],
        Call::Publish {
            resource_key,
            owner,
            generation,
            operation_id,
            payload,
            release,
            source_version,
        } => vec![
            key(resource_key),
            ("@Owner", Id(*owner)),
            ("@Generation", Big(*generation)),
            ("@OperationId", Id(*operation_id)),
            ("@Payload", Text(payload.clone())),
            ("@Release", Bit(*release)),
            ("@SourceVersion", Big(*source_version)),
        ],
        Call::Release {
            resource_key,
            owner,
            generation,
        } => vec![
            key(resource_key),
            ("@Owner", Id(*owner)),
            ("@Generation", Big(*generation)),
        ],
        Call::GetOutcome { operation_id } => vec![("@OperationId", Id(*operation_id))],
        Call::ReadPublication { resource_key } | Call::Inspect { resource_key } => vec![key(resource_key)],
        Call::AssertHolder {
            resource_key,
            owner,
            generation,
            source_version,
        } => vec![
            key(resource_key),
            ("@Owner", Id(*owner)),
            ("@Generation", Big(*generation)),
            ("@SourceVersion", Big(*source_version)),
        ],
        Call::ContractVersion => vec![],
        Call::ListLeases {
            prefix,
            held_only,
            max_rows,
            after,
        } => vec![
            ("@Prefix", Text(prefix.clone())),
            ("@HeldOnly", Bit(*held_only)),
            ("@MaxRows", Int(*max_rows)),
            ("@After", Text(after.clone())),
        ],
        Call::ForceRelease {
            resource_key,
            operation_id,
        }
        | Call::Retire {
            resource_key,
            operation_id,
        } => vec![key(resource_key), ("@OperationId", Id(*operation_id))],
        Call::LeaseHistory { resource_key, max_rows } => vec![key(resource_key), ("@MaxRows", Int(*max_rows))],
        Call::PruneTenure { older_than_days } | Call::PruneOutcomes { older_than_days } => {
            vec![("@OlderThanDays", Int(*older_than_days))]
        }
        Call::Recover {
            recovery_id,
            floor,
            database_identity,
        } => vec![
            ("@RecoveryId", Id(*recovery_id)),
            ("@Floor", Big(*floor)),
            ("@DatabaseIdentity", Id(*database_identity)),
        ],
        Call::ResetSourceVersion {
            resource_key,
            source_version,
            operation_id,
        } => vec![
            key(resource_key),
            ("@SourceVersion", Big(*source_version)),
            ("@OperationId", Id(*operation_id)),
        ],
        Call::AcquireSet {
            resource_keys,
            owner,
            lease_seconds,
        } => vec![
            ("@ResourceKeys", Text(resource_keys.clone())),
            ("@Owner", Id(*owner)),
            ("@LeaseSeconds", Int(*lease_seconds)),
        ],
        Call::RenewSet {
            leases,
            owner,
            lease_seconds,
        } => vec![
            ("@Leases", Text(leases.clone())),
            ("@Owner", Id(*owner)),
            ("@LeaseSeconds", Int(*lease_seconds)),
        ],
        Call::ReleaseSet { leases, owner } | Call::AssertHolderSet { leases, owner } => {
            vec![("@Leases", Text(leases.clone())), ("@Owner", Id(*owner))]
        }
        Call::PublishSet { leases, owner, release } => vec![
            ("@Leases", Text(leases.clone())),
            ("@Owner", Id(*owner)),
            ("@Release", Bit(*release)),
        ],
        Call::AcquireSlot {
            resource_key,
            slots,
            owner,
            lease_seconds,
        } => vec![
            key(resource_key),
            ("@Slots", Int(*slots)),
            ("@Owner", Id(*owner)),
            ("@LeaseSeconds", Int(*lease_seconds)),
        ],
        other => panic!("no parameters for {other:?}"),
    }
}

/// Runs one batch that answers nothing, panicking on error.
async fn batch(conn: &mut Connection, sql: &str) {
    let result = match conn.simple_query(sql).await {
        Ok(stream) => stream.into_results().await.map(drop),
        Err(error) => Err(error),
    };
    result.unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Sends `call` on `conn`, inside a transaction of its own that commits
/// after it when `session` says so, and reads what it answered.
pub async fn call(conn: &mut Connection, call: &Call, session: Session) -> Seen {
    let parameters = parameters(call);
    let mut bound: Vec<&dyn ToSql> = Vec::new();
    let mut named = Vec::new();
    for (name, value) in &parameters {
        let arg: Option<&dyn ToSql> = match value {
            Value::Text(v) => v.as_ref().map(|v| v as &dyn ToSql),
            Value::Id(v) => v.as_ref().map(|v| v as &dyn ToSql),
            Value::Int(v) => v.as_ref().map(|v| v as &dyn ToSql),
            Value::Big(v) => v.as_ref().map(|v| v as &dyn ToSql),
            Value::Bit(v) => v.as_ref().map(|v| v as &dyn ToSql),
        };
        match arg {
            Some(arg) => {
                bound.push(arg);
                named.push(format!("{name} = @P{}", bound.len()));
            }
            None => named.push(format!("{name} = NULL")),
        }
    }
    let statement = format!("EXEC {} {}", call.procedure(), named.join(", "));
    if session == Session::InTransaction {
        batch(conn, "BEGIN TRANSACTION;").await;
    }
    let result = match conn.query(&statement, &bound).await {
        Ok(stream) => stream.into_results().await,
        Err(error) => Err(error),
    };
    // A refusal rolled the transaction back already (XACT_ABORT).
    batch(conn, "IF @@TRANCOUNT > 0 COMMIT TRANSACTION;").await;
    let rows: Vec<Row> = match result {
        Ok(sets) => sets.into_iter().flatten().collect(),
        Err(tiberius::error::Error::Server(token)) => return Err((token.code(), token.message().to_string())),
        Err(other) => panic!("{statement}: {other}"),
    };
    Ok(answer(call, rows).unwrap_or_else(|problem| panic!("{statement}: {problem}")))
}

/// A column by name, case-blind as the client reads it.
fn col<'a, T: tiberius::FromSql<'a>>(row: &'a Row, name: &str) -> Option<T> {
    let index = row
        .columns()
        .iter()
        .position(|c| c.name().eq_ignore_ascii_case(name))
        .unwrap_or_else(|| panic!("no column {name}"));
    row.try_get::<T, _>(index)
        .unwrap_or_else(|e| panic!("column {name}: {e}"))
}

fn time(row: &Row, name: &str) -> Option<OffsetDateTime> {
    col::<time::PrimitiveDateTime>(row, name).map(|t| t.assume_utc())
}

fn must<T>(value: Option<T>, name: &str) -> T {
    value.unwrap_or_else(|| panic!("{name} is NULL"))
}

fn outcome(row: &Row) -> String {
    must(col::<&str>(row, "Outcome"), "Outcome").to_string()
}

fn lease_state(row: &Row) -> LeaseState {
    LeaseState {
        generation: must(col(row, "Generation"), "Generation"),
        is_held: must(col(row, "IsHeld"), "IsHeld"),
        lease_until: time(row, "LeaseUntilUtc"),
        published_generation: col(row, "PublishedGeneration"),
        server_utc: must(time(row, "ServerUtc"), "ServerUtc"),
        source_version: col(row, "SourceVersion"),
    }
}

fn ending(name: Option<&str>) -> Option<Ending> {
    name.map(|name| match name {
        "Released" => Ending::Released,
        "Expired" => Ending::Expired,
        "ForceReleased" => Ending::ForceReleased,
        "Superseded" => Ending::Superseded,
        other => panic!("unknown Ending {other}"),
    })
}

fn tenure(row: &Row) -> TenureRow {
    let hash: &[u8] = must(col(row, "OwnerHash"), "OwnerHash");
    TenureRow {
        generation: must(col(row, "Generation"), "Generation"),
        owner_hash: hash.try_into().expect("32 bytes"),
        acquired_at: time(row, "AcquiredAtUtc"),
        ended_at: time(row, "EndedAtUtc"),
        ending: ending(col(row, "Ending")),
        published: must(col(row, "Published"), "Published"),
        lease_until: time(row, "LeaseUntilUtc"),
        server_utc: must(time(row, "ServerUtc"), "ServerUtc"),
        source_version: col(row, "SourceVersion"),
    }
}

fn recovery(row: &Row) -> Recovery {
    Recovery {
        generation_floor: must(col(row, "GenerationFloor"), "GenerationFloor"),
        leases_voided: must(col(row, "LeasesVoided"), "LeasesVoided"),
        recovered_at: must(time(row, "RecoveredAtUtc"), "RecoveredAtUtc"),
    }
}

/// A set procedure's rows as the model's answer: one per key, in the order
/// sent; `None` for a call of no set procedure.
fn set_answer(call: &Call, rows: &[Row]) -> Option<Result<Answer, String>> {
    let key = |row: &Row| must(col::<&str>(row, "ResourceKey"), "ResourceKey").to_string();
    let until = |row: &Row| must(time(row, "LeaseUntilUtc"), "LeaseUntilUtc");
    Some(match call {
        Call::AcquireSet { .. } => keyed(rows, &|row, name| {
            Some(match name {
                "Acquired" => SetAcquired::Acquired {
                    generation: must(col(row, "Generation"), "Generation"),
                    lease_until: until(row),
                },
                "Busy" => SetAcquired::Busy {
                    lease_until: until(row),
                },
                "NotProvisioned" => SetAcquired::NotProvisioned,
                "Withheld" => SetAcquired::Withheld,
                _ => return None,
            })
        })
        .and_then(|keyed| {
            let first = rows.first().ok_or("no rows")?;
            Ok(Answer::AcquireSet {
                rows: keyed,
                server_utc: must(time(first, "ServerUtc"), "ServerUtc"),
            })
        }),
        Call::RenewSet { .. } => keyed(rows, &|row, name| {
            Some(match name {
                "Renewed" => SetRenewed::Renewed {
                    lease_until: until(row),
                },
                "Lost" => SetRenewed::Lost,
                "Withheld" => SetRenewed::Withheld {
                    lease_until: until(row),
                },
                _ => return None,
            })
        })
        .map(Answer::RenewSet),
        Call::ReleaseSet { .. } => keyed(rows, &|_, name| match name {
            "Released" => Some(Released::Released),
            "NotHolder" => Some(Released::NotHolder),
            _ => None,
        })
        .map(Answer::ReleaseSet),
        Call::PublishSet { .. } => keyed(rows, &|_, name| {
            Some(match name {
                "Published" => SetPublished::Published,
                "AlreadyPublished" => SetPublished::AlreadyPublished,
                "Superseded" => SetPublished::Superseded,
                "GenerationAlreadyPublished" => SetPublished::GenerationAlreadyPublished,
                "Expired" => SetPublished::Expired,
                "NotProvisioned" => SetPublished::NotProvisioned,
                "Withheld" => SetPublished::Withheld,
                _ => return None,
            })
        })
        .map(Answer::PublishSet),
        Call::AssertHolderSet { .. } => keyed(rows, &|row, name| {
            (name == "Holding").then(|| Holding {
                generation: must(col(row, "Generation"), "Generation"),
                lease_until: until(row),
            })
        })
        .map(Answer::AssertHolderSet),
        Call::AcquireSlot { .. } => {
            let [row] = rows else {
                return Some(Err(format!("{} rows instead of one", rows.len())));
            };
            let server_utc = must(time(row, "ServerUtc"), "ServerUtc");
            Ok(Answer::AcquireSlot(match outcome(row).as_str() {
                "Acquired" => SlotAcquired::Acquired {
                    slot: must(col(row, "Slot"), "Slot"),
                    resource_key: key(row),
                    generation: must(col(row, "Generation"), "Generation"),
                    lease_until: until(row),
                    server_utc,
                },
                "Busy" => SlotAcquired::Busy {
                    lease_until: until(row),
                    server_utc,
                },
                "NotProvisioned" => SlotAcquired::NotProvisioned { server_utc },
                other => return Some(Err(format!("unknown outcome {other}"))),
            }))
        }
        _ => return None,
    })
}

/// Each row's key and what `judge` reads of it and its outcome.
fn keyed<T>(rows: &[Row], judge: &dyn Fn(&Row, &str) -> Option<T>) -> Result<Vec<(String, T)>, String> {
    rows.iter()
        .map(|row| {
            let name = outcome(row);
            judge(row, &name)
                .map(|judged| (must(col::<&str>(row, "ResourceKey"), "ResourceKey").to_string(), judged))
                .ok_or_else(|| format!("unknown outcome {name}"))
        })
        .collect()
}

/// The procedure's rows as the model's answer.
fn answer(call: &Call, rows: Vec<Row>) -> Result<Answer, String> {
    if let Some(answer) = set_answer(call, &rows) {
        return answer;
    }
    if let Call::ListLeases { .. } = call {
        return Ok(Answer::ListLeases(
            rows.iter()
                .map(|row| Listed {
                    resource_key: must(col::<&str>(row, "ResourceKey"), "ResourceKey").to_string(),
                    state: lease_state(row),
                })
                .collect(),
        ));
    }
    if let Call::RenewMany { .. } = call {
        return rows
            .iter()
            .map(|row| {
                let key = must(col::<&str>(row, "ResourceKey"), "ResourceKey").to_string();
                let renewed = match outcome(row).as_str() {
                    "Renewed" => Renewed::Renewed {
                        lease_until: must(time(row, "LeaseUntilUtc"), "LeaseUntilUtc"),
                    },
                    "Lost" => Renewed::Lost,
                    other => return Err(format!("unknown outcome {other}")),
                };
                Ok((key, renewed))
            })
            .collect::<Result<_, _>>()
            .map(Answer::RenewMany);
    }
    if let Call::LeaseHistory { .. } = call
        && rows.first().is_none_or(|row| outcome(row) == "Found")
    {
        return Ok(Answer::LeaseHistory(History::Found(rows.iter().map(tenure).collect())));
    }
    let [row] = &rows[..] else {
        return Err(format!("{} rows instead of one", rows.len()));
    };
    let outcome = outcome(row);
    let unknown = || format!("unknown outcome {outcome}");
    Ok(match (call, outcome.as_str()) {
        (Call::Provision { .. }, "Created") => Answer::Provision(Provisioned::Created),
        (Call::Provision { .. }, "Exists") => Answer::Provision(Provisioned::Exists),
        (Call::Acquire { .. }, name) => {
            let server_utc = must(time(row, "ServerUtc"), "ServerUtc");
            Answer::Acquire(match name {
                "Acquired" => Acquired::Acquired {
                    generation: must(col(row, "Generation"), "Generation"),
                    lease_until: must(time(row, "LeaseUntilUtc"), "LeaseUntilUtc"),
                    server_utc,
                },
                "Busy" => Acquired::Busy {
                    lease_until: must(time(row, "LeaseUntilUtc"), "LeaseUntilUtc"),
                    server_utc,
                },
                "NotProvisioned" => Acquired::NotProvisioned { server_utc },
                _ => return Err(unknown()),
            })
        }
        (Call::Renew { .. }, "Renewed") => Answer::Renew(Renewed::Renewed {
            lease_until: must(time(row, "LeaseUntilUtc"), "LeaseUntilUtc"),
        }),
        (Call::Renew { .. }, "Lost") => Answer::Renew(Renewed::Lost),
        (Call::Publish { .. }, name) => Answer::Publish(match name {
            "Published" => Published::Published,
            "AlreadyPublished" => Published::AlreadyPublished,
            "Superseded" => Published::Superseded,
            "Expired" => Published::Expired,
            "GenerationAlreadyPublished" => Published::GenerationAlreadyPublished,
            "NotProvisioned" => Published::NotProvisioned,
            "StaleSource" => Published::StaleSource,
            _ => return Err(unknown()),
        }),
        (Call::Release { .. }, "Released") => Answer::Release(Released::Released),
        (Call::Release { .. }, "NotHolder") => Answer::Release(Released::NotHolder),
        (Call::GetOutcome { .. }, "Published") => Answer::GetOutcome(Outcome::Published {
            resource_key: must(col::<&str>(row, "ResourceKey"), "ResourceKey").to_string(),
            generation: must(col(row, "Generation"), "Generation"),
            published_at: must(time(row, "PublishedAtUtc"), "PublishedAtUtc"),
            source_version: col(row, "SourceVersion"),
        }),
        (Call::GetOutcome { .. }, "Unknown") => Answer::GetOutcome(Outcome::Unknown),
        (Call::ReadPublication { .. }, "Found") => Answer::ReadPublication(Publication::Found {
            published_generation: col(row, "PublishedGeneration"),
            payload: col::<&str>(row, "Payload").map(str::to_string),
            published_at: time(row, "PublishedAtUtc"),
            source_version: col(row, "SourceVersion"),
        }),
        (Call::ReadPublication { .. }, "NotProvisioned") => Answer::ReadPublication(Publication::NotProvisioned),
        (Call::Inspect { .. }, "Found") => Answer::Inspect(Inspected::Found(lease_state(row))),
        (Call::Inspect { .. }, "NotProvisioned") => Answer::Inspect(Inspected::NotProvisioned {
            server_utc: must(time(row, "ServerUtc"), "ServerUtc"),
        }),
        (Call::AssertHolder { .. }, "Holding") => Answer::AssertHolder(Holding {
            generation: must(col(row, "Generation"), "Generation"),
            lease_until: must(time(row, "LeaseUntilUtc"), "LeaseUntilUtc"),
        }),
        (Call::ForceRelease { .. }, "Fenced") => Answer::ForceRelease(ForceReleased::Fenced {
            generation: must(col(row, "Generation"), "Generation"),
        }),
        (Call::ForceRelease { .. }, "NotProvisioned") => Answer::ForceRelease(ForceReleased::NotProvisioned),
        (Call::LeaseHistory { .. }, "NotProvisioned") => Answer::LeaseHistory(History::NotProvisioned {
            server_utc: must(time(row, "ServerUtc"), "ServerUtc"),
        }),
        (Call::PruneTenure { .. }, "Pruned") => Answer::PruneTenure {
            deleted: must(col(row, "Deleted"), "Deleted"),
            ended_before: must(time(row, "EndedBeforeUtc"), "EndedBeforeUtc"),
        },
        (Call::PruneOutcomes { .. }, "Pruned") => Answer::PruneOutcomes {
            publishes_deleted: must(col(row, "PublishesDeleted"), "PublishesDeleted"),
            commands_deleted: must(col(row, "CommandsDeleted"), "CommandsDeleted"),
            recorded_before: must(time(row, "RecordedBeforeUtc"), "RecordedBeforeUtc"),
        },
        (Call::Recover { .. }, "Recovered") => Answer::Recover(Recovered::Recovered(recovery(row))),
        (Call::Recover { .. }, "AlreadyRecovered") => Answer::Recover(Recovered::AlreadyRecovered(recovery(row))),
        (Call::ResetSourceVersion { .. }, "Reset") => Answer::ResetSourceVersion(Reset::Reset {
            previous_source_version: col(row, "PreviousSourceVersion"),
        }),
        (Call::ResetSourceVersion { .. }, "NotProvisioned") => Answer::ResetSourceVersion(Reset::NotProvisioned),
        (Call::Retire { .. }, "Retired") => Answer::Retire(Retired::Retired {
            generation: must(col(row, "Generation"), "Generation"),
        }),
        (Call::Retire { .. }, "NotProvisioned") => Answer::Retire(Retired::NotProvisioned),
        (Call::ContractVersion, "Version") => Answer::ContractVersion {
            major: must(col(row, "Major"), "Major"),
            minor: must(col(row, "Minor"), "Minor"),
        },
        _ => return Err(unknown()),
    })
}

/// Empties every fence table the procedures write, so a schedule starts
/// from what the model's [`Fence::new`] is: a database as deployed, with no
/// database identity recorded (a deploy on SQL Server records one).
///
/// [`Fence::new`]: fencepost::model::Fence::new
pub const RESET: &str = "DELETE FROM fence.Tenure;
DELETE FROM fence.PublishedOperation;
DELETE FROM fence.OperatorOperation;
DELETE FROM fence.Recovery;
DELETE FROM fence.DatabaseIdentity;
DELETE FROM fence.Resource;
UPDATE fence.Retirement SET HighestGeneration = 0, KeysRetired = 0, LastRetiredAtUtc = NULL;";

/// The database identity the fence records (`fence.DatabaseIdentity`), if
/// any: what `Recover` with `@DatabaseIdentity` leaves behind.
pub async fn database_identity(conn: &mut Connection) -> Option<Uuid> {
    let stream = conn
        .simple_query("SELECT RecoveryForkGuid FROM fence.DatabaseIdentity;")
        .await
        .expect("read fence.DatabaseIdentity");
    let row = stream.into_row().await.expect("read fence.DatabaseIdentity");
    row.and_then(|row| row.get::<Uuid, _>(0))
}
