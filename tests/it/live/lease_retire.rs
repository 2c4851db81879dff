//! Contract v1.6: `fence_admin.Retire` removes a key with its publish
//! records and history (its operator records stay for their replays), refuses while the key is held, and never lets a
//! generation go back: the key provisioned again (and any key provisioned
//! afterwards) starts at the retired generation, so its old holders, a
//! replay of its old publish and an operator's replayed retirement are all
//! refused or answered without effect. Each test has a database of its own:
//! a retirement raises the starting generation of every key provisioned in
//! it afterwards.

use crate::support;

use support::TestDatabase;
use support::binary::stderr;
use support::caller::{Answer, Caller, GET_OUTCOME, RENEW};
use support::lease::{json, lease_cli};
use uuid::Uuid;

const PROVISION: &str = "EXEC fence_api.Provision @ResourceKey = @P1";
const RETIRE: &str = "EXEC fence_admin.Retire @ResourceKey = @P1";
const RETIRE_AS: &str = "EXEC fence_admin.Retire @ResourceKey = @P1, @OperationId = @P2";
const FORCE_RELEASE_AS: &str = "EXEC fence_admin.ForceRelease @ResourceKey = @P1, @OperationId = @P2";
const PUBLISH: &str = "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, \
                       @OperationId = @P4, @Payload = @P5, @Release = @P6";
const RELEASE: &str = "EXEC fence_api.Release @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";

async fn acquire(caller: &mut Caller, key: &str) -> (Uuid, i64) {
    let owner = Uuid::new_v4();
    let acquired = caller.acquire(key, owner, 600).await;
    assert_eq!(acquired.outcome(), "Acquired");
    (owner, acquired.big("Generation").unwrap())
}

async fn publish(
    caller: &mut Caller,
    key: &str,
    owner: Uuid,
    generation: i64,
    operation: Uuid,
    release: bool,
) -> Answer {
    caller
        .call(PUBLISH, &[&key, &owner, &generation, &operation, &"payload", &release])
        .await
}

async fn count(db: &TestDatabase, sql: &str) -> i32 {
    db.query(sql).await[0].get::<i32, _>(0).unwrap()
}

/// Rows of `table` about `key`.
async fn rows_of(db: &TestDatabase, table: &str, key: &str) -> i32 {
    count(
        db,
        &format!("SELECT COUNT(*) FROM {table} WHERE ResourceKey = N'{key}'"),
    )
    .await
}

/// The error number of a refusal, after checking its message names `about`.
fn refused(answer: &Answer, about: &str) -> u32 {
    match answer {
        Answer::Error { number, message } => {
            assert!(message.contains(about), "{number}: {message}");
            *number
        }
        Answer::Row(_) => panic!("expected a refusal naming {about}, got {answer:?}"),
    }
}

#[tokio::test]
async fn a_retired_key_leaves_no_records_and_never_hands_out_a_generation_again() {
    const TEST: &str = "a_retired_key_leaves_no_records_and_never_hands_out_a_generation_again";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let key = "retire:report";
    assert_eq!(caller.call(PROVISION, &[&key]).await.outcome(), "Created");
    // A publish (recorded, with its released tenure), then a holder that an
    // operator fences out (a tenure and an operator record).
    let (first, first_generation) = acquire(&mut caller, key).await;
    let published = Uuid::new_v4();
    let answer = publish(&mut caller, key, first, first_generation, published, true).await;
    assert_eq!(answer.outcome(), "Published");
    let (stuck, stuck_generation) = acquire(&mut caller, key).await;
    let answer = caller.call(FORCE_RELEASE_AS, &[&key, &Uuid::new_v4()]).await;
    assert_eq!(answer.outcome(), "Fenced");
    let retired_at = answer.big("Generation").unwrap();

    let retirement = Uuid::new_v4();
    let answer = caller.call(RETIRE_AS, &[&key, &retirement]).await;
    assert_eq!(
        (answer.outcome(), answer.big("Generation")),
        ("Retired".into(), Some(retired_at))
    );
    assert_eq!(rows_of(&db, "fence.Resource", key).await, 0);
    assert_eq!(rows_of(&db, "fence.PublishedOperation", key).await, 0);
    assert_eq!(rows_of(&db, "fence.Tenure", key).await, 0);
    assert_eq!(
        count(
            &db,
            &format!(
                "SELECT COUNT(*) FROM fence.OperatorOperation WHERE ResourceKey = N'{key}' AND Command <> N'Retire'"
            )
        )
        .await,
        1,
        "operator records stay, for their replays, until they are pruned"
    );
    assert_eq!(caller.call(GET_OUTCOME, &[&published]).await.outcome(), "Unknown");
    // Between retirement and a new provision, the key is simply unknown.
    assert_eq!(
        publish(&mut caller, key, stuck, stuck_generation, Uuid::new_v4(), false)
            .await
            .outcome(),
        "NotProvisioned"
    );

    // Provisioned again, the key starts where it ended: nothing issued before
    // is issued again, and nobody holds its starting generation.
    assert_eq!(caller.call(PROVISION, &[&key]).await.outcome(), "Created");
    assert_eq!(caller.inspect(key).await.big("Generation"), Some(retired_at));
    // The old holders, and a replay of the old publish, are refused.
    let answer = publish(&mut caller, key, stuck, stuck_generation, Uuid::new_v4(), false).await;
    assert_eq!(answer.outcome(), "Superseded");
    let answer = publish(&mut caller, key, first, first_generation, published, true).await;
    assert_eq!(
        answer.outcome(),
        "Superseded",
        "a replayed publish of a retired generation"
    );
    let renewed = caller.call(RENEW, &[&key, &stuck, &stuck_generation, &600i32]).await;
    assert_ne!(renewed.outcome(), "Renewed");
    let (_, next) = acquire(&mut caller, key).await;
    assert!(next > retired_at, "generation {next} after retiring at {retired_at}");
    // Any key provisioned later starts at the mark too.
    let other = "retire:other";
    assert_eq!(caller.call(PROVISION, &[&other]).await.outcome(), "Created");
    assert_eq!(caller.inspect(other).await.big("Generation"), Some(retired_at));

    // The operator's retry of the retirement answers what it did, and does
    // not retire the key provisioned since.
    let replay = caller.call(RETIRE_AS, &[&key, &retirement]).await;
    assert_eq!(
        (replay.outcome(), replay.big("Generation")),
        ("Retired".into(), Some(retired_at))
    );
    assert_eq!(rows_of(&db, "fence.Resource", key).await, 1);
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn retire_refuses_a_held_key_and_bad_input_changing_nothing() {
    const TEST: &str = "retire_refuses_a_held_key_and_bad_input_changing_nothing";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let key = "retire:held";
    assert_eq!(caller.call(PROVISION, &[&key]).await.outcome(), "Created");
    let (owner, generation) = acquire(&mut caller, key).await;

    let answer = caller.call(RETIRE_AS, &[&key, &Uuid::new_v4()]).await;
    assert_eq!(refused(&answer, "held"), 50131);
    assert_eq!(rows_of(&db, "fence.Resource", key).await, 1);
    assert_eq!(
        rows_of(&db, "fence.OperatorOperation", key).await,
        0,
        "a refusal records nothing"
    );
    assert_eq!(
        caller
            .call(RENEW, &[&key, &owner, &generation, &600i32])
            .await
            .outcome(),
        "Renewed",
        "the holder keeps its lease"
    );

    let null = caller.call("EXEC fence_admin.Retire @ResourceKey = NULL", &[]).await;
    assert_eq!(refused(&null, "@ResourceKey"), 50101);
    assert_eq!(refused(&caller.call(RETIRE, &[&""]).await, "@ResourceKey"), 50101);
    assert_eq!(
        refused(&caller.call(RETIRE, &[&"trailing "]).await, "@ResourceKey"),
        50101
    );
    let nil = Uuid::nil();
    assert_eq!(
        refused(&caller.call(RETIRE_AS, &[&key, &nil]).await, "@OperationId"),
        50105
    );
    // An id another command used.
    let used = Uuid::new_v4();
    assert_eq!(
        caller
            .call(FORCE_RELEASE_AS, &[&"retire:elsewhere", &used])
            .await
            .outcome(),
        "NotProvisioned"
    );
    assert_eq!(
        refused(&caller.call(RETIRE_AS, &[&key, &used]).await, "@OperationId"),
        50130
    );
    // Inside a caller's transaction.
    caller.begin("READ COMMITTED").await.unwrap();
    let inside = caller.call(RETIRE, &[&key]).await;
    caller.rollback().await;
    assert_eq!(refused(&inside, "transaction"), 50128);
    assert_eq!(rows_of(&db, "fence.Resource", key).await, 1);

    // A key with no fence row; then the released key retires.
    assert_eq!(
        caller.call(RETIRE, &[&"retire:never"]).await.outcome(),
        "NotProvisioned"
    );
    let released = caller.call(RELEASE, &[&key, &owner, &generation]).await;
    assert_eq!(released.outcome(), "Released");
    assert_eq!(caller.call(RETIRE, &[&key]).await.outcome(), "Retired");
    // Without an operation id the retirement is still recorded, under a
    // fresh id, so which key was retired and when stays auditable.
    assert_eq!(
        count(
            &db,
            &format!(
                "SELECT COUNT(*) FROM fence.OperatorOperation WHERE ResourceKey = N'{key}' \
                 AND Command = N'Retire' AND Outcome = N'Retired' AND Generation = {generation}"
            )
        )
        .await,
        1
    );
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn lease_retire_and_prune_outcomes_on_the_command_line() {
    const TEST: &str = "lease_retire_and_prune_outcomes_on_the_command_line";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let ado = db.ado();
    let mut caller = Caller::new(db.connect().await);
    let key = "retire:cli";
    assert_eq!(caller.call(PROVISION, &[&key]).await.outcome(), "Created");
    let (owner, generation) = acquire(&mut caller, key).await;

    let held = lease_cli(&["retire", key], &ado).await;
    assert_eq!(held.status.code(), Some(2), "{}", stderr(&held));
    assert!(stderr(&held).contains("force-release"), "{}", stderr(&held));

    let released = caller.call(RELEASE, &[&key, &owner, &generation]).await;
    assert_eq!(released.outcome(), "Released");
    let id = Uuid::new_v4().to_string();
    let retired = lease_cli(&["retire", key, "--operation-id", &id, "--format", "json"], &ado).await;
    assert_eq!(retired.status.code(), Some(0), "{}", stderr(&retired));
    let document = json(&retired);
    assert_eq!(document["outcome"], "Retired");
    assert_eq!(document["generation"], generation);
    assert_eq!(document["operation_id"], id.as_str());
    // The same id again answers the same, and a key with no row exits 1.
    let replayed = json(&lease_cli(&["retire", key, "--operation-id", &id, "--format", "json"], &ado).await);
    assert_eq!(replayed, document);
    assert_eq!(lease_cli(&["retire", "retire:none"], &ado).await.status.code(), Some(1));

    let pruned = lease_cli(&["prune-outcomes", "--older-than", "30d", "--format", "json"], &ado).await;
    assert_eq!(pruned.status.code(), Some(0), "{}", stderr(&pruned));
    assert_eq!(json(&pruned)["outcome"], "Pruned");
    let bad = lease_cli(&["prune-outcomes", "--older-than", "0"], &ado).await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("1 to 36500"), "{}", stderr(&bad));
    drop(caller);
    db.drop().await;
}

const RESET_AS: &str =
    "EXEC fence_admin.ResetSourceVersion @ResourceKey = @P1, @SourceVersion = @P2, @OperationId = @P3";
const PUBLISH_FROM: &str = "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, \
                            @OperationId = @P4, @Payload = @P5, @Release = @P6, @SourceVersion = @P7";

#[tokio::test]
async fn operator_commands_replayed_after_a_retirement_answer_their_record_and_touch_no_new_key() {
    const TEST: &str = "operator_commands_replayed_after_a_retirement_answer_their_record_and_touch_no_new_key";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let key = "retire:replayed";
    assert_eq!(caller.call(PROVISION, &[&key]).await.outcome(), "Created");
    // An operator fences a holder out (its reply lost), then resets the
    // source version; then the key retires and is provisioned again.
    let _stuck = acquire(&mut caller, key).await;
    let force = Uuid::new_v4();
    let fenced = caller.call(FORCE_RELEASE_AS, &[&key, &force]).await;
    assert_eq!(fenced.outcome(), "Fenced");
    let fenced_at = fenced.big("Generation");
    let reset = Uuid::new_v4();
    let reset_answer = caller.call(RESET_AS, &[&key, &Some(5i64), &reset]).await;
    assert_eq!(reset_answer.outcome(), "Reset");
    let reset_previous = reset_answer.big("PreviousSourceVersion");
    assert_eq!(caller.call(RETIRE, &[&key]).await.outcome(), "Retired");
    assert_eq!(caller.call(PROVISION, &[&key]).await.outcome(), "Created");
    let (holder, generation) = acquire(&mut caller, key).await;
    let arguments: [&dyn tiberius::ToSql; 7] = [
        &key,
        &holder,
        &generation,
        &Uuid::new_v4(),
        &"payload",
        &false,
        &Some(100i64),
    ];
    assert_eq!(caller.call(PUBLISH_FROM, &arguments).await.outcome(), "Published");

    // The retried ForceRelease answers its record and fences nobody.
    let replay = caller.call(FORCE_RELEASE_AS, &[&key, &force]).await;
    assert_eq!(
        (replay.outcome(), replay.big("Generation")),
        ("Fenced".into(), fenced_at)
    );
    let renewed = caller.call(RENEW, &[&key, &holder, &generation, &600i32]).await;
    assert_eq!(renewed.outcome(), "Renewed", "the new holder keeps its lease");
    // The retried reset answers its record and leaves the newer source.
    let replay = caller.call(RESET_AS, &[&key, &Some(5i64), &reset]).await;
    assert_eq!(
        (replay.outcome(), replay.big("PreviousSourceVersion")),
        ("Reset".into(), reset_previous)
    );
    assert_eq!(caller.inspect(key).await.big("SourceVersion"), Some(100));

    // A later retirement keeps an earlier one's record: replaying the
    // earlier id answers it and does not retire the key provisioned since.
    let released = caller.call(RELEASE, &[&key, &holder, &generation]).await;
    assert_eq!(released.outcome(), "Released");
    let first = Uuid::new_v4();
    let first_answer = caller.call(RETIRE_AS, &[&key, &first]).await;
    assert_eq!(first_answer.outcome(), "Retired");
    assert_eq!(caller.call(PROVISION, &[&key]).await.outcome(), "Created");
    assert_eq!(
        caller.call(RETIRE_AS, &[&key, &Uuid::new_v4()]).await.outcome(),
        "Retired"
    );
    assert_eq!(caller.call(PROVISION, &[&key]).await.outcome(), "Created");
    let replay = caller.call(RETIRE_AS, &[&key, &first]).await;
    assert_eq!(
        (replay.outcome(), replay.big("Generation")),
        ("Retired".into(), first_answer.big("Generation"))
    );
    assert_eq!(
        rows_of(&db, "fence.Resource", key).await,
        1,
        "the key stays provisioned"
    );
    drop(caller);
    db.drop().await;
}
