//! Contract v1.4, the source-version fence: a publication never goes back to
//! an older source. Called with raw EXECs, as a service in another language
//! would; each test uses keys of its own in the binary's shared database.

use crate::support;

use proptest::prelude::*;
use support::TestDatabase;
use support::caller::{Answer, Caller};
use uuid::Uuid;

const PUBLISH: &str = "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, \
                       @OperationId = @P4, @Payload = @P5, @Release = @P6, @SourceVersion = @P7";
const ASSERT_HOLDER: &str =
    "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @SourceVersion = @P4";
const RESET: &str = "EXEC fence_admin.ResetSourceVersion @ResourceKey = @P1, @SourceVersion = @P2";

/// A holder of one generation of a key, on a session of its own.
struct Holder {
    caller: Caller,
    key: String,
    owner: Uuid,
    generation: i64,
    until: time::PrimitiveDateTime,
}

impl Holder {
    /// Acquires `key` for `seconds` on a new session.
    async fn acquire(db: &TestDatabase, key: &str, seconds: i32) -> Holder {
        let mut caller = Caller::new(db.connect().await);
        let owner = Uuid::new_v4();
        let acquired = caller.acquire(key, owner, seconds).await;
        assert_eq!(acquired.outcome(), "Acquired");
        Holder {
            caller,
            key: key.to_string(),
            owner,
            generation: acquired.big("Generation").unwrap(),
            until: acquired.time("LeaseUntilUtc").unwrap(),
        }
    }

    async fn publish(&mut self, operation: Uuid, payload: &str, release: bool, version: Option<i64>) -> Answer {
        self.caller
            .call(
                PUBLISH,
                &[
                    &self.key.as_str(),
                    &self.owner,
                    &self.generation,
                    &operation,
                    &payload,
                    &release,
                    &version,
                ],
            )
            .await
    }

    async fn assert_holder(&mut self, version: Option<i64>) -> Answer {
        self.caller
            .call(
                ASSERT_HOLDER,
                &[&self.key.as_str(), &self.owner, &self.generation, &version],
            )
            .await
    }
}

async fn provisioned(caller: &mut Caller) -> String {
    let key = format!("source:{}", Uuid::new_v4().simple());
    let created = caller
        .call("EXEC fence_api.Provision @ResourceKey = @P1", &[&key.as_str()])
        .await;
    assert_eq!(created.outcome(), "Created");
    key
}

/// What a reader sees: Inspect's generation, whether held and source version,
/// and ReadPublication's payload and the version it was published with.
#[derive(Debug, PartialEq)]
struct Seen {
    generation: i64,
    held: bool,
    watermark: Option<i64>,
    payload: Option<String>,
    published_with: Option<i64>,
}

async fn seen(caller: &mut Caller, key: &str) -> Seen {
    let inspected = caller.inspect(key).await;
    let Answer::Row(row) = &inspected else {
        panic!("{inspected:?}")
    };
    let (generation, held, watermark) = (
        row.get::<i64, _>("Generation").unwrap(),
        row.get::<bool, _>("IsHeld").unwrap(),
        row.get::<i64, _>("SourceVersion"),
    );
    let read = caller.call(support::caller::READ_PUBLICATION, &[&key]).await;
    let Answer::Row(row) = &read else { panic!("{read:?}") };
    Seen {
        generation,
        held,
        watermark,
        payload: row.get::<&str, _>("Payload").map(str::to_string),
        published_with: row.get::<i64, _>("SourceVersion"),
    }
}

/// GetOutcome's answer for `operation`: its outcome and source version.
async fn outcome_of(caller: &mut Caller, operation: Uuid) -> (String, Option<i64>) {
    let answer = caller.call(support::caller::GET_OUTCOME, &[&operation]).await;
    (answer.outcome(), answer.big("SourceVersion"))
}

#[tokio::test]
async fn a_successor_built_from_an_older_source_is_refused_and_keeps_its_lease() {
    const TEST: &str = "a_successor_built_from_an_older_source_is_refused_and_keeps_its_lease";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut reader = Caller::new(db.connect().await);
    let key = provisioned(&mut reader).await;

    // The first holder built its report from offset 5, and released with it.
    let mut first = Holder::acquire(&db, &key, 60).await;
    assert_eq!(
        first.publish(Uuid::new_v4(), "from 5", true, Some(5)).await.outcome(),
        "Published"
    );

    // Its successor read a lagging replica, at offset 4: refused, nothing
    // recorded, and with @Release = 1 too the lease stays held.
    let mut second = Holder::acquire(&db, &key, 60).await;
    let stale = Uuid::new_v4();
    assert_eq!(
        second.publish(stale, "from 4", true, Some(4)).await.outcome(),
        "StaleSource"
    );
    let expected = Seen {
        generation: second.generation,
        held: true,
        watermark: Some(5),
        payload: Some("from 5".into()),
        published_with: Some(5),
    };
    assert_eq!(seen(&mut reader, &key).await, expected);
    assert_eq!(outcome_of(&mut reader, stale).await, ("Unknown".to_string(), None));
    assert_eq!(second.caller.trancount().await, 0);

    // Rebuilt from the same source as the first (equal is accepted), under the
    // same generation.
    let rebuilt = Uuid::new_v4();
    assert_eq!(
        second.publish(rebuilt, "from 5 again", false, Some(5)).await.outcome(),
        "Published"
    );
    assert_eq!(
        outcome_of(&mut reader, rebuilt).await,
        ("Published".to_string(), Some(5))
    );
    // A replay answers AlreadyPublished, whatever version it names.
    assert_eq!(
        second.publish(rebuilt, "from 5 again", false, Some(1)).await.outcome(),
        "AlreadyPublished"
    );

    // The tenure history records the version each accepted publish carried.
    let release = second
        .caller
        .call(
            support::caller::RELEASE,
            &[&key.as_str(), &second.owner, &second.generation],
        )
        .await;
    assert_eq!(release.outcome(), "Released");
    let history = db
        .query(&format!(
            "SELECT Generation, SourceVersion FROM fence.Tenure WHERE ResourceKey = N'{key}' ORDER BY Generation;"
        ))
        .await;
    let history: Vec<(i64, Option<i64>)> = history
        .iter()
        .map(|r| (r.get::<i64, _>(0).unwrap(), r.get::<i64, _>(1)))
        .collect();
    assert_eq!(history, vec![(first.generation, Some(5)), (second.generation, Some(5))]);
    drop((first, second, reader));
    db.drop().await;
}

#[tokio::test]
async fn an_unversioned_publish_leaves_the_watermark_and_versions_only_rise() {
    const TEST: &str = "an_unversioned_publish_leaves_the_watermark_and_versions_only_rise";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut reader = Caller::new(db.connect().await);
    let key = provisioned(&mut reader).await;
    assert_eq!(seen(&mut reader, &key).await.watermark, None);

    let mut a = Holder::acquire(&db, &key, 60).await;
    assert_eq!(
        a.publish(Uuid::new_v4(), "v7", true, Some(7)).await.outcome(),
        "Published"
    );
    // A worker that publishes without a version bypasses the check, and the
    // watermark stays where it was.
    let mut b = Holder::acquire(&db, &key, 60).await;
    assert_eq!(
        b.publish(Uuid::new_v4(), "unversioned", true, None).await.outcome(),
        "Published"
    );
    let after = seen(&mut reader, &key).await;
    assert_eq!((after.watermark, after.published_with), (Some(7), None));
    assert_eq!(after.payload.as_deref(), Some("unversioned"));

    let mut c = Holder::acquire(&db, &key, 60).await;
    assert_eq!(
        c.publish(Uuid::new_v4(), "v6", false, Some(6)).await.outcome(),
        "StaleSource"
    );
    assert_eq!(
        c.publish(Uuid::new_v4(), "v8", false, Some(8)).await.outcome(),
        "Published"
    );
    let after = seen(&mut reader, &key).await;
    assert_eq!((after.watermark, after.published_with), (Some(8), Some(8)));
    drop((a, b, c, reader));
    db.drop().await;
}

#[tokio::test]
async fn ownership_is_judged_before_the_source() {
    const TEST: &str = "ownership_is_judged_before_the_source";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut reader = Caller::new(db.connect().await);
    let key = provisioned(&mut reader).await;
    let mut first = Holder::acquire(&db, &key, 60).await;
    assert_eq!(
        first.publish(Uuid::new_v4(), "v9", false, Some(9)).await.outcome(),
        "Published"
    );
    // A second publish in one generation, with an older source as well.
    assert_eq!(
        first.publish(Uuid::new_v4(), "v1", false, Some(1)).await.outcome(),
        "GenerationAlreadyPublished"
    );

    // A superseded holder with an older source is Superseded.
    let force = reader
        .call("EXEC fence_admin.ForceRelease @ResourceKey = @P1", &[&key.as_str()])
        .await;
    assert_eq!(force.outcome(), "Fenced");
    assert_eq!(
        first.publish(Uuid::new_v4(), "v1", false, Some(1)).await.outcome(),
        "Superseded"
    );
    // ForceRelease leaves the source version as it is.
    assert_eq!(seen(&mut reader, &key).await.watermark, Some(9));

    // An expired holder with an older source is Expired.
    let mut late = Holder::acquire(&db, &key, 1).await;
    while late.caller.server_now().await <= late.until {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        late.publish(Uuid::new_v4(), "v2", false, Some(2)).await.outcome(),
        "Expired"
    );
    drop((first, late, reader));
    db.drop().await;
}

#[tokio::test]
async fn a_negative_source_version_is_50109_before_any_outcome_and_changes_nothing() {
    const TEST: &str = "a_negative_source_version_is_50109_before_any_outcome_and_changes_nothing";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut reader = Caller::new(db.connect().await);
    let key = provisioned(&mut reader).await;
    let mut holder = Holder::acquire(&db, &key, 60).await;
    let operation = Uuid::new_v4();
    assert_eq!(
        holder.publish(operation, "v3", false, Some(3)).await.outcome(),
        "Published"
    );
    let before = seen(&mut reader, &key).await;

    // Even a replay of a published operation: input errors come first.
    for answer in [
        holder.publish(operation, "v3", false, Some(-1)).await,
        holder.publish(Uuid::new_v4(), "x", true, Some(-1)).await,
    ] {
        let Answer::Error { number, message } = &answer else {
            panic!("{answer:?}")
        };
        assert_eq!(*number, 50109);
        assert!(message.contains("@SourceVersion"), "{message}");
    }
    holder.caller.batch("BEGIN TRANSACTION;").await.unwrap();
    let refused = holder.assert_holder(Some(-1)).await;
    assert_eq!(refused.error_number(), Some(50109));
    holder.caller.rollback().await;
    let reset = reader.call(RESET, &[&key.as_str(), &Some(-1i64)]).await;
    assert_eq!(reset.error_number(), Some(50109));
    assert_eq!(seen(&mut reader, &key).await, before);
    drop((holder, reader));
    db.drop().await;
}

#[tokio::test]
async fn assert_holder_fences_the_callers_own_writes_by_source_version() {
    const TEST: &str = "assert_holder_fences_the_callers_own_writes_by_source_version";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut reader = Caller::new(db.connect().await);
    let key = provisioned(&mut reader).await;
    let mut holder = Holder::acquire(&db, &key, 60).await;

    // A fenced write that rolls back leaves the version where it was.
    holder.caller.batch("BEGIN TRANSACTION;").await.unwrap();
    assert_eq!(holder.assert_holder(Some(4)).await.outcome(), "Holding");
    assert_eq!(holder.caller.trancount().await, 1);
    holder.caller.rollback().await;
    assert_eq!(seen(&mut reader, &key).await.watermark, None);

    // One that commits raises it.
    holder.caller.batch("BEGIN TRANSACTION;").await.unwrap();
    assert_eq!(holder.assert_holder(Some(4)).await.outcome(), "Holding");
    holder.caller.commit().await.unwrap();
    assert_eq!(seen(&mut reader, &key).await.watermark, Some(4));

    // Equal is accepted; an older source is 50114 and rolls back the
    // caller's whole transaction.
    holder.caller.batch("BEGIN TRANSACTION;").await.unwrap();
    assert_eq!(holder.assert_holder(Some(4)).await.outcome(), "Holding");
    assert_eq!(holder.assert_holder(Some(3)).await.error_number(), Some(50114));
    assert_eq!(holder.caller.trancount().await, 0);

    // A publish after it is judged against the fenced write's version.
    assert_eq!(
        holder.publish(Uuid::new_v4(), "v3", false, Some(3)).await.outcome(),
        "StaleSource"
    );

    // Lease checks come first: a superseded holder is 50110 whatever its source.
    let force = reader
        .call("EXEC fence_admin.ForceRelease @ResourceKey = @P1", &[&key.as_str()])
        .await;
    assert_eq!(force.outcome(), "Fenced");
    holder.caller.batch("BEGIN TRANSACTION;").await.unwrap();
    assert_eq!(holder.assert_holder(Some(3)).await.error_number(), Some(50110));
    holder.caller.rollback().await;
    drop((holder, reader));
    db.drop().await;
}

#[tokio::test]
async fn an_operator_resets_the_source_version_of_a_restarted_source() {
    const TEST: &str = "an_operator_resets_the_source_version_of_a_restarted_source";
    // A database of its own: on Babelfish the SECURITY DEFINER script below
    // changes the procedures, which no shared database may see.
    let Some(mut db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    // Babelfish does not chain ownership: the procedures reach the tables
    // only once the PostgreSQL-side script makes them SECURITY DEFINER.
    if db.is_babelfish().await {
        let Some(postgres) = support::babelfish_postgres::postgres_or_skip(TEST) else {
            db.drop().await;
            return;
        };
        support::babelfish_postgres::run_security_definer_script(&postgres, &db.name);
    }
    let mut reader = Caller::new(db.connect().await);
    let key = provisioned(&mut reader).await;
    let mut holder = Holder::acquire(&db, &key, 60).await;
    assert_eq!(
        holder.publish(Uuid::new_v4(), "v100", true, Some(100)).await.outcome(),
        "Published"
    );

    // The feed was rebuilt and counts from 0 again: an operator lowers the
    // watermark, and the next build from offset 2 is accepted.
    let operator = db.login_in_role(Some("fence_operator")).await;
    let mut operator = Caller::new(support::connect_ado(&operator).await);
    let reset = operator.call(RESET, &[&key.as_str(), &Some(0i64)]).await;
    assert_eq!(
        (reset.outcome(), reset.big("PreviousSourceVersion")),
        ("Reset".to_string(), Some(100))
    );
    let mut next = Holder::acquire(&db, &key, 60).await;
    assert_eq!(
        next.publish(Uuid::new_v4(), "v2", true, Some(2)).await.outcome(),
        "Published"
    );

    // Clearing it removes the floor until the next versioned write.
    let cleared = operator.call(RESET, &[&key.as_str(), &None::<i64>]).await;
    assert_eq!(
        (cleared.outcome(), cleared.big("PreviousSourceVersion")),
        ("Reset".to_string(), Some(2))
    );
    let after = seen(&mut reader, &key).await;
    assert_eq!((after.watermark, after.published_with), (None, Some(2)));

    let unknown = operator.call(RESET, &[&"source:never-provisioned", &Some(1i64)]).await;
    assert_eq!(
        (unknown.outcome(), unknown.big("PreviousSourceVersion")),
        ("NotProvisioned".to_string(), None)
    );
    drop((holder, next, operator, reader));
    db.drop().await;
}

/// One step of a generated schedule on one key.
#[derive(Clone, Debug)]
enum Step {
    /// An operator fences the current holder out and a new holder acquires.
    Takeover,
    /// Holder `holder` (an index into the holders so far, wrapping) publishes
    /// with a fresh operation id.
    Publish {
        holder: usize,
        version: Option<i64>,
        release: bool,
    },
    /// An earlier accepted publish (an index, wrapping) is replayed, naming
    /// any version.
    Replay { publish: usize, version: Option<i64> },
}

fn step() -> impl Strategy<Value = Step> {
    let version = prop_oneof![Just(None), (-1i64..8).prop_map(Some)];
    prop_oneof![
        1 => Just(Step::Takeover),
        4 => (0usize..4, version.clone(), any::<bool>())
            .prop_map(|(holder, version, release)| Step::Publish { holder, version, release }),
        1 => (0usize..4, version).prop_map(|(publish, version)| Step::Replay { publish, version }),
    ]
}

/// What the contract says a schedule leaves: the model the procedures are
/// checked against, step by step.
#[derive(Default)]
struct Model {
    /// (owner, generation) of each holder so far; the last one is current.
    holders: Vec<(Uuid, i64)>,
    /// Whether the current holder still holds (a publish with release ends it).
    held: bool,
    published_generation: Option<i64>,
    watermark: Option<i64>,
    /// Accepted publishes: operation id, holder index, payload, version.
    accepted: Vec<(Uuid, usize, String, Option<i64>)>,
    /// Refused publishes' operation ids: never recorded.
    refused: Vec<Uuid>,
}

impl Model {
    /// The outcome of a fresh publish by `holder` with `version`, and the
    /// state it leaves.
    fn publish(&mut self, holder: usize, operation: Uuid, version: Option<i64>, release: bool) -> &'static str {
        let current = holder + 1 == self.holders.len();
        let generation = self.holders[holder].1;
        let outcome = if !current {
            "Superseded"
        } else if self.published_generation >= Some(generation) {
            "GenerationAlreadyPublished"
        } else if !self.held {
            "Expired"
        } else if matches!((self.watermark, version), (Some(w), Some(v)) if w > v) {
            "StaleSource"
        } else {
            "Published"
        };
        if outcome == "Published" {
            self.published_generation = Some(generation);
            self.watermark = version.or(self.watermark);
            self.held &= !release;
            self.accepted.push((operation, holder, format!("{operation}"), version));
        } else {
            self.refused.push(operation);
        }
        outcome
    }
}

#[test]
fn generated_schedules_of_versions_replays_and_takeovers_follow_the_contract() {
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    const TEST: &str = "generated_schedules_of_versions_replays_and_takeovers_follow_the_contract";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(db) = runtime.block_on(TestDatabase::shared(TEST)) else {
        return;
    };
    let caller = tokio::sync::Mutex::new(runtime.block_on(async { Caller::new(db.connect().await) }));
    let mut runner = TestRunner::new(Config {
        cases: 40,
        failure_persistence: None,
        ..Config::default()
    });
    let schedules = proptest::collection::vec(step(), 1..12);
    let result = runner.run(&schedules, |steps| {
        runtime.block_on(async {
            let caller = &mut *caller.lock().await;
            let key = provisioned(caller).await;
            let mut model = Model::default();
            for step in std::iter::once(Step::Takeover).chain(steps) {
                match step {
                    Step::Takeover => {
                        if !model.holders.is_empty() {
                            let forced = caller
                                .call("EXEC fence_admin.ForceRelease @ResourceKey = @P1", &[&key.as_str()])
                                .await;
                            prop_assert_eq!(forced.outcome(), "Fenced");
                        }
                        let owner = Uuid::new_v4();
                        let acquired = caller.acquire(&key, owner, 600).await;
                        prop_assert_eq!(acquired.outcome(), "Acquired");
                        model.holders.push((owner, acquired.big("Generation").unwrap()));
                        model.held = true;
                    }
                    Step::Publish {
                        holder,
                        version,
                        release,
                    } => {
                        let holder = holder % model.holders.len();
                        let (owner, generation) = model.holders[holder];
                        let operation = Uuid::new_v4();
                        let payload = format!("{operation}");
                        let args: [&dyn tiberius::ToSql; 7] = [
                            &key.as_str(),
                            &owner,
                            &generation,
                            &operation,
                            &payload.as_str(),
                            &release,
                            &version,
                        ];
                        let answer = caller.call(PUBLISH, &args).await;
                        if version.is_some_and(|v| v < 0) {
                            prop_assert_eq!(answer.error_number(), Some(50109));
                            continue;
                        }
                        let expected = model.publish(holder, operation, version, release);
                        prop_assert_eq!(answer.outcome(), expected, "{:?} by holder {}", version, holder);
                    }
                    Step::Replay { publish, version } => {
                        if model.accepted.is_empty() {
                            continue;
                        }
                        let (operation, holder, payload, _) = model.accepted[publish % model.accepted.len()].clone();
                        let (owner, generation) = model.holders[holder];
                        let args: [&dyn tiberius::ToSql; 7] = [
                            &key.as_str(),
                            &owner,
                            &generation,
                            &operation,
                            &payload.as_str(),
                            &false,
                            &version,
                        ];
                        let answer = caller.call(PUBLISH, &args).await;
                        if version.is_some_and(|v| v < 0) {
                            prop_assert_eq!(answer.error_number(), Some(50109));
                        } else {
                            prop_assert_eq!(answer.outcome(), "AlreadyPublished");
                        }
                    }
                }
            }
            // What readers see is what the model says, and each operation is
            // recorded exactly when it was accepted.
            let last = model.accepted.last();
            let seen = seen(caller, &key).await;
            prop_assert_eq!(seen.watermark, model.watermark);
            prop_assert_eq!(seen.payload.as_deref(), last.map(|(_, _, p, _)| p.as_str()));
            prop_assert_eq!(seen.published_with, last.and_then(|(_, _, _, v)| *v));
            for (operation, _, _, version) in &model.accepted {
                prop_assert_eq!(
                    outcome_of(caller, *operation).await,
                    ("Published".to_string(), *version)
                );
            }
            for operation in &model.refused {
                prop_assert_eq!(outcome_of(caller, *operation).await, ("Unknown".to_string(), None));
            }
            Ok::<(), TestCaseError>(())
        })
    });
    drop(caller);
    runtime.block_on(db.drop());
    result.unwrap();
}
