//! Contract v1.5: `fence_admin.ForceRelease` and `ResetSourceVersion` are
//! idempotent by operation id. A call with `@OperationId` records what it
//! answered; a replay answers that again and changes nothing, so a retry
//! after a lost reply never fences a holder that acquired since, nor lowers a
//! source version a publish raised since. The id names one command on one
//! key; without one the procedures behave as before. Called with raw EXECs,
//! as an operator's script would; each test uses keys of its own in the
//! binary's shared database.

use crate::support;

use std::time::Duration;

use support::TestDatabase;
use support::caller::{Answer, Caller};
use uuid::Uuid;

const PROVISION: &str = "EXEC fence_api.Provision @ResourceKey = @P1";
const FORCE_RELEASE: &str = "EXEC fence_admin.ForceRelease @ResourceKey = @P1";
const FORCE_RELEASE_AS: &str = "EXEC fence_admin.ForceRelease @ResourceKey = @P1, @OperationId = @P2";
const RESET: &str = "EXEC fence_admin.ResetSourceVersion @ResourceKey = @P1, @SourceVersion = @P2";
const RESET_AS: &str =
    "EXEC fence_admin.ResetSourceVersion @ResourceKey = @P1, @SourceVersion = @P2, @OperationId = @P3";
const PUBLISH: &str = "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, \
                       @OperationId = @P4, @Payload = @P5, @Release = @P6, @SourceVersion = @P7";
const NIL: Uuid = Uuid::nil();

/// A fresh key with a fence row.
async fn provisioned(caller: &mut Caller) -> String {
    let key = format!("operator:{}", Uuid::new_v4().simple());
    assert_eq!(caller.call(PROVISION, &[&key.as_str()]).await.outcome(), "Created");
    key
}

/// Acquires `key` as a fresh owner: the owner and its generation.
async fn acquire(caller: &mut Caller, key: &str) -> (Uuid, i64) {
    let owner = Uuid::new_v4();
    let acquired = caller.acquire(key, owner, 600).await;
    assert_eq!(acquired.outcome(), "Acquired");
    (owner, acquired.big("Generation").unwrap())
}

/// Acquires `key` and publishes a result built from `version` of its source.
async fn publish_from(caller: &mut Caller, key: &str, version: i64) {
    let (owner, generation) = acquire(caller, key).await;
    let arguments: [&dyn tiberius::ToSql; 7] = [
        &key,
        &owner,
        &generation,
        &Uuid::new_v4(),
        &"payload",
        &true,
        &Some(version),
    ];
    assert_eq!(caller.call(PUBLISH, &arguments).await.outcome(), "Published");
}

/// Inspect's generation and source version of `key`.
async fn generation_and_source(caller: &mut Caller, key: &str) -> (i64, Option<i64>) {
    let inspected = caller.inspect(key).await;
    (inspected.big("Generation").unwrap(), inspected.big("SourceVersion"))
}

async fn force_release(caller: &mut Caller, key: &str, operation: Uuid) -> Answer {
    caller.call(FORCE_RELEASE_AS, &[&key, &operation]).await
}

async fn reset(caller: &mut Caller, key: &str, version: Option<i64>, operation: Uuid) -> Answer {
    caller.call(RESET_AS, &[&key, &version, &operation]).await
}

/// The outcome and generation a ForceRelease answered.
fn fenced(answer: &Answer) -> (String, Option<i64>) {
    (answer.outcome(), answer.big("Generation"))
}

/// The outcome and previous source version a ResetSourceVersion answered.
fn was_reset(answer: &Answer) -> (String, Option<i64>) {
    (answer.outcome(), answer.big("PreviousSourceVersion"))
}

/// The refusal's number, after checking its message names `@OperationId`.
fn refused(answer: &Answer) -> u32 {
    match answer {
        Answer::Error { number, message } => {
            assert!(message.contains("@OperationId"), "{number}: {message}");
            *number
        }
        Answer::Row(_) => panic!("expected a refusal of @OperationId, got {answer:?}"),
    }
}

/// Rows of one query's single int.
async fn count(db: &TestDatabase, sql: &str) -> i32 {
    db.query(sql).await[0].get::<i32, _>(0).unwrap()
}

/// Tenures of `key` that an operator ended.
async fn force_released_tenures(db: &TestDatabase, key: &str) -> i32 {
    count(
        db,
        &format!("SELECT COUNT(*) FROM fence.Tenure WHERE ResourceKey = N'{key}' AND Ending = N'ForceReleased'"),
    )
    .await
}

/// Operator operations recorded for `key`.
async fn recorded(db: &TestDatabase, key: &str) -> i32 {
    count(
        db,
        &format!("SELECT COUNT(*) FROM fence.OperatorOperation WHERE ResourceKey = N'{key}'"),
    )
    .await
}

#[tokio::test]
async fn a_force_release_replayed_with_its_operation_id_answers_its_generation_and_fences_no_new_holder() {
    const TEST: &str = "a_force_release_replayed_with_its_operation_id_answers_its_generation_and_fences_no_new_holder";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let key = provisioned(&mut caller).await;
    let (_, stuck) = acquire(&mut caller, &key).await;
    let operation = Uuid::new_v4();

    let first = force_release(&mut caller, &key, operation).await;
    assert_eq!(fenced(&first), ("Fenced".to_string(), Some(stuck + 1)));

    // A service takes the lease; then the operator's retry of the same
    // command arrives (its first reply was lost, say).
    let (successor, taken) = acquire(&mut caller, &key).await;
    assert_eq!(taken, stuck + 2);
    let replay = force_release(&mut caller, &key, operation).await;
    assert_eq!(
        fenced(&replay),
        fenced(&first),
        "a replay answers what the first call did"
    );

    // Nothing changed: the successor still holds its generation.
    assert_eq!(caller.renew(&key, successor, taken, 600).await.outcome(), "Renewed");
    assert_eq!(generation_and_source(&mut caller, &key).await.0, taken);
    assert_eq!(force_released_tenures(&db, &key).await, 1);
    assert_eq!(recorded(&db, &key).await, 1);
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn without_an_operation_id_each_command_applies_and_records_nothing() {
    const TEST: &str = "without_an_operation_id_each_command_applies_and_records_nothing";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let key = provisioned(&mut caller).await;
    let (_, held) = acquire(&mut caller, &key).await;

    let first = caller.call(FORCE_RELEASE, &[&key.as_str()]).await;
    let second = caller.call(FORCE_RELEASE, &[&key.as_str()]).await;
    assert_eq!(
        [fenced(&first), fenced(&second)],
        [
            ("Fenced".to_string(), Some(held + 1)),
            ("Fenced".to_string(), Some(held + 2))
        ],
        "each call raises the generation, as before contract v1.5"
    );
    let set = caller.call(RESET, &[&key.as_str(), &Some(7i64)]).await;
    let again = caller.call(RESET, &[&key.as_str(), &Some(7i64)]).await;
    assert_eq!(
        [was_reset(&set), was_reset(&again)],
        [("Reset".to_string(), None), ("Reset".to_string(), Some(7))]
    );
    assert_eq!(recorded(&db, &key).await, 0);
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn an_operation_id_names_one_command_on_one_key_and_nil_is_refused() {
    const TEST: &str = "an_operation_id_names_one_command_on_one_key_and_nil_is_refused";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let (key, other) = (provisioned(&mut caller).await, provisioned(&mut caller).await);
    let operation = Uuid::new_v4();
    let (provisioned_at, _) = generation_and_source(&mut caller, &key).await;
    assert_eq!(
        fenced(&force_release(&mut caller, &key, operation).await),
        ("Fenced".to_string(), Some(provisioned_at + 1))
    );
    let before = generation_and_source(&mut caller, &other).await;

    // Another key, another command: refused, and nothing changed.
    assert_eq!(refused(&force_release(&mut caller, &other, operation).await), 50130);
    assert_eq!(refused(&reset(&mut caller, &key, Some(1), operation).await), 50130);
    assert_eq!(refused(&reset(&mut caller, &other, Some(1), operation).await), 50130);
    assert_eq!(generation_and_source(&mut caller, &other).await, before);
    assert_eq!(
        generation_and_source(&mut caller, &key).await,
        (provisioned_at + 1, None),
        "fenced once"
    );

    // A reset's id names its source version too.
    let reset_id = Uuid::new_v4();
    assert_eq!(
        was_reset(&reset(&mut caller, &other, Some(5), reset_id).await),
        ("Reset".to_string(), None)
    );
    assert_eq!(refused(&reset(&mut caller, &other, Some(6), reset_id).await), 50130);
    assert_eq!(refused(&reset(&mut caller, &other, None, reset_id).await), 50130);
    assert_eq!(
        was_reset(&reset(&mut caller, &other, Some(5), reset_id).await),
        ("Reset".to_string(), None)
    );
    assert_eq!(generation_and_source(&mut caller, &other).await.1, Some(5));

    // The nil id is no id: refused before anything is locked or changed.
    let (generation, _) = generation_and_source(&mut caller, &key).await;
    assert_eq!(refused(&force_release(&mut caller, &key, NIL).await), 50105);
    assert_eq!(refused(&reset(&mut caller, &key, Some(1), NIL).await), 50105);
    assert_eq!(generation_and_source(&mut caller, &key).await, (generation, None));
    assert_eq!(recorded(&db, &key).await, 1);
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn a_reset_replayed_after_a_newer_publish_answers_its_first_reset_and_keeps_the_newer_source() {
    const TEST: &str = "a_reset_replayed_after_a_newer_publish_answers_its_first_reset_and_keeps_the_newer_source";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let key = provisioned(&mut caller).await;
    publish_from(&mut caller, &key, 100).await;

    // The feed restarted: the operator lowers the watermark to 0, and a
    // build from offset 5 publishes.
    let operation = Uuid::new_v4();
    let first = reset(&mut caller, &key, Some(0), operation).await;
    assert_eq!(was_reset(&first), ("Reset".to_string(), Some(100)));
    publish_from(&mut caller, &key, 5).await;

    // The operator's retry of the same reset answers the first one and
    // leaves 5: a build from offset 2 stays refused.
    let replay = reset(&mut caller, &key, Some(0), operation).await;
    assert_eq!(was_reset(&replay), was_reset(&first));
    assert_eq!(generation_and_source(&mut caller, &key).await.1, Some(5));
    assert_eq!(recorded(&db, &key).await, 1);
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn a_command_on_a_key_without_a_fence_row_is_recorded_and_replayed_as_not_provisioned() {
    const TEST: &str = "a_command_on_a_key_without_a_fence_row_is_recorded_and_replayed_as_not_provisioned";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let key = format!("operator:{}", Uuid::new_v4().simple());
    let (release_id, reset_id) = (Uuid::new_v4(), Uuid::new_v4());
    let released = force_release(&mut caller, &key, release_id).await;
    assert_eq!(fenced(&released), ("NotProvisioned".to_string(), None));
    let was = reset(&mut caller, &key, Some(3), reset_id).await;
    assert_eq!(was_reset(&was), ("NotProvisioned".to_string(), None));

    // The key is provisioned and taken meanwhile: the replays still answer
    // what the first calls did, and fence nobody.
    assert_eq!(caller.call(PROVISION, &[&key.as_str()]).await.outcome(), "Created");
    let (holder, generation) = acquire(&mut caller, &key).await;
    assert_eq!(
        fenced(&force_release(&mut caller, &key, release_id).await),
        fenced(&released)
    );
    assert_eq!(
        was_reset(&reset(&mut caller, &key, Some(3), reset_id).await),
        was_reset(&was)
    );
    assert_eq!(caller.renew(&key, holder, generation, 600).await.outcome(), "Renewed");
    assert_eq!(generation_and_source(&mut caller, &key).await, (generation, None));
    drop(caller);
    db.drop().await;
}

/// Holds the fence rows of `keys` in an open transaction on a session of its
/// own, so the calls sent meanwhile queue for them.
async fn hold_rows(db: &TestDatabase, keys: &[&str]) -> Caller {
    let mut holder = Caller::new(db.connect().await);
    let rows = keys
        .iter()
        .map(|key| format!("UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = N'{key}';"))
        .collect::<String>();
    holder
        .batch(&format!("BEGIN TRANSACTION; {rows}"))
        .await
        .expect("locking the fence rows");
    holder
}

/// Runs `calls` at once on sessions of their own, each `(key, id)` a
/// ForceRelease, while a transaction holds the rows they need; lets the rows
/// go once every call had time to queue.
async fn at_once(db: &TestDatabase, calls: &[(&str, Uuid)]) -> Vec<Answer> {
    let mut callers = Vec::new();
    for _ in calls {
        callers.push(Caller::new(db.connect().await));
    }
    let keys: Vec<&str> = calls.iter().map(|(key, _)| *key).collect();
    let mut holder = hold_rows(db, &keys).await;
    let sent = futures_util::future::join_all(
        callers
            .iter_mut()
            .zip(calls)
            .map(|(caller, (key, operation))| force_release(caller, key, *operation)),
    );
    let release = async {
        // Well inside the procedures' 5 s wait for the row.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        holder.commit().await.expect("committing the holder");
    };
    let (answers, ()) = tokio::join!(sent, release);
    answers
}

#[tokio::test]
async fn two_calls_of_one_operation_id_at_once_apply_once() {
    const TEST: &str = "two_calls_of_one_operation_id_at_once_apply_once";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let key = provisioned(&mut caller).await;
    let (_, held) = acquire(&mut caller, &key).await;

    // On one key: the second waits for the first's row lock, then finds its
    // record and answers it.
    let operation = Uuid::new_v4();
    let answers = at_once(&db, &[(&key, operation), (&key, operation)]).await;
    for answer in &answers {
        assert_eq!(fenced(answer), ("Fenced".to_string(), Some(held + 1)), "{answers:?}");
    }
    assert_eq!(generation_and_source(&mut caller, &key).await.0, held + 1);
    assert_eq!(force_released_tenures(&db, &key).await, 1);

    // On two keys: one applies, the other is refused, whichever wins.
    let other = provisioned(&mut caller).await;
    let (_, other_held) = acquire(&mut caller, &other).await;
    let operation = Uuid::new_v4();
    let answers = at_once(&db, &[(&key, operation), (&other, operation)]).await;
    let applied: Vec<bool> = answers
        .iter()
        .map(|answer| match answer {
            Answer::Row(_) => true,
            Answer::Error { .. } => {
                assert_eq!(refused(answer), 50130);
                false
            }
        })
        .collect();
    assert_eq!(applied.iter().filter(|a| **a).count(), 1, "{answers:?}");
    let generations = [
        generation_and_source(&mut caller, &key).await.0,
        generation_and_source(&mut caller, &other).await.0,
    ];
    let expected = if applied[0] {
        [held + 2, other_held]
    } else {
        [held + 1, other_held + 1]
    };
    assert_eq!(generations, expected, "{answers:?}");
    drop(caller);
    db.drop().await;
}

/// Records `operation` for `key` in a transaction left open, as a racing
/// first call of the id would have done just before it commits: a call sent
/// meanwhile does not see it, and its own record of the id waits for it.
async fn recording(db: &TestDatabase, operation: Uuid, key: &str, command: &str, values: &str) -> Caller {
    let mut racer = Caller::new(db.connect().await);
    racer
        .batch(&format!(
            "BEGIN TRANSACTION; INSERT INTO fence.OperatorOperation \
             (OperationId, Command, ResourceKey, Outcome, Generation, SourceVersion, PreviousSourceVersion, \
              RecordedAtUtc) VALUES ('{operation}', N'{command}', N'{key}', {values}, SYSUTCDATETIME());"
        ))
        .await
        .expect("recording the racing call");
    racer
}

/// Sends `call` while `racer`'s record is uncommitted, and commits it once
/// the call had time to queue behind it.
async fn behind(racer: &mut Caller, call: impl Future<Output = Answer>) -> Answer {
    let commit = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        racer.commit().await.expect("committing the racing call");
    };
    let (answer, ()) = tokio::join!(call, commit);
    answer
}

#[tokio::test]
async fn a_call_that_loses_the_race_for_its_operation_id_changes_nothing_and_answers_the_winner() {
    const TEST: &str = "a_call_that_loses_the_race_for_its_operation_id_changes_nothing_and_answers_the_winner";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let key = provisioned(&mut caller).await;
    publish_from(&mut caller, &key, 77).await;
    let (holder, held) = acquire(&mut caller, &key).await;

    // The same command on the same key won: this call answers its record (a
    // generation it could not have made itself) and fences nobody.
    let operation = Uuid::new_v4();
    let mut racer = recording(&db, operation, &key, "ForceRelease", "N'Fenced', 4242, NULL, NULL").await;
    let answer = behind(&mut racer, force_release(&mut caller, &key, operation)).await;
    assert_eq!(fenced(&answer), ("Fenced".to_string(), Some(4242)));
    let reset_id = Uuid::new_v4();
    let mut racer = recording(&db, reset_id, &key, "ResetSourceVersion", "N'Reset', NULL, 5, 99").await;
    let answer = behind(&mut racer, reset(&mut caller, &key, Some(5), reset_id)).await;
    assert_eq!(was_reset(&answer), ("Reset".to_string(), Some(99)));

    // Another key won: refused.
    let other = Uuid::new_v4();
    let mut racer = recording(
        &db,
        other,
        "operator:elsewhere",
        "ForceRelease",
        "N'NotProvisioned', NULL, NULL, NULL",
    )
    .await;
    let answer = behind(&mut racer, force_release(&mut caller, &key, other)).await;
    assert_eq!(refused(&answer), 50130);

    // None of the three changed the key.
    assert_eq!(caller.renew(&key, holder, held, 600).await.outcome(), "Renewed");
    assert_eq!(generation_and_source(&mut caller, &key).await, (held, Some(77)));
    assert_eq!(force_released_tenures(&db, &key).await, 0);
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn the_database_speaks_the_contract_this_client_needs() {
    const TEST: &str = "the_database_speaks_the_contract_this_client_needs";
    let Some(db) = TestDatabase::shared(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let version = caller.call("EXEC fence_api.ContractVersion", &[]).await;
    let Answer::Row(row) = &version else {
        panic!("{version:?}")
    };
    assert_eq!(
        (row.get::<i32, _>("Major"), row.get::<i32, _>("Minor")),
        (Some(1), Some(8)),
        "v1.8 added lease sets and slots"
    );
    assert_eq!(fencepost::client::CONTRACT_VERSION.to_string(), "v1.8");
    drop(caller);
    db.drop().await;
}
