//! The fence answers the same inside a caller's own transaction, whatever
//! isolation level the caller's stack picked, as it does under autocommit
//! (contract v1.1). Each schedule runs once per level, with every caller on a
//! connection of its own; a caller's transaction reads the fence row first, so
//! its locks or snapshot predate what the other caller then changes.

use crate::support;

use std::time::Duration;

use support::TestDatabase;
use support::caller::{Answer, Caller, LEVELS, engine_limit};
use support::proxy::Proxy;
use uuid::Uuid;

/// A step that is blocked longer than this is blocked by a lock the
/// procedure should not have left behind.
const BLOCKED: Duration = Duration::from_secs(20);

struct Fixture {
    db: TestDatabase,
    a: Caller,
    b: Caller,
    babelfish: bool,
}

async fn fixture(test: &str) -> Option<Fixture> {
    let db = TestDatabase::deployed(test).await?;
    let a = Caller::new(db.connect().await);
    let b = Caller::new(db.connect().await);
    let babelfish = db.is_babelfish().await;
    // SQL Server runs SNAPSHOT transactions only where the database allows them.
    if !babelfish {
        db.exec(&format!(
            "ALTER DATABASE [{}] SET ALLOW_SNAPSHOT_ISOLATION ON;",
            db.name
        ))
        .await;
    }
    Some(Fixture { db, a, b, babelfish })
}

async fn provision(caller: &mut Caller, name: &str) -> String {
    let key = format!("{name}:{}", Uuid::new_v4().simple());
    let answer = caller
        .call("EXEC fence_api.Provision @ResourceKey = @P1", &[&key.as_str()])
        .await;
    assert_eq!(answer.outcome(), "Created");
    key
}

/// Acquires under autocommit and returns the owner and generation.
async fn acquire(caller: &mut Caller, key: &str, seconds: i32) -> (Uuid, i64) {
    let owner = Uuid::new_v4();
    let answer = caller.acquire(key, owner, seconds).await;
    assert_eq!(answer.outcome(), "Acquired", "{answer:?}");
    (owner, answer.big("Generation").unwrap())
}

async fn wait_until_expired(caller: &mut Caller, key: &str) {
    for _ in 0..150 {
        let answer = caller.inspect(key).await;
        if let Answer::Row(row) = &answer
            && row.get::<bool, _>("IsHeld") == Some(false)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the lease on {key} never expired");
}

/// Opens the caller's transaction at `level` and reads the fence row, so the
/// transaction's locks or snapshot are in place before the other caller acts.
/// `Err` carries why the engine cannot run this level.
async fn begin_and_read(caller: &mut Caller, babelfish: bool, level: &str, key: &str) -> Result<(), String> {
    if let Err(e) = caller.begin(level).await {
        caller.rollback().await;
        return Err(engine_limit(babelfish, level, &e.to_string())
            .unwrap_or_else(|| panic!("BEGIN TRANSACTION at {level}: {e}")));
    }
    let answer = caller.inspect(key).await;
    assert_eq!(answer.outcome(), "Found", "{level}");
    Ok(())
}

/// The outcome of a call in the caller's transaction, or why this engine
/// cannot show it; anything else fails the test. An outcome is a row, not an
/// error, and leaves the caller's transaction open.
async fn outcome_in(caller: &mut Caller, babelfish: bool, level: &str, answer: Answer) -> Result<String, String> {
    match answer {
        Answer::Row(_) => {
            let outcome = answer.outcome();
            assert_eq!(
                caller.trancount().await,
                1,
                "{level}: answering {outcome} ended the caller's transaction"
            );
            Ok(outcome)
        }
        Answer::Error { number, message } => {
            caller.rollback().await;
            Err(engine_limit(babelfish, level, &message)
                .unwrap_or_else(|| panic!("{level}: error {number} instead of an outcome: {message}")))
        }
    }
}

async fn bounded<T>(what: &str, step: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(BLOCKED, step)
        .await
        .unwrap_or_else(|_| panic!("{what} stayed blocked for {BLOCKED:?}: a lock outlived the procedure"))
}

/// Notes a schedule's run at `level`: a level the engine could not show is a
/// skip with its reason, printed where it is seen.
fn record(test: &str, level: &'static str, result: Result<(), String>, ran: &mut Vec<&'static str>) {
    match result {
        Ok(()) => ran.push(level),
        Err(reason) => support::skip(test, &format!("at {level}: {reason}")),
    }
}

async fn superseded_publish(f: &mut Fixture, level: &'static str) -> Result<(), String> {
    let key = provision(&mut f.a, "superseded").await;
    let (owner_a, generation_a) = acquire(&mut f.a, &key, 2).await;
    begin_and_read(&mut f.a, f.babelfish, level, &key).await?;

    wait_until_expired(&mut f.b, &key).await;
    let (owner_b, generation_b) = bounded("B's acquire", acquire(&mut f.b, &key, 30)).await;
    assert_eq!(generation_b, generation_a + 1);

    let late = f.a.publish(&key, owner_a, generation_a, Uuid::new_v4(), "from A").await;
    let late = outcome_in(&mut f.a, f.babelfish, level, late).await?;
    f.a.commit().await.unwrap();
    assert_eq!(late, "Superseded", "{level}");

    begin_and_read(&mut f.b, f.babelfish, level, &key).await?;
    let own = f.b.publish(&key, owner_b, generation_b, Uuid::new_v4(), "from B").await;
    let own = outcome_in(&mut f.b, f.babelfish, level, own).await?;
    f.b.commit().await.unwrap();
    assert_eq!(own, "Published", "{level}");

    let read = f.a.call(support::caller::READ_PUBLICATION, &[&key.as_str()]).await;
    assert_eq!(read.big("PublishedGeneration"), Some(generation_b), "{level}");
    Ok(())
}

#[tokio::test]
async fn a_superseded_publish_is_refused_in_every_isolation_level() {
    let test = "a_superseded_publish_is_refused_in_every_isolation_level";
    let Some(mut f) = fixture(test).await else { return };
    let mut ran = Vec::new();
    for level in LEVELS {
        record(test, level, superseded_publish(&mut f, level).await, &mut ran);
    }
    assert!(ran.contains(&"READ COMMITTED"), "ran at {ran:?}");
    let Fixture { db, a, b, .. } = f;
    drop((a, b));
    db.drop().await;
}

/// Two tasks of one holder publish under one generation; the second, whose
/// transaction began before the first committed, is refused.
async fn second_publish(f: &mut Fixture, level: &'static str) -> Result<(), String> {
    let key = provision(&mut f.a, "second").await;
    let (owner, generation) = acquire(&mut f.a, &key, 60).await;
    begin_and_read(&mut f.b, f.babelfish, level, &key).await?;

    let first = f.a.publish(&key, owner, generation, Uuid::new_v4(), "first").await;
    assert_eq!(first.outcome(), "Published", "{level}");
    let second = bounded(
        "the second publish",
        f.b.publish(&key, owner, generation, Uuid::new_v4(), "second"),
    )
    .await;
    let second = outcome_in(&mut f.b, f.babelfish, level, second).await?;
    f.b.commit().await.unwrap();
    assert_eq!(second, "GenerationAlreadyPublished", "{level}");
    assert_eq!(payload(&mut f.a, &key).await, "first", "{level}");
    Ok(())
}

/// A publish replayed with its operation id, from a transaction that began
/// before the original committed, is a safe replay and writes nothing.
async fn replay(f: &mut Fixture, level: &'static str) -> Result<(), String> {
    let key = provision(&mut f.a, "replay").await;
    let (owner, generation) = acquire(&mut f.a, &key, 60).await;
    let operation = Uuid::new_v4();
    begin_and_read(&mut f.b, f.babelfish, level, &key).await?;

    let original = f.a.publish(&key, owner, generation, operation, "payload").await;
    assert_eq!(original.outcome(), "Published", "{level}");
    let again = bounded("the replay", f.b.publish(&key, owner, generation, operation, "changed")).await;
    let again = outcome_in(&mut f.b, f.babelfish, level, again).await?;
    f.b.commit().await.unwrap();
    assert_eq!(again, "AlreadyPublished", "{level}");
    assert_eq!(payload(&mut f.a, &key).await, "payload", "{level}");
    Ok(())
}

/// An acquire from a transaction that began before another owner took the
/// lease is answered `Busy`, never an update conflict.
async fn busy(f: &mut Fixture, level: &'static str) -> Result<(), String> {
    let key = provision(&mut f.a, "busy").await;
    begin_and_read(&mut f.b, f.babelfish, level, &key).await?;
    acquire(&mut f.a, &key, 60).await;

    let second = bounded("the second acquire", f.b.acquire(&key, Uuid::new_v4(), 60)).await;
    let second = outcome_in(&mut f.b, f.babelfish, level, second).await?;
    f.b.commit().await.unwrap();
    assert_eq!(second, "Busy", "{level}");
    Ok(())
}

async fn payload(caller: &mut Caller, key: &str) -> String {
    match caller.call(support::caller::READ_PUBLICATION, &[&key]).await {
        Answer::Row(row) => row.get::<&str, _>("Payload").unwrap_or_default().to_string(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_second_publish_in_one_generation_is_refused_in_every_isolation_level() {
    let test = "a_second_publish_in_one_generation_is_refused_in_every_isolation_level";
    let Some(mut f) = fixture(test).await else { return };
    let mut ran = Vec::new();
    for level in LEVELS {
        record(test, level, second_publish(&mut f, level).await, &mut ran);
    }
    assert!(ran.contains(&"READ COMMITTED"), "ran at {ran:?}");
    let Fixture { db, a, b, .. } = f;
    drop((a, b));
    db.drop().await;
}

#[tokio::test]
async fn a_replay_is_already_published_in_every_isolation_level() {
    let test = "a_replay_is_already_published_in_every_isolation_level";
    let Some(mut f) = fixture(test).await else { return };
    let mut ran = Vec::new();
    for level in LEVELS {
        record(test, level, replay(&mut f, level).await, &mut ran);
    }
    assert!(ran.contains(&"READ COMMITTED"), "ran at {ran:?}");
    let Fixture { db, a, b, .. } = f;
    drop((a, b));
    db.drop().await;
}

#[tokio::test]
async fn a_taken_lease_is_busy_in_every_isolation_level() {
    let test = "a_taken_lease_is_busy_in_every_isolation_level";
    let Some(mut f) = fixture(test).await else { return };
    let mut ran = Vec::new();
    for level in LEVELS {
        record(test, level, busy(&mut f, level).await, &mut ran);
    }
    assert!(ran.contains(&"READ COMMITTED"), "ran at {ran:?}");
    let Fixture { db, a, b, .. } = f;
    drop((a, b));
    db.drop().await;
}

/// A READ UNCOMMITTED caller never sees another session's uncommitted lease:
/// the answer is the committed state, after waiting for it if need be.
#[tokio::test]
async fn a_read_uncommitted_caller_never_sees_an_uncommitted_lease() {
    let test = "a_read_uncommitted_caller_never_sees_an_uncommitted_lease";
    let Some(mut f) = fixture(test).await else { return };
    let key = provision(&mut f.a, "dirty").await;
    f.a.begin("READ COMMITTED").await.unwrap();
    let (_, uncommitted) = acquire(&mut f.a, &key, 60).await;
    assert_eq!(uncommitted, 1);

    // The reader goes through a proxy that counts what reached the server,
    // on a session whose Inspect and Acquire are compiled already.
    let proxy = Proxy::start(f.db.connection_string().server()).await;
    let mut reader = Caller::new(support::connect_ado(&proxy.ado(&f.db.ado())).await);
    let warm = provision(&mut reader, "warm").await;
    assert_eq!(reader.inspect(&warm).await.outcome(), "Found");
    acquire(&mut reader, &warm, 60).await;
    let sent = proxy.requests();
    let (inspected_tx, inspected) = tokio::sync::oneshot::channel();
    let read = tokio::spawn(async move {
        reader.begin("READ UNCOMMITTED").await.unwrap();
        let inspect = reader.inspect(&key).await;
        let _ = inspected_tx.send(());
        let acquire = reader.acquire(&key, Uuid::new_v4(), 60).await;
        reader.commit().await.unwrap();
        (inspect, acquire, reader)
    });
    // The BEGIN and the Inspect reached the server before the rollback. An
    // Inspect that answered without waiting for the row is followed by the
    // Acquire, which must reach the server too; one that waits for the lock
    // holds the Acquire back until the rollback.
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut inspected = Some(inspected);
    loop {
        let forwarded = proxy.requests() - sent;
        if forwarded >= 3 {
            break;
        }
        if forwarded == 2 && inspected.as_mut().is_some_and(|i| i.try_recv().is_err()) && !f.babelfish {
            // SQL Server: the Inspect waits for the row; the server shows it.
            let blocked = f
                .db
                .query("SELECT COUNT(*) FROM sys.dm_exec_requests WHERE blocking_session_id <> 0 AND database_id = DB_ID()")
                .await;
            if blocked[0].get::<i32, _>(0).unwrap_or(0) > 0 {
                inspected = None;
                break;
            }
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "only {forwarded} of the reader's requests reached the server"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(inspected);
    f.a.rollback().await;
    let (inspect, acquire, reader) = bounded("the reader", read).await.unwrap();

    assert_eq!(
        inspect.big("Generation"),
        Some(0),
        "Inspect read the uncommitted generation"
    );
    assert_eq!(acquire.outcome(), "Acquired", "Acquire judged the uncommitted holder");
    assert_eq!(acquire.big("Generation"), Some(1));
    let Fixture { db, a, .. } = f;
    drop((a, reader));
    db.drop().await;
}

/// Two SERIALIZABLE callers, each having read in its transaction first, then
/// publishing with fresh operation ids at once: neither is a deadlock victim of
/// key-range locks.
#[tokio::test]
async fn two_serializable_callers_publish_at_once_without_a_deadlock() {
    let test = "two_serializable_callers_publish_at_once_without_a_deadlock";
    let Some(mut f) = fixture(test).await else { return };
    let keys = [provision(&mut f.a, "one").await, provision(&mut f.a, "two").await];
    let leases = [
        acquire(&mut f.a, &keys[0], 60).await,
        acquire(&mut f.a, &keys[1], 60).await,
    ];
    let operations = [Uuid::new_v4(), Uuid::new_v4()];

    let mut callers = [f.a, f.b];
    for (i, caller) in callers.iter_mut().enumerate() {
        if let Err(e) = caller.begin("SERIALIZABLE").await {
            let reason = engine_limit(f.babelfish, "SERIALIZABLE", &e.to_string())
                .unwrap_or_else(|| panic!("BEGIN TRANSACTION at SERIALIZABLE: {e}"));
            support::skip(test, &format!("at SERIALIZABLE: {reason}"));
            let [a, b] = callers;
            drop((a, b));
            f.db.drop().await;
            return;
        }
        // Both look the operations up first, as a replay-aware caller does:
        // under SERIALIZABLE that would hold range locks on the outcome table.
        let seen = caller.call(support::caller::GET_OUTCOME, &[&operations[i]]).await;
        assert_eq!(seen.outcome(), "Unknown");
    }
    let [mut a, mut b] = callers;
    let (ka, kb) = (keys[0].clone(), keys[1].clone());
    let ((oa, ga), (ob, gb)) = (leases[0], leases[1]);
    let (pa, pb) = tokio::join!(
        async {
            let answer = a.publish(&ka, oa, ga, operations[0], "one").await;
            a.commit().await.unwrap();
            answer
        },
        async {
            let answer = b.publish(&kb, ob, gb, operations[1], "two").await;
            b.commit().await.unwrap();
            answer
        }
    );
    assert_eq!(pa.error_number(), None, "{pa:?}");
    assert_eq!(pb.error_number(), None, "{pb:?}");
    assert_eq!((pa.outcome(), pb.outcome()), ("Published".into(), "Published".into()));
    drop((a, b));
    f.db.drop().await;
}
