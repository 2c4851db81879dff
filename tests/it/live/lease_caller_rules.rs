//! What a caller's own transaction, its isolation level and its transaction
//! mode do to the fence procedures, and what an operator can do about a
//! holder whose transaction stays open. Where Babelfish cannot show the SQL
//! Server behaviour a fix follows, the test runs what it can and says what
//! it skipped.

use crate::support;

use std::time::Duration;

use support::TestDatabase;
use support::caller::{Answer, Caller};
use support::lease::{json, lease_cli};
use support::signal::until_waiting_for_a_lock;
use uuid::Uuid;

const PROVISION: &str = "EXEC fence_api.Provision @ResourceKey = @P1";
const ASSERT: &str = "EXEC fence_api.AssertHolder @ResourceKey = @P1, @Owner = @P2, @Generation = @P3";
const PRUNE: &str = "EXEC fence_admin.PruneTenure @OlderThanDays = @P1";
const REPORT: &str = "CREATE TABLE dbo.Report (Id int IDENTITY PRIMARY KEY, Writer nvarchar(20) NOT NULL);";

/// Longer than any bound a procedure waits for a row: a call still running
/// after this has hung.
const HANG: Duration = Duration::from_secs(20);

async fn provisioned(caller: &mut Caller, name: &str) -> String {
    let key = format!("{name}:{}", Uuid::new_v4().simple());
    assert_eq!(caller.call(PROVISION, &[&key.as_str()]).await.outcome(), "Created");
    key
}

/// A holder with a live lease whose own transaction holds the fence row
/// (AssertHolder), left open.
async fn open_holder(db: &TestDatabase, key: &str) -> (Caller, i32) {
    let mut holder = Caller::new(db.connect().await);
    let owner = Uuid::new_v4();
    let acquired = holder.acquire(key, owner, 600).await;
    let generation = acquired.big("Generation").unwrap();
    holder.begin("READ COMMITTED").await.unwrap();
    holder
        .batch("INSERT INTO dbo.Report (Writer) VALUES (N'holder');")
        .await
        .unwrap();
    let held = holder.call(ASSERT, &[&key, &owner, &generation]).await;
    assert_eq!(held.outcome(), "Holding");
    let spid = holder.spid().await;
    (holder, spid)
}

#[tokio::test]
async fn a_successors_acquire_behind_an_open_holder_transaction_answers_within_its_bound() {
    let name = "a_successors_acquire_behind_an_open_holder_transaction_answers_within_its_bound";
    let Some(db) = TestDatabase::deployed(name).await else {
        return;
    };
    db.exec(REPORT).await;
    let mut successor = Caller::new(db.connect().await);
    let key = provisioned(&mut successor, "open").await;
    let warm = provisioned(&mut successor, "warm").await;
    assert_eq!(successor.acquire(&warm, Uuid::new_v4(), 1).await.outcome(), "Acquired");
    let (holder, _) = open_holder(&db, &key).await;

    let answer = tokio::time::timeout(HANG, successor.acquire(&key, Uuid::new_v4(), 30))
        .await
        .expect("the successor's Acquire hung behind the holder's open transaction");
    match answer {
        // SQL Server: the lock timeout answers Busy with the holder's expiry.
        Answer::Row(_) => {
            assert_eq!(answer.outcome(), "Busy");
            assert!(answer.time("LeaseUntilUtc").is_some(), "{answer:?}");
        }
        // Babelfish: its lock timeout cannot be caught inside the procedure.
        Answer::Error { number, ref message } => {
            assert!(
                db.is_babelfish().await && message.contains("lock timeout"),
                "Acquire failed instead of answering: {number} {message}"
            );
            support::skip(
                name,
                "Busy after the bounded wait: Babelfish's \"canceling statement due to lock timeout\" \
                 cannot be caught by TRY...CATCH, so the bound ends in that error there",
            );
        }
    }
    drop((holder, successor));
    db.drop().await;
}

/// A database of its own for `test`, with the holders' `dbo.Report`, and a
/// key provisioned by the returned session: what the force-release tests
/// start from.
async fn provisioned_with_report(test: &str, label: &str) -> Option<(TestDatabase, Caller, String)> {
    let db = TestDatabase::deployed(test).await?;
    db.exec(REPORT).await;
    let mut setup = Caller::new(db.connect().await);
    let key = provisioned(&mut setup, label).await;
    Some((db, setup, key))
}

/// `fencepost lease force-release key flags…` as an operator runs it, which
/// must end within `within`.
async fn force_release_cli(db: &TestDatabase, key: &str, flags: &[&str], within: Duration) -> std::process::Output {
    let args: Vec<&str> = ["force-release", key]
        .into_iter()
        .chain(flags.iter().copied())
        .collect();
    tokio::time::timeout(within, lease_cli(&args, &db.ado()))
        .await
        .unwrap_or_else(|_| panic!("force-release {flags:?} hung"))
}

#[tokio::test]
async fn force_release_behind_an_open_holder_names_the_session_and_kill_blocker_ends_it() {
    let name = "force_release_behind_an_open_holder_names_the_session_and_kill_blocker_ends_it";
    let Some((db, setup, key)) = provisioned_with_report(name, "stuck").await else {
        return;
    };
    let (mut holder, spid) = open_holder(&db, &key).await;

    let refused = force_release_cli(&db, &key, &[], HANG).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_ne!(refused.status.code(), Some(0), "{refused:?}");
    assert!(
        stderr.contains(&format!("session {spid}")) && stderr.contains("--kill-blocker"),
        "the error does not name the blocking session {spid}: {stderr}"
    );
    assert_eq!(holder.trancount().await, 1, "the refusal touched the holder");

    let output = force_release_cli(&db, &key, &["--kill-blocker", "--format", "json"], HANG).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let answer = json(&output);
    assert_eq!(answer["outcome"], "Fenced", "{answer}");
    assert_eq!(answer["killed_session"], spid, "{answer}");
    assert!(
        holder.batch("SELECT 1;").await.is_err(),
        "the holder's session survived the kill"
    );
    let rows = db.query("SELECT COUNT(*) FROM dbo.Report;").await;
    assert_eq!(rows[0].get::<i32, _>(0), Some(0), "the killed holder's write committed");
    drop((holder, setup));
    db.drop().await;
}

#[tokio::test]
async fn a_snapshot_caller_whose_first_access_is_a_fence_call_keeps_a_usable_transaction() {
    let name = "a_snapshot_caller_whose_first_access_is_a_fence_call_keeps_a_usable_transaction";
    let Some(db) = TestDatabase::deployed(name).await else {
        return;
    };
    db.exec(REPORT).await;
    let babelfish = db.is_babelfish().await;
    if !babelfish {
        db.exec(&format!(
            "ALTER DATABASE [{}] SET ALLOW_SNAPSHOT_ISOLATION ON;",
            db.name
        ))
        .await;
    }
    let mut caller = Caller::new(db.connect().await);
    let key = provisioned(&mut caller, "snap").await;
    let owner = Uuid::new_v4();
    let generation = caller.acquire(&key, owner, 600).await.big("Generation").unwrap();

    caller.begin("SNAPSHOT").await.unwrap();
    let held = caller.call(ASSERT, &[&key.as_str(), &owner, &generation]).await;
    assert_eq!(held.outcome(), "Holding");
    // 3951 here on SQL Server when the fence call started the transaction
    // at READ COMMITTED.
    caller
        .batch("INSERT INTO dbo.Report (Writer) VALUES (N'snapshot');")
        .await
        .expect("the caller's own statement after the fence call");
    caller.commit().await.unwrap();
    let rows = db.query("SELECT COUNT(*) FROM dbo.Report;").await;
    assert_eq!(rows[0].get::<i32, _>(0), Some(1));
    if babelfish {
        support::skip(
            name,
            "3951: Babelfish procedures never SET TRANSACTION ISOLATION LEVEL (it refuses the SET in a call \
             whose level differs), so a SNAPSHOT transaction cannot start at READ COMMITTED there",
        );
    }
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn assert_holder_accepts_the_transaction_implicit_mode_opens() {
    let name = "assert_holder_accepts_the_transaction_implicit_mode_opens";
    let Some(db) = TestDatabase::shared(name).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let mut successor = Caller::new(db.connect().await);
    let key = provisioned(&mut caller, "implicit").await;
    let owner = Uuid::new_v4();
    let generation = caller.acquire(&key, owner, 600).await.big("Generation").unwrap();

    caller.batch("SET IMPLICIT_TRANSACTIONS ON;").await.unwrap();
    let held = caller.call(ASSERT, &[&key.as_str(), &owner, &generation]).await;
    assert_eq!(held.error_number(), None, "implicit-transaction mode refused: {held:?}");
    assert_eq!(held.outcome(), "Holding");
    assert_eq!(
        caller.trancount().await,
        1,
        "the fence row's lock is not in a transaction"
    );
    // The row stays locked until the caller commits: the successor waits.
    let inspect = successor.inspect(&key).await;
    assert_eq!(inspect.outcome(), "Found");
    caller
        .batch("COMMIT TRANSACTION; SET IMPLICIT_TRANSACTIONS OFF;")
        .await
        .unwrap();
    assert_eq!(caller.trancount().await, 0);
    drop((caller, successor));
    db.drop().await;
}

#[tokio::test]
async fn an_acquire_in_a_transaction_that_rolls_back_is_issued_again() {
    let name = "an_acquire_in_a_transaction_that_rolls_back_is_issued_again";
    let Some(db) = TestDatabase::shared(name).await else {
        return;
    };
    let (mut first, mut second) = (Caller::new(db.connect().await), Caller::new(db.connect().await));
    let key = provisioned(&mut first, "provisional").await;
    first.begin("READ COMMITTED").await.unwrap();
    let provisional = first.acquire(&key, Uuid::new_v4(), 600).await;
    assert_eq!(provisional.outcome(), "Acquired");
    first.rollback().await;
    let again = second.acquire(&key, Uuid::new_v4(), 600).await;
    // The README's contract says so: an outcome inside a caller's
    // transaction takes effect only when it commits.
    assert_eq!(again.big("Generation"), provisional.big("Generation"));

    // In implicit-transaction mode a standalone call stays uncommitted too.
    second.batch("SET IMPLICIT_TRANSACTIONS ON;").await.unwrap();
    let other = provisioned(&mut first, "implicit").await;
    assert_eq!(second.acquire(&other, Uuid::new_v4(), 600).await.outcome(), "Acquired");
    assert_eq!(
        second.trancount().await,
        1,
        "implicit-transaction mode left no transaction open"
    );
    second
        .batch("ROLLBACK TRANSACTION; SET IMPLICIT_TRANSACTIONS OFF;")
        .await
        .unwrap();
    drop((first, second));
    db.drop().await;
}

#[tokio::test]
async fn prune_refuses_a_callers_transaction_and_deletes_past_one_batch() {
    let name = "prune_refuses_a_callers_transaction_and_deletes_past_one_batch";
    let Some(db) = TestDatabase::deployed(name).await else {
        return;
    };
    // 9,000 tenures that ended long ago: more than two batches.
    db.exec(
        "WITH n AS (SELECT TOP (9000) ROW_NUMBER() OVER (ORDER BY a.object_id) AS i \
                      FROM sys.all_objects a CROSS JOIN sys.all_objects b) \
         INSERT INTO fence.Tenure (ResourceKey, Generation, OwnerHash, AcquiredAtUtc, EndedAtUtc, Ending, Published) \
         SELECT N'old', i, 0x00, NULL, DATEADD(DAY, -400, SYSUTCDATETIME()), N'Released', 0 FROM n;",
    )
    .await;
    let mut caller = Caller::new(db.connect().await);
    caller.begin("READ COMMITTED").await.unwrap();
    let refused = caller.call(PRUNE, &[&30i32]).await;
    assert_eq!(refused.error_number(), Some(50128), "{refused:?}");
    assert_eq!(caller.trancount().await, 0, "the refusal left the transaction open");
    let rows = db.query("SELECT COUNT(*) FROM fence.Tenure;").await;
    assert_eq!(
        rows[0].get::<i32, _>(0),
        Some(9000),
        "a refused prune deleted something"
    );

    let pruned = caller.call(PRUNE, &[&30i32]).await;
    assert_eq!(pruned.outcome(), "Pruned");
    match &pruned {
        Answer::Row(row) => assert_eq!(row.get::<i32, _>("Deleted"), Some(9000)),
        other => panic!("{other:?}"),
    }
    if db.is_babelfish().await {
        support::skip(
            name,
            "lock escalation at 5,000 locks: PostgreSQL never escalates row locks, so only the batch count shows here",
        );
    }
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn list_matches_a_prefix_literally_and_pages_after_a_key() {
    let name = "list_matches_a_prefix_literally_and_pages_after_a_key";
    let Some(db) = TestDatabase::shared(name).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let run = Uuid::new_v4().simple().to_string();
    // Full-width ％ and ＿ (U+FF05, U+FF3F) equal % and _ under a
    // width-insensitive collation, the default of most databases.
    let suffixes = [
        "job", "jobs", "job x", "a_1", "ab1", "p%q", "pzq", "[x]", "x", "w％a", "w%b", "w＿c", "w_d",
    ];
    for suffix in suffixes {
        let key = format!("{run}:{suffix}");
        assert_eq!(caller.call(PROVISION, &[&key.as_str()]).await.outcome(), "Created");
    }
    async fn keys(db: &TestDatabase, prefix: &str, limit: i32, after: Option<&str>) -> Vec<String> {
        let rows = db
            .session()
            .await
            .query(
                "EXEC fence_admin.ListLeases @Prefix = @P1, @HeldOnly = 0, @MaxRows = @P2, @After = @P3",
                &[&prefix, &limit, &after.unwrap_or("")],
            )
            .await
            .unwrap_or_else(|e| panic!("ListLeases {prefix:?} after {after:?}: {e}"))
            .into_first_result()
            .await
            .unwrap();
        rows.iter()
            .map(|r| r.get::<&str, _>("ResourceKey").unwrap().to_string())
            .collect()
    }
    let p = |s: &str| format!("{run}:{s}");
    assert_eq!(
        keys(&db, &p("job "), 100, None).await,
        [p("job x")],
        "a trailing space was padded"
    );
    assert_eq!(
        keys(&db, &p("a_"), 100, None).await,
        [p("a_1")],
        "_ matched as a wildcard"
    );
    assert_eq!(
        keys(&db, &p("p%"), 100, None).await,
        [p("p%q")],
        "% matched as a wildcard"
    );
    assert_eq!(
        keys(&db, &p("[x"), 100, None).await,
        [p("[x]")],
        "[ opened a character class"
    );
    assert_eq!(
        keys(&db, &p("w％"), 100, None).await,
        [p("w％a")],
        "a full-width ％ was escaped as %"
    );
    assert_eq!(
        keys(&db, &p("w＿"), 100, None).await,
        [p("w＿c")],
        "a full-width ＿ was escaped as _"
    );
    let first = keys(&db, &p(""), 4, None).await;
    assert_eq!(first.len(), 4);
    let rest = keys(&db, &p(""), 100, Some(first.last().unwrap())).await;
    assert_eq!(
        first.len() + rest.len(),
        suffixes.len(),
        "pages {first:?} then {rest:?}"
    );
    assert!(rest.iter().all(|k| !first.contains(k)), "pages overlap");
    drop(caller);
    db.drop().await;
}

#[tokio::test]
async fn recover_and_prune_are_granted_to_fence_recovery_apart_from_force_release() {
    let name = "recover_and_prune_are_granted_to_fence_recovery_apart_from_force_release";
    let Some(mut db) = TestDatabase::deployed(name).await else {
        return;
    };
    let operator = db.login_in_role(Some("fence_operator")).await;
    let recovery = db.login_in_role(Some("fence_recovery")).await;
    for (ado, procedure, expected) in [
        (&operator, "fence_admin.ForceRelease", true),
        (&operator, "fence_admin.Recover", false),
        (&operator, "fence_admin.PruneTenure", false),
        (&recovery, "fence_admin.Recover", true),
        (&recovery, "fence_admin.PruneTenure", true),
        (&recovery, "fence_admin.ForceRelease", false),
        (&operator, "fence_admin.Retire", true),
        (&operator, "fence_admin.PruneOutcomes", false),
        (&recovery, "fence_admin.PruneOutcomes", true),
        (&recovery, "fence_admin.Retire", false),
    ] {
        let has = support::has_execute(ado, procedure).await;
        assert_eq!(has, Some(expected), "EXECUTE on {procedure}");
    }
    db.drop().await;
}

#[tokio::test]
async fn a_lock_first_statement_changes_the_row_it_locks() {
    let name = "a_lock_first_statement_changes_the_row_it_locks";
    let Some(db) = TestDatabase::shared(name).await else {
        return;
    };
    let mut caller = Caller::new(db.connect().await);
    let key = provisioned(&mut caller, "stamp").await;
    let count = || async {
        let rows = db
            .query(&format!(
                "SELECT LockCount FROM fence.Resource WHERE ResourceKey = N'{key}';"
            ))
            .await;
        rows[0].get::<i64, _>(0).unwrap()
    };
    let before = count().await;
    let owner = Uuid::new_v4();
    let generation = caller.acquire(&key, owner, 600).await.big("Generation").unwrap();
    assert_eq!(caller.renew(&key, owner, generation, 600).await.outcome(), "Renewed");
    caller.begin("READ COMMITTED").await.unwrap();
    assert_eq!(
        caller
            .call(ASSERT, &[&key.as_str(), &owner, &generation])
            .await
            .outcome(),
        "Holding"
    );
    caller.commit().await.unwrap();
    assert_eq!(count().await, before + 3, "a lock-first statement modified nothing");
    let optimized = db
        .query("SELECT CAST(ISNULL(DATABASEPROPERTYEX(DB_NAME(), 'IsOptimizedLockingOn'), 0) AS int);")
        .await;
    if optimized[0].get::<i32, _>(0) != Some(1) {
        support::skip(
            name,
            "a successor waiting on the TID lock under optimized locking: \
             DATABASEPROPERTYEX(DB_NAME(), 'IsOptimizedLockingOn') is not 1 on this engine",
        );
    }
    drop(caller);
    db.drop().await;
}

/// A session whose open transaction only read the fence table, as a report
/// or a monitoring query does.
async fn reader_with_an_open_transaction(db: &TestDatabase) -> Caller {
    let mut reader = Caller::new(db.connect().await);
    reader.begin("READ COMMITTED").await.unwrap();
    reader.batch("SELECT COUNT(*) FROM fence.Resource;").await.unwrap();
    reader
}

#[tokio::test]
async fn force_release_names_and_kills_the_session_holding_the_row_not_one_that_only_read_the_table() {
    let name = "force_release_names_and_kills_the_session_holding_the_row_not_one_that_only_read_the_table";
    let Some((db, setup, key)) = provisioned_with_report(name, "stuck").await else {
        return;
    };
    // Readers opened before the holder and after it, so that naming the
    // holder does not hang on the order in which sessions are listed.
    let mut readers = vec![reader_with_an_open_transaction(&db).await];
    let (mut holder, spid) = open_holder(&db, &key).await;
    readers.push(reader_with_an_open_transaction(&db).await);
    readers.push(reader_with_an_open_transaction(&db).await);

    let refused = force_release_cli(&db, &key, &[], HANG).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains(&format!("session {spid},")),
        "the error does not name the holder's session {spid}: {stderr}"
    );

    let output = force_release_cli(&db, &key, &["--kill-blocker", "--format", "json"], HANG).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let answer = json(&output);
    assert_eq!(answer["killed_session"], spid, "{answer}");
    assert!(
        holder.batch("SELECT 1;").await.is_err(),
        "the holder's session survived"
    );
    for reader in &mut readers {
        assert_eq!(
            reader.trancount().await,
            1,
            "a reader's session or transaction was ended"
        );
        reader.rollback().await;
    }
    drop((holder, readers, setup));
    db.drop().await;
}

/// A session whose UPDATE of `key`'s fence row, after `first` (in the same
/// batch), waits behind the row's holder longer than any procedure's bound;
/// returned once it waits, with its session id. The task answers with the
/// session and how the batch ended.
async fn queued_writer(
    db: &TestDatabase,
    key: &str,
    first: &str,
) -> (
    tokio::task::JoinHandle<(Caller, Result<(), tiberius::error::Error>)>,
    i32,
) {
    let mut queued = Caller::new(db.connect().await);
    let spid = queued.spid().await;
    let batch = format!(
        "SET LOCK_TIMEOUT {}; {first} UPDATE fence.Resource SET Payload = Payload WHERE ResourceKey = N'{key}';",
        HANG.as_millis()
    );
    let writer = tokio::spawn(async move {
        let wrote = queued.batch(&batch).await;
        (queued, wrote)
    });
    until_waiting_for_a_lock(db, spid, HANG).await;
    (writer, spid)
}

#[tokio::test]
async fn force_release_behind_a_queue_for_the_row_kills_the_holder_at_its_head_not_the_writer_queued_first() {
    let name = "force_release_behind_a_queue_for_the_row_kills_the_holder_at_its_head_not_the_writer_queued_first";
    let Some((db, setup, key)) = provisioned_with_report(name, "queued").await else {
        return;
    };
    let (mut holder, spid) = open_holder(&db, &key).await;
    // A writer queued for the row before the force-release, with a wait
    // longer than the procedure's bound: while both wait, the force-release
    // waits behind the writer, and the writer behind the holder.
    let (writer, queued_spid) = queued_writer(&db, &key, "").await;

    let output = force_release_cli(&db, &key, &["--kill-blocker", "--format", "json"], HANG).await;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let answer = json(&output);
    assert_eq!(
        answer["killed_session"], spid,
        "the holder is {spid}, the queued writer {queued_spid}: {answer}"
    );
    assert!(
        holder.batch("SELECT 1;").await.is_err(),
        "the holder's session survived"
    );
    let (mut queued, wrote) = writer.await.unwrap();
    wrote.expect("the queued writer's update, once the holder was gone");
    assert_eq!(queued.trancount().await, 0);
    drop((holder, queued, setup));
    db.drop().await;
}

#[tokio::test]
async fn a_force_release_that_ended_the_holder_names_the_session_that_took_the_row_meanwhile_and_ends_no_other() {
    let name = "a_force_release_that_ended_the_holder_names_the_session_that_took_the_row_meanwhile_and_ends_no_other";
    let Some((db, setup, key)) = provisioned_with_report(name, "taken").await else {
        return;
    };
    let (mut holder, spid) = open_holder(&db, &key).await;
    // Queued ahead of the force-release, the writer gets the row once the
    // holder is ended, in a transaction it leaves open: the second
    // ForceRelease waits behind it. SQL Server grants a row's lock to its
    // waiters in the order they came; PostgreSQL does not: once the holder's
    // transaction ends, a newcomer can update the row before the woken
    // waiter runs (a queued writer stopped with SIGSTOP, then the holder
    // terminated: a third session's UPDATE went through at once). On
    // Babelfish the second call may therefore fence the key first; the
    // writer then takes the row after it, and that is all the test can
    // force there.
    let babelfish = db.is_babelfish().await;
    let (writer, taker) = queued_writer(&db, &key, "BEGIN TRANSACTION;").await;

    // Two calls, each waiting out the procedure's bound.
    let output = force_release_cli(&db, &key, &["--kill-blocker"], HANG * 2).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let writer_went_first = output.status.code() != Some(0);
    if writer_went_first {
        assert!(
            stderr.contains(&format!("ended session {spid},"))
                && stderr.contains(&format!("session {taker} then took the row"))
                && stderr.contains(&format!("Session {taker} was not ended")),
            "the holder is {spid}, the writer that took the row {taker}: {stderr}"
        );
    } else {
        assert!(
            babelfish,
            "the force-release went ahead of the writer queued before it: {output:?}"
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.contains(&format!("ended session {spid},")) && !stdout.contains(&format!("session {taker}")),
            "the holder is {spid}, the writer {taker}: {stdout}"
        );
        eprintln!(
            "{name}: the second ForceRelease took the row before the woken writer (PostgreSQL does not keep the \
             queue's order); the writer took it afterwards"
        );
    }
    assert!(
        holder.batch("SELECT 1;").await.is_err(),
        "the holder's session survived"
    );
    let (mut taker_session, wrote) = writer.await.unwrap();
    wrote.expect("the writer's update, once the holder was gone");
    assert_eq!(
        taker_session.trancount().await,
        1,
        "the writer's session or transaction was ended"
    );
    taker_session.rollback().await;
    drop((holder, taker_session, setup));
    db.drop().await;
}
