//! A fenced transaction never writes outside itself: after a failed
//! statement nothing more is sent, SQL that ends the transaction by itself
//! leaves the next statement nothing to run in, an unbalanced transaction is
//! rolled back rather than reported committed, a session that ran the work's
//! SQL is never reused, and a commit whose answer is lost says so. The tests
//! share one database: each works on keys and a table of its own.

use crate::support;

use std::time::Duration;

use fencepost::client::admin::ForceRelease;
use fencepost::client::{BeginFenced, Error, FencedOutcome, FencedTx, Lease, Release};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::caller::Caller;
use support::lease::{acquired, provisioned, state, unwarmed, wait_until_expired, worker};
use support::proxy::{Cut, Proxy};
use support::report_table::{self, writers};
use uuid::Uuid;

const LONG: Duration = Duration::from_secs(60);

/// The row the works write: an id and its writer.
fn insert_into(report: &str) -> String {
    format!("INSERT INTO {report} (Id, Writer) VALUES (@P1, @P2)")
}

async fn holding<'c>(begun: Result<BeginFenced<'c>, Error>) -> FencedTx<'c> {
    match begun.unwrap() {
        BeginFenced::Holding(tx) => tx,
        other => panic!("expected Holding, got {other:?}"),
    }
}

fn aborted<T: std::fmt::Debug>(what: &str, result: Result<T, Error>) {
    assert!(
        matches!(result, Err(Error::TransactionAborted { .. })),
        "{what}: expected TransactionAborted, got {result:?}"
    );
}

/// The everyday "insert, ignore the duplicate key" work: XACT_ABORT rolled
/// the transaction back and freed the fence row, the lease ran out and a
/// successor took it. The work's next statement must not run at all: in
/// autocommit it would commit under the successor's lease.
#[tokio::test]
async fn after_a_failed_statement_nothing_more_is_sent_so_a_late_write_cannot_land_under_a_successor() {
    let test = "after_a_failed_statement_nothing_more_is_sent_so_a_late_write_cannot_land_under_a_successor";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let report = report_table::create(&db, false).await;
    let insert = insert_into(&report);
    let proxy = Proxy::start(db.connection_string().server()).await;
    let (through, direct) = (proxy.ado(&db.ado()), db.ado());
    let (late, successor) = tokio::join!(worker(&through), worker(&direct));
    let key = provisioned(&late, "report").await;
    let lease = acquired(late.acquire(&key, support::lease::SHORT).await.unwrap());

    let outcome = late
        .fenced_transaction_without_guard(&lease, async |tx: &mut FencedTx<'_>| {
            tx.execute(&insert, &[&1i32, &"A"]).await?;
            let duplicate = tx.execute(&insert, &[&1i32, &"A again"]).await;
            assert_eq!(duplicate.as_ref().err().and_then(Error::server_number), Some(2627));
            // Ignored, as the pattern does; meanwhile the lease runs out and
            // a successor takes over.
            wait_until_expired(&successor, &key).await;
            let taken = acquired(successor.acquire(&key, LONG).await.unwrap());
            assert_eq!(taken.generation(), lease.generation() + 1);
            let sent = proxy.requests();
            let result = tx.execute(&insert, &[&2i32, &"A late"]).await;
            assert_eq!(proxy.requests(), sent, "a statement after the failure was sent");
            aborted("the statement after the failure", result);
            Ok::<_, Error>(())
        })
        .await;
    aborted("the commit of a work that swallowed an error", outcome);
    assert_eq!(
        writers(&db, &report).await,
        Vec::<String>::new(),
        "a row landed outside the fence"
    );
    drop((late, successor));
    db.drop().await;
}

/// SQL that commits or rolls back by itself (or calls a procedure that
/// does) ends the client's transaction; the next statement must not run in
/// autocommit. Whatever that statement answered, the one after it is
/// refused without being sent, and nothing after the end commits.
#[tokio::test]
async fn sql_that_ends_the_transaction_by_itself_leaves_nothing_to_run_unfenced() {
    let test = "sql_that_ends_the_transaction_by_itself_leaves_nothing_to_run_unfenced";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let report = report_table::create(&db, false).await;
    let insert = insert_into(&report);
    let rolls_back = format!("dbo.RollsBack_{}", Uuid::new_v4().simple());
    db.exec(&format!(
        "CREATE PROCEDURE {rolls_back} AS BEGIN ROLLBACK TRANSACTION; END"
    ))
    .await;
    // Nothing here depends on timing: no warm-up.
    let client = unwarmed(&db.ado()).await;
    let key = provisioned(&client, "report").await;
    let lease = acquired(client.acquire(&key, LONG).await.unwrap());
    let endings = [
        "COMMIT TRANSACTION;".to_string(),
        "ROLLBACK TRANSACTION;".to_string(),
        format!("EXEC {rolls_back};"),
    ];
    for (n, ending) in endings.iter().enumerate() {
        let id = 10 * n as i32;
        let mut tx = holding(client.begin_fenced_without_guard(&lease).await).await;
        tx.execute(&insert, &[&id, &"before"]).await.unwrap();
        let ended = tx.execute(ending, &[]).await;
        assert!(
            ended.is_err(),
            "{ending}: the statement that ended the transaction answered {ended:?}"
        );
        aborted(ending, tx.execute(&insert, &[&(id + 1), &"after"]).await);
        aborted(ending, tx.commit().await);
    }
    let landed = writers(&db, &report).await;
    assert!(!landed.iter().any(|w| w == "after"), "{landed:?}");
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    drop(client);
    db.drop().await;
}

/// SQL that leaves a transaction open inside the client's (`BEGIN TRAN`
/// without COMMIT) or turns on implicit transactions: the client never
/// reports `Committed` for a commit that only lowered `@@TRANCOUNT`, and its
/// session never carries the open transaction, with the fence row's lock,
/// into the next lease call.
#[tokio::test]
async fn an_unbalanced_transaction_is_never_reported_committed_nor_passed_to_the_next_call() {
    let test = "an_unbalanced_transaction_is_never_reported_committed_nor_passed_to_the_next_call";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let report = report_table::create(&db, false).await;
    // Nothing here depends on timing: no warm-up.
    let (client, observer) = (unwarmed(&db.ado()).await, unwarmed(&db.ado()).await);
    let unbalancing = [
        format!("BEGIN TRANSACTION; INSERT INTO {report} (Id, Writer) VALUES (@P1, N'nested');"),
        format!("SET IMPLICIT_TRANSACTIONS ON; INSERT INTO {report} (Id, Writer) VALUES (@P1, N'implicit');"),
    ];
    for (n, sql) in unbalancing.iter().enumerate() {
        let key = provisioned(&client, "report").await;
        let lease = acquired(client.acquire(&key, LONG).await.unwrap());
        let mut tx = holding(client.begin_fenced_without_guard(&lease).await).await;
        match tx.execute(sql, &[&(n as i32)]).await {
            // The engine refused the imbalance at once: nothing more runs.
            Err(_) => aborted(sql, tx.commit().await),
            Ok(_) => match tx.commit().await {
                Ok(()) => assert!(sql.contains("IMPLICIT"), "{sql}: a commit that left a transaction open"),
                other => aborted(sql, other),
            },
        }
        // The release goes out on the same pool of one connection: on a
        // session still inside a transaction it would never commit.
        assert_eq!(client.release(&lease).await.unwrap(), Release::Released, "{sql}");
        let (_, held, _, _) = state(&observer, &key).await;
        assert!(
            !held,
            "{sql}: the release ran inside a transaction left open by the work"
        );
    }
    assert!(!writers(&db, &report).await.iter().any(|w| w == "nested"));
    drop((client, observer));
    db.drop().await;
}

/// The work's SQL may change its session (isolation level, SET options, an
/// open transaction, the database in use): the next lease call must not
/// inherit it, so the session is never handed out again, whatever the SQL
/// was.
#[tokio::test]
async fn a_session_that_ran_the_works_sql_is_never_handed_to_the_next_call() {
    let test = "a_session_that_ran_the_works_sql_is_never_handed_to_the_next_call";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    // Nothing here depends on timing: no warm-up.
    let client = unwarmed(&db.ado()).await;
    let key = provisioned(&client, "report").await;
    let lease = acquired(client.acquire(&key, LONG).await.unwrap());
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let mut tx = holding(client.begin_fenced_without_guard(&lease).await).await;
        let rows = tx.query("SELECT CAST(@@SPID AS int) AS Spid;", &[]).await.unwrap();
        sessions.push(rows[0].get::<i32, _>("Spid").unwrap());
        tx.commit().await.unwrap();
    }
    assert_ne!(
        sessions[0], sessions[1],
        "the second transaction ran on the first one's session"
    );
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    drop(client);
    db.drop().await;
}

/// A COMMIT sent but never answered: its writes may have landed, so the
/// answer is neither "nothing was committed" nor an error a retry is safe
/// for.
#[tokio::test]
async fn a_commit_whose_answer_is_lost_is_commit_unknown_and_not_to_be_retried_blindly() {
    let test = "a_commit_whose_answer_is_lost_is_commit_unknown_and_not_to_be_retried_blindly";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let report = report_table::create(&db, false).await;
    let insert = insert_into(&report);
    let proxy = Proxy::start(db.connection_string().server()).await;
    // Nothing here depends on timing: no warm-up.
    let client = unwarmed(&proxy.ado(&db.ado())).await;
    let key = provisioned(&client, "report").await;
    let lease = acquired(client.acquire(&key, LONG).await.unwrap());
    for (id, cut) in [(1i32, Cut::BeforeReply), (2, Cut::BeforeRequest)] {
        let mut tx = holding(client.begin_fenced_without_guard(&lease).await).await;
        tx.execute(&insert, &[&id, &format!("{cut:?}")]).await.unwrap();
        proxy.cut_next(cut);
        let committed = tx.commit().await;
        assert!(!proxy.cut_pending(), "{cut:?}: the cut never happened");
        match &committed {
            Err(error @ Error::CommitUnknown { .. }) => assert!(!error.is_transient(), "{cut:?}: {error}"),
            other => panic!("{cut:?}: expected CommitUnknown, got {other:?}"),
        }
    }
    // Both were unknown to the client; the server ran only the first.
    assert_eq!(writers(&db, &report).await, ["BeforeReply"]);
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    drop(client);
    db.drop().await;
}

/// A fenced transaction lasts no longer than its lease: a statement stuck on
/// another session's lock is cut at the lease's local deadline rather than
/// the call timeout, and past that deadline nothing more is sent, so the
/// service never holds the fence row without bound itself.
#[tokio::test]
async fn a_fenced_transaction_does_not_outlast_its_lease() {
    let test = "a_fenced_transaction_does_not_outlast_its_lease";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let report = report_table::create(&db, false).await;
    let insert = insert_into(&report);
    let proxy = Proxy::start(db.connection_string().server()).await;
    let (through, direct) = (proxy.ado(&db.ado()), db.ado());
    let (client, successor) = tokio::join!(worker(&through), worker(&direct));
    let key = provisioned(&client, "report").await;
    let lease = acquired(client.acquire(&key, support::lease::SHORT).await.unwrap());

    // Another session holds the key the work is about to insert.
    let mut other = support::caller::Caller::new(db.connect().await);
    other.begin("READ COMMITTED").await.unwrap();
    other
        .batch(&format!("INSERT INTO {report} (Id, Writer) VALUES (5, N'other');"))
        .await
        .unwrap();

    let mut tx = holding(client.begin_fenced_without_guard(&lease).await).await;
    let stuck = tx.execute(&insert, &[&5i32, &"stuck"]).await;
    assert!(
        matches!(stuck, Err(Error::Network { timed_out: true, .. })),
        "{stuck:?}"
    );
    assert!(
        tokio::time::Instant::now() < lease.local_deadline() + Duration::from_secs(2),
        "the statement ran past the lease's deadline towards the 30 s call timeout"
    );
    aborted("a commit after the cut", tx.commit().await);
    other.rollback().await;

    let mut tx = holding(
        client
            .begin_fenced_without_guard(&acquired(client.acquire(&key, support::lease::SHORT).await.unwrap()))
            .await,
    )
    .await;
    tokio::time::sleep_until(tx.lease().local_deadline()).await;
    let sent = proxy.requests();
    aborted(
        "a statement past the deadline",
        tx.execute(&insert, &[&6i32, &"late"]).await,
    );
    assert_eq!(proxy.requests(), sent, "a statement past the lease's deadline was sent");
    aborted("a commit past the deadline", tx.commit().await);
    // The row is free: a successor takes the lease once the server sees it
    // ended.
    wait_until_expired(&successor, &key).await;
    acquired(successor.acquire(&key, LONG).await.unwrap());
    assert_eq!(writers(&db, &report).await, Vec::<String>::new());
    drop((client, successor, other));
    db.drop().await;
}

/// A guard's transaction object in a spawned task that borrows its own
/// locals, the shape an HTTP handler has: it must be `Send`. Never run, only
/// compiled.
#[test]
fn a_spawned_task_can_hold_a_fenced_transaction_that_borrows_its_locals() {
    fn spawnable<F: std::future::Future + Send + 'static>(_: F) {}
    spawnable(async move {
        let mut config = ClientConfig::new(ConnectionString::parse("Server=tcp:db,1433;User ID=svc;Password=x")?);
        config.max_connections(2);
        let client = Client::connect_with(config).await?;
        let day = String::from("2026-12-01");
        let total = 42i64;
        let lease: Lease = acquired(client.acquire("report:daily", LONG).await?);
        let guard = client.guard(lease);
        if let BeginFenced::Holding(mut tx) = guard.begin_fenced().await? {
            tx.execute(
                "INSERT INTO dbo.Daily (Day, Total) VALUES (@P1, @P2)",
                &[&day.as_str(), &total],
            )
            .await?;
            tx.commit().await?;
        }
        let _ = guard.release().await?;
        Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
    });
}

/// A fenced transaction that ran and committed through the guard's closure
/// form still commits what the holder wrote.
#[tokio::test]
async fn a_guards_fenced_transaction_commits_the_holders_rows() {
    let test = "a_guards_fenced_transaction_commits_the_holders_rows";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let report = report_table::create(&db, false).await;
    let insert = insert_into(&report);
    let mut config = ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap());
    config.max_connections(2).allow_privileged_login(true);
    // Nothing here depends on timing: no warm-up.
    let client = Client::connect_with(config).await.unwrap();
    let key = provisioned(&client, "report").await;
    let guard = client.guard(acquired(client.acquire(&key, LONG).await.unwrap()));
    let written = guard
        .fenced_transaction(async |tx| {
            tx.execute(&insert, &[&1i32, &"holder"]).await?;
            Ok::<_, Error>(1)
        })
        .await
        .unwrap();
    assert!(matches!(written, FencedOutcome::Committed(1)), "{written:?}");
    assert_eq!(writers(&db, &report).await, ["holder"]);
    assert_eq!(guard.release().await.unwrap(), Release::Released);
    drop(client);
    db.drop().await;
}

/// A statement that runs past its call timeout must not leave the fence row
/// locked while the caller still holds the transaction: the client asks the
/// server to stop it (an Attention, which SQL Server acknowledges at once
/// and which rolls back under `XACT_ABORT ON`) and closes its connection,
/// which rolls back once the engine notices (Babelfish reads an Attention
/// only between requests, and notices the closed connection when the
/// statement ends). An operator's force-release then goes through while the
/// transaction object is still alive.
#[tokio::test]
async fn a_statement_that_timed_out_leaves_the_fence_row_free_while_its_transaction_is_kept() {
    let test = "a_statement_that_timed_out_leaves_the_fence_row_free_while_its_transaction_is_kept";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let mut config = ClientConfig::new(ConnectionString::parse(&db.ado()).unwrap());
    config
        .max_connections(1)
        .call_timeout(Duration::from_secs(3))
        .allow_privileged_login(true);
    let client = Client::connect_with(config).await.unwrap();
    let operator = worker(&db.ado()).await;
    let key = provisioned(&operator, "report").await;
    let lease = acquired(client.acquire(&key, LONG).await.unwrap());
    // A statement that waits past its timeout: on a row another session
    // holds, let go of a moment after the timeout.
    let blocked = format!("dbo.Blocked_{}", Uuid::new_v4().simple());
    db.exec(&format!(
        "CREATE TABLE {blocked} (Id int PRIMARY KEY, Value int NOT NULL); INSERT INTO {blocked} VALUES (1, 0);"
    ))
    .await;
    let mut blocker = Caller::new(db.connect().await);
    blocker.begin("READ COMMITTED").await.unwrap();
    blocker
        .batch(&format!("UPDATE {blocked} SET Value = 1 WHERE Id = 1;"))
        .await
        .unwrap();
    let mut tx = holding(client.begin_fenced_without_guard(&lease).await).await;
    let timed_out = tx
        .execute(&format!("UPDATE {blocked} SET Value = 2 WHERE Id = 1;"), &[])
        .await;
    assert!(
        matches!(timed_out, Err(Error::Network { timed_out: true, .. })),
        "{timed_out:?}"
    );
    blocker.commit().await.unwrap();
    // The transaction object is kept; the row must not be. Each attempt
    // waits at most 5 s for the row.
    let give_up = tokio::time::Instant::now() + Duration::from_secs(20);
    let forced = loop {
        match operator.admin().force_release(&key).await {
            Ok(forced) => break forced,
            Err(error) if tokio::time::Instant::now() < give_up => {
                eprintln!("force-release still blocked: {error}");
            }
            Err(error) => panic!("the fence row stayed locked after the statement timed out: {error}"),
        }
    };
    assert!(matches!(forced, ForceRelease::Fenced { .. }), "{forced:?}");
    aborted("the commit after a statement that timed out", tx.commit().await);
    drop((client, operator, blocker));
    db.drop().await;
}

/// A statement whose future the caller dropped before its answer (a
/// timeout of the caller's own around it) leaves its reply unread on the
/// connection: the transaction must not go on on it. The commit that
/// follows answers `TransactionAborted`, and nothing of the transaction,
/// the dropped statement included, commits.
#[tokio::test]
async fn a_statement_dropped_before_its_answer_ends_the_transaction_and_nothing_commits() {
    let test = "a_statement_dropped_before_its_answer_ends_the_transaction_and_nothing_commits";
    let Some(db) = TestDatabase::shared(test).await else {
        return;
    };
    let blocked = format!("dbo.Blocked_{}", Uuid::new_v4().simple());
    db.exec(&format!(
        "CREATE TABLE {blocked} (Id int PRIMARY KEY, Value int NOT NULL); INSERT INTO {blocked} VALUES (1, 0), (2, 0);"
    ))
    .await;
    // Nothing here depends on timing: no warm-up.
    let client = unwarmed(&db.ado()).await;
    let key = provisioned(&client, "report").await;
    let lease = acquired(client.acquire(&key, LONG).await.unwrap());
    let mut blocker = Caller::new(db.connect().await);
    blocker.begin("READ COMMITTED").await.unwrap();
    blocker
        .batch(&format!("UPDATE {blocked} SET Value = 1 WHERE Id = 1;"))
        .await
        .unwrap();
    let mut tx = holding(client.begin_fenced_without_guard(&lease).await).await;
    tx.execute(&format!("UPDATE {blocked} SET Value = 2 WHERE Id = 2;"), &[])
        .await
        .unwrap();
    // Sent, and waiting on the blocker's row when the caller gives up on it.
    let dropped = tokio::time::timeout(
        Duration::from_secs(2),
        tx.execute(&format!("UPDATE {blocked} SET Value = 2 WHERE Id = 1;"), &[]),
    )
    .await;
    assert!(dropped.is_err(), "the blocked statement answered: {dropped:?}");
    blocker.commit().await.unwrap();
    aborted("the commit after a dropped statement", tx.commit().await);
    let values: Vec<i32> = db
        .query(&format!("SELECT Value FROM {blocked} ORDER BY Id"))
        .await
        .iter()
        .map(|row| row.get::<i32, _>(0).unwrap())
        .collect();
    assert_eq!(values, [1, 0], "the fenced transaction's writes committed");
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
    drop((client, blocker));
    db.drop().await;
}
