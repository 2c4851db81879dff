//! Fencing the service's own tables with `fence_api.AssertHolder`, in the
//! T-SQL pattern any language uses (BEGIN TRAN; EXEC AssertHolder; own
//! writes; COMMIT) and through `Client::fenced_transaction_without_guard`, on a user table.
//! The tests share one database: each works on keys and a table of its own.

use crate::support;

use std::time::Duration;

use fencepost::client::{FencedOutcome, FencedTx, Publish, RefusalReason};
use support::TestDatabase;
use support::caller::{Answer, Caller};
use support::lease::{acquired, provisioned, unwarmed, wait_until_expired, workers};
use support::report_table::{self, writers};
use uuid::Uuid;

const ASSERT: &str = "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";
async fn insert(caller: &mut Caller, report: &str, writer: &str) {
    caller
        .conn
        .execute(report_table::insert_into(report), &[&writer])
        .await
        .unwrap();
}

#[tokio::test]
async fn a_late_writers_rows_are_rolled_back_and_its_successors_commit() {
    let Some(db) = TestDatabase::shared("a_late_writers_rows_are_rolled_back_and_its_successors_commit").await else {
        return;
    };
    let report = report_table::create(&db, true).await;
    // Nothing here depends on timing: no warm-up.
    let (a, b) = (unwarmed(&db.ado()).await, unwarmed(&db.ado()).await);
    let key = provisioned(&a, "report").await;
    let late = acquired(a.acquire(&key, Duration::from_secs(2)).await.unwrap());
    wait_until_expired(&b, &key).await;
    let current = acquired(b.acquire(&key, Duration::from_secs(60)).await.unwrap());

    let mut caller_a = Caller::new(db.connect().await);
    caller_a.begin("READ COMMITTED").await.unwrap();
    insert(&mut caller_a, &report, "A").await;
    let refused = caller_a
        .call(ASSERT, &[&key.as_str(), &late.owner(), &late.generation()])
        .await;
    assert_eq!(refused.error_number(), Some(50110), "{refused:?}");
    assert_eq!(caller_a.trancount().await, 0, "the refusal rolled the transaction back");

    let mut caller_b = Caller::new(db.connect().await);
    caller_b.begin("READ COMMITTED").await.unwrap();
    let holding = caller_b
        .call(ASSERT, &[&key.as_str(), &current.owner(), &current.generation()])
        .await;
    assert_eq!(holding.outcome(), "Holding");
    assert_eq!(holding.big("Generation"), Some(current.generation()));
    insert(&mut caller_b, &report, "B").await;
    caller_b.commit().await.unwrap();

    assert_eq!(writers(&db, &report).await, ["B"]);
    drop((a, b, caller_a, caller_b));
    db.drop().await;
}

#[tokio::test]
async fn an_expired_lease_with_no_successor_is_50111_and_nothing_commits() {
    let Some(db) = TestDatabase::shared("an_expired_lease_with_no_successor_is_50111_and_nothing_commits").await else {
        return;
    };
    let report = report_table::create(&db, true).await;
    // Nothing here depends on timing: no warm-up.
    let a = unwarmed(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let lease = acquired(a.acquire(&key, Duration::from_secs(2)).await.unwrap());
    wait_until_expired(&a, &key).await;

    let mut caller = Caller::new(db.connect().await);
    caller.begin("READ COMMITTED").await.unwrap();
    insert(&mut caller, &report, "A").await;
    let refused = caller
        .call(ASSERT, &[&key.as_str(), &lease.owner(), &lease.generation()])
        .await;
    assert_eq!(refused.error_number(), Some(50111), "{refused:?}");
    caller.rollback().await;
    assert_eq!(writers(&db, &report).await, Vec::<String>::new());
    drop((a, caller));
    db.drop().await;
}

#[tokio::test]
async fn a_successor_waits_for_the_holders_transaction_and_the_holder_is_then_superseded() {
    let Some(db) =
        TestDatabase::shared("a_successor_waits_for_the_holders_transaction_and_the_holder_is_then_superseded").await
    else {
        return;
    };
    let report = report_table::create(&db, true).await;
    let [a, b] = workers(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    // The holder's session logs in and compiles AssertHolder before the
    // two-second lease starts, so that on a busy engine neither eats into it.
    let mut holder = Caller::new(db.connect().await);
    let outside = holder.call(ASSERT, &[&key.as_str(), &Uuid::new_v4(), &1_i64]).await;
    assert_eq!(outside.error_number(), Some(50113), "{outside:?}");
    let lease = acquired(a.acquire(&key, Duration::from_secs(2)).await.unwrap());

    holder.begin("READ COMMITTED").await.unwrap();
    let holding = holder
        .call(ASSERT, &[&key.as_str(), &lease.owner(), &lease.generation()])
        .await;
    assert_eq!(holding.outcome(), "Holding");
    let until = holding.time("LeaseUntilUtc").unwrap();
    let successor = tokio::spawn({
        let key = key.clone();
        async move { b.acquire(&key, Duration::from_secs(60)).await.unwrap() }
    });
    // The holder's transaction keeps the row past the lease's end.
    while holder.server_now().await <= until + time::Duration::milliseconds(200) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !successor.is_finished(),
        "the successor did not wait for the holder's transaction"
    );
    insert(&mut holder, &report, "A").await;
    let before_commit = holder.server_now().await.assume_utc();
    holder.commit().await.unwrap();
    let next = acquired(successor.await.unwrap());

    assert_eq!(next.generation(), lease.generation() + 1);
    // Acquire reads the clock once it has the row: a successor that waited
    // for the holder's commit was judged after it.
    let judged = next.until() - Duration::from_secs(60);
    assert!(
        judged > before_commit,
        "the successor was judged at {judged}, before the holder's commit (after {before_commit})"
    );
    assert_eq!(
        writers(&db, &report).await,
        ["A"],
        "the holder's rows, written under the lock, commit"
    );
    assert_eq!(
        a.publish(&lease, Uuid::new_v4(), "late").await.unwrap(),
        Publish::Refused(RefusalReason::Superseded)
    );
    drop((a, holder));
    db.drop().await;
}

#[tokio::test]
async fn assert_holder_outside_a_transaction_and_bad_input_are_refused_and_change_nothing() {
    let Some(db) =
        TestDatabase::shared("assert_holder_outside_a_transaction_and_bad_input_are_refused_and_change_nothing").await
    else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let a = unwarmed(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let lease = acquired(a.acquire(&key, Duration::from_secs(60)).await.unwrap());
    let before = support::lease::state(&a, &key).await;
    let mut caller = Caller::new(db.connect().await);

    let outside = caller
        .call(ASSERT, &[&key.as_str(), &lease.owner(), &lease.generation()])
        .await;
    assert_eq!(outside.error_number(), Some(50113), "{outside:?}");

    let nil = Uuid::nil();
    let cases: [(&str, Uuid, i64, u32); 5] = [
        ("", lease.owner(), lease.generation(), 50101),
        ("report ", lease.owner(), lease.generation(), 50101),
        (key.as_str(), nil, lease.generation(), 50102),
        (key.as_str(), lease.owner(), 0, 50104),
        ("never-provisioned", lease.owner(), lease.generation(), 50112),
    ];
    for (k, owner, generation, number) in cases {
        caller.begin("READ COMMITTED").await.unwrap();
        let answer = caller.call(ASSERT, &[&k, &owner, &generation]).await;
        assert!(
            matches!(answer, Answer::Error { number: n, .. } if n == number),
            "{k:?}: {answer:?}"
        );
        assert_eq!(
            caller.trancount().await,
            0,
            "{k:?}: the refusal left a transaction open"
        );
    }
    assert_eq!(support::lease::state(&a, &key).await, before);
    drop((a, caller));
    db.drop().await;
}

#[tokio::test]
async fn a_fenced_transaction_commits_for_the_holder_and_writes_nothing_for_a_late_one() {
    let Some(db) =
        TestDatabase::shared("a_fenced_transaction_commits_for_the_holder_and_writes_nothing_for_a_late_one").await
    else {
        return;
    };
    let report = report_table::create(&db, true).await;
    let [a, b] = workers(&db.ado()).await;
    let key = provisioned(&a, "report").await;
    let late = acquired(a.acquire(&key, Duration::from_secs(2)).await.unwrap());
    let insert = format!("INSERT INTO {report} (Writer) VALUES (@P1)");
    let write = |writer: &'static str| {
        let insert = &insert;
        async move |tx: &mut FencedTx<'_>| {
            tx.execute(insert.as_str(), &[&writer]).await?;
            Ok::<_, fencepost::client::Error>(writer)
        }
    };

    let first = a.fenced_transaction_without_guard(&late, write("A1")).await.unwrap();
    assert!(matches!(first, FencedOutcome::Committed("A1")), "{first:?}");
    wait_until_expired(&b, &key).await;
    let current = acquired(b.acquire(&key, Duration::from_secs(60)).await.unwrap());
    let refused = a.fenced_transaction_without_guard(&late, write("A2")).await.unwrap();
    assert!(
        matches!(refused, FencedOutcome::Refused(RefusalReason::Superseded)),
        "{refused:?}"
    );
    let failed = b
        .fenced_transaction_without_guard(&current, async |tx: &mut FencedTx<'_>| {
            tx.execute(&format!("INSERT INTO {report} (Writer) VALUES (N'B-failed')"), &[])
                .await?;
            tx.execute("INSERT INTO dbo.Missing (Writer) VALUES (N'x')", &[]).await
        })
        .await
        .unwrap();
    assert!(matches!(failed, FencedOutcome::Failed(_)), "{failed:?}");
    let second = b.fenced_transaction_without_guard(&current, write("B")).await.unwrap();
    assert!(matches!(second, FencedOutcome::Committed("B")), "{second:?}");

    assert_eq!(writers(&db, &report).await, ["A1", "B"]);
    drop((a, b));
    db.drop().await;
}
