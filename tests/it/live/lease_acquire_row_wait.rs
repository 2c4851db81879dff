//! What `fence_api.Acquire` answers, on SQL Server, after it gave up
//! waiting 5 s for its fence row (error 1222). On its own, nothing was
//! granted and contention is an answer: the committed row decides when it
//! can be read without waiting (READ_COMMITTED_SNAPSHOT on). No row is
//! `NotProvisioned`, a row with no live holder is `Busy` until the moment
//! of the answer (the open transaction decides, so the caller asks again),
//! and a live holder is `Busy` until its expiry. With
//! READ_COMMITTED_SNAPSHOT off nothing can be read without waiting, and
//! every such wait is `Busy` until the moment of the answer. Inside the
//! caller's own transaction, which the time-out doomed, it is error 50129.
//!
//! Babelfish's lock time-out cannot be caught by TRY...CATCH, so Acquire
//! never takes this path there: these tests skip before they pay for a
//! deploy, and `client_acquire_contention` shows the client's side of it.

use crate::support;

use std::time::Duration;

use support::TestDatabase;
use support::caller::{Answer, Caller};
use uuid::Uuid;

const PROVISION: &str = "EXEC fence_api.Provision @ResourceKey = @P1";
const ASSERT: &str = "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";

/// Longer than Acquire's 5 s bound on the row: a call still running after
/// this has hung.
const HANG: Duration = Duration::from_secs(20);

const BABELFISH: &str = "Acquire's answer after its wait for the row timed out: Babelfish's \"canceling statement \
                         due to lock timeout\" cannot be caught by TRY...CATCH, so the bound ends in that error there";

/// A deployed database of the test's own, with READ_COMMITTED_SNAPSHOT as
/// `snapshot` says, on SQL Server; on Babelfish the skip line, before any
/// deploy.
async fn sql_server_database(test: &str, snapshot: bool) -> Option<TestDatabase> {
    let db = TestDatabase::new(test).await?;
    if db.is_babelfish().await {
        support::skip(test, BABELFISH);
        db.drop().await;
        return None;
    }
    let setting = if snapshot { "ON" } else { "OFF" };
    db.exec(&format!(
        "ALTER DATABASE [{}] SET READ_COMMITTED_SNAPSHOT {setting} WITH ROLLBACK IMMEDIATE;",
        db.name
    ))
    .await;
    db.migrate(&fencepost::deploy::Sources::embedded().unwrap())
        .await
        .expect("first deploy");
    Some(db)
}

async fn provisioned(caller: &mut Caller, name: &str) -> String {
    let key = format!("{name}:{}", Uuid::new_v4().simple());
    assert_eq!(caller.call(PROVISION, &[&key.as_str()]).await.outcome(), "Created");
    key
}

/// A key's live lease, committed: its generation and expiry.
async fn held(caller: &mut Caller, key: &str, owner: Uuid) -> (i64, time::PrimitiveDateTime) {
    let acquired = caller.acquire(key, owner, 600).await;
    assert_eq!(acquired.outcome(), "Acquired");
    (
        acquired.big("Generation").unwrap(),
        acquired.time("LeaseUntilUtc").unwrap(),
    )
}

/// A new session's Acquire of `key`, which must answer within [`HANG`].
async fn acquire_beside(db: &TestDatabase, key: &str) -> Answer {
    let mut caller = Caller::new(db.connect().await);
    tokio::time::timeout(HANG, caller.acquire(key, Uuid::new_v4(), 30))
        .await
        .unwrap_or_else(|_| panic!("Acquire of {key} hung behind the open transaction"))
}

/// `Busy` until the moment it was judged: the holder's end is unknown.
fn assert_busy_until_now(what: &str, answer: &Answer) {
    assert_eq!(answer.outcome(), "Busy", "{what}: {answer:?}");
    let until = answer.time("LeaseUntilUtc");
    assert!(until.is_some(), "{what}: Busy without an expiry");
    assert_eq!(until, answer.time("ServerUtc"), "{what}: {answer:?}");
}

#[tokio::test]
async fn with_read_committed_snapshot_an_acquire_that_gave_up_waiting_answers_from_the_committed_row() {
    let name = "with_read_committed_snapshot_an_acquire_that_gave_up_waiting_answers_from_the_committed_row";
    let Some(db) = sql_server_database(name, true).await else {
        return;
    };
    let mut setup = Caller::new(db.connect().await);
    let live = provisioned(&mut setup, "live").await;
    let granting = provisioned(&mut setup, "granting").await;
    let missing = format!("missing:{}", Uuid::new_v4().simple());
    let owner = Uuid::new_v4();
    let (generation, until) = held(&mut setup, &live, owner).await;

    // One open transaction holds three rows: a live holder's, a grant not
    // yet committed, and a provision not yet committed.
    let mut holder = Caller::new(db.connect().await);
    holder.begin("READ COMMITTED").await.unwrap();
    let asserted = holder.call(ASSERT, &[&live.as_str(), &owner, &generation]).await;
    assert_eq!(asserted.outcome(), "Holding");
    assert_eq!(
        holder.acquire(&granting, Uuid::new_v4(), 600).await.outcome(),
        "Acquired"
    );
    assert_eq!(holder.call(PROVISION, &[&missing.as_str()]).await.outcome(), "Created");

    let mut inside = Caller::new(db.connect().await);
    let (to_missing, to_granting, to_live, (in_transaction, open_after)) = tokio::join!(
        acquire_beside(&db, &missing),
        acquire_beside(&db, &granting),
        acquire_beside(&db, &live),
        async {
            inside.begin("READ COMMITTED").await.unwrap();
            let answer = tokio::time::timeout(HANG, inside.acquire(&live, Uuid::new_v4(), 30))
                .await
                .expect("Acquire in a transaction hung behind the open transaction");
            (answer, inside.trancount().await)
        },
    );

    assert_eq!(to_missing.outcome(), "NotProvisioned", "{to_missing:?}");
    assert_busy_until_now("a grant not yet committed", &to_granting);
    assert_eq!(to_live.outcome(), "Busy", "{to_live:?}");
    assert_eq!(to_live.time("LeaseUntilUtc"), Some(until), "{to_live:?}");
    match in_transaction {
        Answer::Error { number: 50129, message } => assert_eq!(
            message,
            "Waited 5 seconds for the fence row or its table: an open transaction, a deploy or a recovery holds it."
        ),
        other => panic!("expected error 50129 inside the caller's transaction, got {other:?}"),
    }
    assert_eq!(open_after, 0, "the doomed transaction is still open");
    holder.rollback().await;
    drop((setup, holder, inside));
    db.drop().await;
}

#[tokio::test]
async fn without_read_committed_snapshot_an_acquire_that_gave_up_waiting_is_busy_until_now() {
    let name = "without_read_committed_snapshot_an_acquire_that_gave_up_waiting_is_busy_until_now";
    let Some(db) = sql_server_database(name, false).await else {
        return;
    };
    let mut setup = Caller::new(db.connect().await);
    let live = provisioned(&mut setup, "live").await;
    let missing = format!("missing:{}", Uuid::new_v4().simple());
    let owner = Uuid::new_v4();
    let (generation, _) = held(&mut setup, &live, owner).await;

    let mut holder = Caller::new(db.connect().await);
    holder.begin("READ COMMITTED").await.unwrap();
    let asserted = holder.call(ASSERT, &[&live.as_str(), &owner, &generation]).await;
    assert_eq!(asserted.outcome(), "Holding");
    assert_eq!(holder.call(PROVISION, &[&missing.as_str()]).await.outcome(), "Created");

    // Neither committed row can be read without waiting again.
    let (to_live, to_missing) = tokio::join!(acquire_beside(&db, &live), acquire_beside(&db, &missing));
    assert_busy_until_now("a live holder's row in an open transaction", &to_live);
    assert_busy_until_now("a provision not yet committed", &to_missing);
    holder.rollback().await;
    drop((setup, holder));
    db.drop().await;
}
