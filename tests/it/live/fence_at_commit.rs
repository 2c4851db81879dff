//! A fenced write commits only under a held lease, whatever the caller's SQL
//! did to its transaction: the fence is checked where the write becomes
//! durable. A T-SQL caller's `AssertHolder` right before its COMMIT refuses a
//! late commit after a rolled-back savepoint let the lock go; the client's
//! fenced transaction refuses SQL that swapped its transaction, and a commit
//! that reaches the server after the lease ended; a guard's own calls never
//! wait on its own transaction, and a guard waiting for a connection to begin
//! one keeps renewing. The tests share one database: each works on keys and a
//! table of its own.

use crate::support;

use std::time::Duration;

use fencepost::client::admin::ForceRelease;
use fencepost::client::{Acquire, BeginFenced, Error, FencedTx, RefusalReason};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::caller::Caller;
use support::lease::{SHORT, acquired, provisioned, unwarmed, wait_until_expired, warm_up, worker};
use support::proxy::Proxy;
use support::report_table::{self, insert_into, writers};
use tokio::sync::oneshot;
use tokio::time::Instant;
use uuid::Uuid;

const LONG: Duration = Duration::from_secs(60);
const ASSERT: &str = "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";

fn holding<'c>(begun: Result<BeginFenced<'c>, Error>) -> FencedTx<'c> {
    match begun.unwrap() {
        BeginFenced::Holding(tx) => tx,
        other => panic!("expected Holding, got {other:?}"),
    }
}

/// The savepoint schedule a T-SQL caller (or an ORM's nested transaction)
/// runs into: a fence call inside a savepoint that is rolled back is undone
/// with its lock, so a successor takes the lease while the caller's
/// transaction is still open. `AssertHolder` as the last statement before
/// COMMIT is the pattern that holds whatever came before: the late commit is
/// refused (50110) and nothing of the transaction commits.
#[tokio::test]
async fn assert_holder_right_before_commit_refuses_a_late_commit_after_a_rolled_back_savepoint() {
    let test = "assert_holder_right_before_commit_refuses_a_late_commit_after_a_rolled_back_savepoint";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let report = report_table::create(&db, true).await;
    // Nothing here depends on timing: no warm-up.
    let (a, b) = (unwarmed(&db.ado()).await, unwarmed(&db.ado()).await);
    let key = provisioned(&a, "report").await;
    let late = acquired(a.acquire(&key, SHORT).await.unwrap());

    let mut caller = Caller::new(db.connect().await);
    caller.begin("READ COMMITTED").await.unwrap();
    caller.batch("SAVE TRANSACTION fenced;").await.unwrap();
    let late_args: [&dyn tiberius::ToSql; 3] = [&key.as_str(), &late.owner(), &late.generation()];
    assert_eq!(caller.call(ASSERT, &late_args).await.outcome(), "Holding");
    caller.batch("ROLLBACK TRANSACTION fenced;").await.unwrap();
    assert_eq!(
        caller.trancount().await,
        1,
        "a savepoint's rollback keeps the transaction"
    );

    // The rollback took the fence row's lock with it: once the lease ran
    // out, a successor takes it while the caller's transaction is open.
    wait_until_expired(&b, &key).await;
    let successor = acquired(b.acquire(&key, LONG).await.unwrap());
    assert_eq!(successor.generation(), late.generation() + 1);

    caller.conn.execute(insert_into(&report), &[&"late"]).await.unwrap();
    let refused = caller.call(ASSERT, &late_args).await;
    assert_eq!(refused.error_number(), Some(50110), "{refused:?}");
    assert_eq!(caller.trancount().await, 0, "the refusal rolled the transaction back");
    assert_eq!(
        writers(&db, &report).await,
        Vec::<String>::new(),
        "a late write committed"
    );
    drop((a, b, caller));
    db.drop().await;
}

/// SQL that commits and opens a new transaction (a batched purge, a CATCH
/// block that keeps `@@TRANCOUNT` balanced), sent as a statement or inside a
/// procedure, frees the fence row: an operator's force-release goes through
/// and a successor takes over. Nothing the late holder sends after that
/// swap commits, and its commit is never `Ok`.
#[tokio::test]
async fn sql_that_commits_and_reopens_cannot_commit_a_late_write_under_a_successor() {
    let test = "sql_that_commits_and_reopens_cannot_commit_a_late_write_under_a_successor";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let report = report_table::create(&db, true).await;
    let insert = insert_into(&report);
    let reopens = format!("dbo.CommitsAndReopens_{}", Uuid::new_v4().simple());
    db.exec(&format!(
        "CREATE PROCEDURE {reopens} AS BEGIN COMMIT TRANSACTION; BEGIN TRANSACTION; END"
    ))
    .await;
    // Nothing here depends on timing: no warm-up.
    let (late, operator) = (unwarmed(&db.ado()).await, unwarmed(&db.ado()).await);
    let swaps = [
        "COMMIT TRANSACTION; BEGIN TRANSACTION;".to_string(),
        format!("EXEC {reopens};"),
    ];
    for swap in &swaps {
        let key = provisioned(&late, "report").await;
        let lease = acquired(late.acquire(&key, LONG).await.unwrap());
        let mut tx = holding(late.begin_fenced_without_guard(&lease).await);
        tx.execute(&insert, &[&"before"]).await.unwrap();
        let swapped = tx.execute(swap, &[]).await;

        // The swap committed and let the row go: the operator's lever works
        // at once, and a successor takes the lease.
        let forced = operator.admin().force_release(&key).await.unwrap();
        assert!(matches!(forced, ForceRelease::Fenced { .. }), "{swap}: {forced:?}");
        let successor = acquired(operator.acquire(&key, LONG).await.unwrap());

        let after = tx.execute(&insert, &[&"after"]).await;
        let committed = tx.commit().await;
        assert!(
            swapped.is_err() && after.is_err() && committed.is_err(),
            "{swap}: the swap answered {swapped:?}, the late statement {after:?}, the commit {committed:?}"
        );
        assert!(
            matches!(committed, Err(Error::TransactionAborted { .. })),
            "{swap}: {committed:?}"
        );
        assert_eq!(
            operator.release(&successor).await.unwrap(),
            fencepost::client::Release::Released
        );
    }
    let landed = writers(&db, &report).await;
    assert!(
        !landed.iter().any(|w| w == "after"),
        "a late write committed: {landed:?}"
    );
    drop((late, operator));
    db.drop().await;
}

/// A commit sent while the lease was held locally but delivered after it
/// ended on the server (a slow network, a stalled proxy) is judged when it
/// arrives: refused as `Expired`, and nothing of the transaction commits.
#[tokio::test]
async fn a_commit_that_reaches_the_server_after_the_lease_ended_commits_nothing() {
    let test = "a_commit_that_reaches_the_server_after_the_lease_ended_commits_nothing";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let report = report_table::create(&db, true).await;
    let proxy = Proxy::start(db.connection_string().server()).await;
    let late = worker(&proxy.ado(&db.ado())).await;
    let key = provisioned(&late, "report").await;
    let lease = acquired(late.acquire(&key, Duration::from_secs(3)).await.unwrap());
    let mut tx = holding(late.begin_fenced_without_guard(&lease).await);
    tx.execute(&insert_into(&report), &[&"late"]).await.unwrap();

    proxy.hold_requests(true);
    assert!(
        lease.remaining() > Duration::from_secs(1),
        "the commit must leave while the lease is held locally"
    );
    let mut commit = Box::pin(tx.commit());
    // The commit's first step is the local check of the lease, which it
    // passes; then it waits on the held connection.
    let sent = tokio::time::timeout(Duration::from_millis(200), &mut commit).await;
    assert!(
        sent.is_err(),
        "the commit answered without reaching the server: {sent:?}"
    );
    // The server's lease ends a round trip after the local deadline at most.
    tokio::time::sleep_until(lease.local_deadline() + Duration::from_millis(500)).await;
    proxy.hold_requests(false);
    let committed = commit.await;
    drop(lease);
    assert!(
        matches!(
            committed,
            Err(Error::CommitRefused {
                reason: RefusalReason::Expired
            })
        ),
        "{committed:?}"
    );
    assert_eq!(
        writers(&db, &report).await,
        Vec::<String>::new(),
        "a late write committed"
    );
    drop(late);
    db.drop().await;
}

/// A guard's own calls on its row while its fenced transaction holds it
/// would wait on their own holder: a second transaction for ever, a publish
/// until its call timeout. They are refused at once, and the guard works as
/// before once the transaction ends.
#[tokio::test]
async fn a_guards_call_while_its_own_transaction_is_open_is_refused_at_once() {
    let test = "a_guards_call_while_its_own_transaction_is_open_is_refused_at_once";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let client = unwarmed(&db.ado()).await;
    let key = provisioned(&client, "guarded").await;
    let guard = client.guard(acquired(client.acquire(&key, LONG).await.unwrap()));
    let tx = holding(guard.begin_fenced().await);
    let second = tokio::time::timeout(Duration::from_secs(5), guard.begin_fenced())
        .await
        .map(|begun| begun.map(|_| "began"));
    assert!(
        matches!(second, Ok(Err(Error::FencedTransactionOpen { .. }))),
        "{second:?}"
    );
    let publish = tokio::time::timeout(Duration::from_secs(5), guard.publish(Uuid::new_v4(), "p")).await;
    assert!(
        matches!(publish, Ok(Err(Error::FencedTransactionOpen { .. }))),
        "{publish:?}"
    );
    tx.commit().await.unwrap();
    holding(guard.begin_fenced().await).rollback().await;
    assert_eq!(guard.release().await.unwrap(), fencepost::client::Release::Released);
    drop(client);
    db.drop().await;
}

/// A guard asked for a fenced transaction while its client's one ordinary
/// connection is busy waits for that connection without holding its
/// renewals back: the renewals have connections of their own.
#[tokio::test]
async fn a_guard_waiting_for_a_connection_to_begin_a_transaction_keeps_renewing() {
    let test = "a_guard_waiting_for_a_connection_to_begin_a_transaction_keeps_renewing";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let mut config = ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap());
    config
        .max_connections(1)
        .checkout_timeout(Duration::from_secs(20))
        .allow_privileged_login(true);
    let client = Client::connect_with(config).await.unwrap();
    let direct = db.ado();
    let ((), observer) = tokio::join!(warm_up(&client), worker(&direct));
    let busy_key = provisioned(&observer, "busy").await;
    let guarded_key = provisioned(&observer, "guarded").await;
    let busy = acquired(client.acquire(&busy_key, LONG).await.unwrap());
    let length = Duration::from_secs(4);
    let guard = client.guard(acquired(client.acquire(&guarded_key, length).await.unwrap()));

    // The service's own work holds the one ordinary connection for two
    // lease lengths, while the guard waits for it to begin a transaction.
    let (started, work_started) = oneshot::channel();
    let (finish, work_may_finish) = oneshot::channel::<()>();
    let work = client.fenced_transaction_without_guard(&busy, async move |_tx| {
        let _ = started.send(());
        let _ = work_may_finish.await;
        Ok::<_, ()>(())
    });
    let begin_and_watch = async {
        work_started.await.unwrap();
        let begin = guard.begin_fenced();
        tokio::pin!(begin);
        let waited = tokio::time::timeout(length * 2, &mut begin).await;
        assert!(
            waited.is_err(),
            "the begin did not wait for the busy connection: {waited:?}"
        );
        let lost = guard.lost_reason();
        let _ = finish.send(());
        (lost, begin.await)
    };
    let (work, (lost, begun)) = tokio::join!(work, begin_and_watch);
    assert!(work.is_ok(), "{work:?}");
    assert_eq!(lost, None, "the guard gave up while it waited for a connection");
    holding(begun).commit().await.unwrap();
    assert_eq!(guard.release().await.unwrap(), fencepost::client::Release::Released);
    assert!(matches!(
        client.acquire(&guarded_key, LONG).await.unwrap(),
        Acquire::Acquired(_)
    ));
    drop((client, observer));
    db.drop().await;
}

/// The commit's batch fails before its COMMIT when the work's SQL cleared
/// what the transaction keeps in the session context: that failure rolled
/// everything back, so it is `TransactionAborted`, not an outcome in doubt.
#[tokio::test]
async fn a_commit_that_fails_before_its_commit_is_aborted_not_unknown() {
    let test = "a_commit_that_fails_before_its_commit_is_aborted_not_unknown";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let report = report_table::create(&db, true).await;
    // Nothing here depends on timing: no warm-up.
    let client = unwarmed(&db.ado()).await;
    let key = provisioned(&client, "report").await;
    let lease = acquired(client.acquire(&key, LONG).await.unwrap());
    let mut tx = holding(client.begin_fenced_without_guard(&lease).await);
    tx.execute(&insert_into(&report), &[&"cleared"]).await.unwrap();
    tx.execute("EXEC sp_set_session_context N'fencepost.key', NULL;", &[])
        .await
        .unwrap();
    let committed = tx.commit().await;
    assert!(
        matches!(committed, Err(Error::TransactionAborted { .. })),
        "{committed:?}"
    );
    assert_eq!(writers(&db, &report).await, Vec::<String>::new(), "a write committed");
    assert_eq!(
        client.release(&lease).await.unwrap(),
        fencepost::client::Release::Released
    );
    drop(client);
    db.drop().await;
}

/// A guard's transaction waits for a renewal in flight before it begins, but
/// no longer than a call: a renewal stuck on the fence row (held here by
/// another session) can take until the lease is given up.
#[tokio::test]
async fn a_guards_transaction_waits_for_a_stuck_renewal_no_longer_than_a_call() {
    let test = "a_guards_transaction_waits_for_a_stuck_renewal_no_longer_than_a_call";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    // Named, so that the client's sessions can be told from others.
    let name = format!("fp-stuck-{}", Uuid::new_v4().simple());
    let mut config =
        ClientConfig::new(ConnectionString::parse(&format!("{};Application Name={name}", db.ado())).unwrap());
    let call_timeout = Duration::from_secs(3);
    config.call_timeout(call_timeout).allow_privileged_login(true);
    let client = Client::connect_with(config).await.unwrap();
    let ado = db.ado();
    let (observer, holder, babelfish) = tokio::join!(worker(&ado), db.connect(), db.is_babelfish());
    warm_up(&client).await;
    let key = provisioned(&observer, "stuck").await;
    let guard = client.guard(acquired(client.acquire(&key, Duration::from_secs(30)).await.unwrap()));
    let mut holder = Caller::new(holder);
    holder
        .batch(&format!(
            "BEGIN TRANSACTION; UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = N'{key}';"
        ))
        .await
        .unwrap();
    // The renewal, due a third into the lease, blocks on the row.
    let stuck = Instant::now() + Duration::from_secs(30);
    while support::signal::waiting_for_a_lock(&db, &name, babelfish).await < 1 {
        assert!(Instant::now() < stuck, "the renewal never blocked on the row");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let asked = Instant::now();
    let begun = guard.begin_fenced().await.map(|_| "began");
    let waited = asked.elapsed();
    assert!(
        matches!(begun, Err(Error::Network { timed_out: true, .. })),
        "{begun:?}"
    );
    assert!(
        waited < call_timeout + Duration::from_secs(2),
        "the transaction waited {waited:?} for the renewal"
    );
    holder.rollback().await;
    drop(guard);
    drop((client, observer, holder));
    db.drop().await;
}
