//! Contract v1.6: `fence_admin.PruneOutcomes` deletes the outcome records
//! older than the replay window an operator chooses. What a replay answers
//! after its record is gone is what the contract says: a publish is judged
//! as a new publish of its generation and refused (never a second publish
//! under one generation), `GetOutcome` answers `Unknown`, and an operator
//! command applies again. The test has a database of its own, where it ages
//! records by hand.

use crate::support;

use support::TestDatabase;
use support::caller::{Answer, Caller, GET_OUTCOME, READ_PUBLICATION};
use uuid::Uuid;

const PROVISION: &str = "EXEC fence_api.Provision @ResourceKey = @P1";
const PRUNE: &str = "EXEC fence_admin.PruneOutcomes @OlderThanDays = @P1";
const FORCE_RELEASE_AS: &str = "EXEC fence_admin.ForceRelease @ResourceKey = @P1, @OperationId = @P2";
const PUBLISH: &str = "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, \
                       @OperationId = @P4, @Payload = @P5, @Release = @P6";

async fn acquired(caller: &mut Caller, key: &str) -> (Uuid, i64) {
    assert_eq!(caller.call(PROVISION, &[&key]).await.outcome(), "Created");
    let owner = Uuid::new_v4();
    let answer = caller.acquire(key, owner, 600).await;
    assert_eq!(answer.outcome(), "Acquired");
    (owner, answer.big("Generation").unwrap())
}

fn refused(answer: &Answer, about: &str) -> u32 {
    match answer {
        Answer::Error { number, message } => {
            assert!(message.contains(about), "{number}: {message}");
            *number
        }
        Answer::Row(_) => panic!("expected a refusal naming {about}, got {answer:?}"),
    }
}

fn deleted(answer: &Answer) -> (String, Option<i32>, Option<i32>) {
    let Answer::Row(row) = answer else { panic!("{answer:?}") };
    (
        answer.outcome(),
        row.get::<i32, _>("PublishesDeleted"),
        row.get::<i32, _>("CommandsDeleted"),
    )
}

#[tokio::test]
async fn pruned_outcome_records_leave_a_replay_refused_and_never_publishing_twice() {
    const TEST: &str = "pruned_outcome_records_leave_a_replay_refused_and_never_publishing_twice";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    // An old publish whose holder keeps its lease, an old operator command,
    // and a fresh publish.
    let (owner, generation) = acquired(&mut caller, "prune:old").await;
    let old = Uuid::new_v4();
    let arguments: [&dyn tiberius::ToSql; 6] = [&"prune:old", &owner, &generation, &old, &"first", &false];
    assert_eq!(caller.call(PUBLISH, &arguments).await.outcome(), "Published");
    let command = Uuid::new_v4();
    let _ = acquired(&mut caller, "prune:fenced").await;
    let fenced = caller.call(FORCE_RELEASE_AS, &[&"prune:fenced", &command]).await;
    assert_eq!(fenced.outcome(), "Fenced");
    let (fresh_owner, fresh_generation) = acquired(&mut caller, "prune:fresh").await;
    let fresh = Uuid::new_v4();
    let arguments: [&dyn tiberius::ToSql; 6] = [&"prune:fresh", &fresh_owner, &fresh_generation, &fresh, &"x", &true];
    assert_eq!(caller.call(PUBLISH, &arguments).await.outcome(), "Published");
    db.exec(&format!(
        "UPDATE fence.PublishedOperation SET PublishedAtUtc = DATEADD(DAY, -10, PublishedAtUtc) WHERE OperationId = '{old}';
         UPDATE fence.OperatorOperation SET RecordedAtUtc = DATEADD(DAY, -10, RecordedAtUtc) WHERE OperationId = '{command}';"
    ))
    .await;

    let answer = caller.call(PRUNE, &[&7i32]).await;
    assert_eq!(deleted(&answer), ("Pruned".into(), Some(1), Some(1)));
    assert_eq!(caller.call(GET_OUTCOME, &[&old]).await.outcome(), "Unknown");
    assert_eq!(caller.call(GET_OUTCOME, &[&fresh]).await.outcome(), "Published");

    // The replay of the pruned publish, by the holder that still holds its
    // generation: refused, the first payload stays.
    let arguments: [&dyn tiberius::ToSql; 6] = [&"prune:old", &owner, &generation, &old, &"second", &false];
    assert_eq!(
        caller.call(PUBLISH, &arguments).await.outcome(),
        "GenerationAlreadyPublished"
    );
    let read = caller.call(READ_PUBLICATION, &[&"prune:old"]).await;
    let Answer::Row(row) = &read else { panic!("{read:?}") };
    assert_eq!(row.get::<&str, _>("Payload"), Some("first"));

    // An operator command replayed after its record is gone is a new command.
    let again = caller.call(FORCE_RELEASE_AS, &[&"prune:fenced", &command]).await;
    assert_eq!(again.big("Generation"), Some(fenced.big("Generation").unwrap() + 1));

    // Nothing recorded within the window goes; bad input and a caller's
    // transaction are refused.
    assert_eq!(
        deleted(&caller.call(PRUNE, &[&7i32]).await),
        ("Pruned".into(), Some(0), Some(0))
    );
    let none: Option<i32> = None;
    for days in [Some(0), Some(36501), none] {
        assert_eq!(refused(&caller.call(PRUNE, &[&days]).await, "@OlderThanDays"), 50123);
    }
    caller.begin("READ COMMITTED").await.unwrap();
    let inside = caller.call(PRUNE, &[&7i32]).await;
    caller.rollback().await;
    assert_eq!(refused(&inside, "transaction"), 50128);
    drop(caller);
    db.drop().await;
}
