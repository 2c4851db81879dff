//! A fence row locked by a caller's open transaction: a successor waits for
//! it at most 5 s and is never granted the lease while the holder's
//! transaction is open.

use std::time::{Duration, Instant};

use anyhow::Result;
use uuid::Uuid;

use crate::client::Acquire;
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, SHORT, acquire_name, acquired};
use crate::selftest::session::{ACQUIRE, Answer, RELEASE, Session};

/// The procedures' lock bound (`SET LOCK_TIMEOUT 5000`), and the slack a
/// busy engine gets on either side of it.
const BOUND: Duration = Duration::from_secs(5);
const EARLIEST: Duration = Duration::from_secs(4);
const LATEST: Duration = Duration::from_secs(15);

/// What a check says of a call still waiting at `LATEST`.
const LET_GO: &str = ", only once S1 rolled back to let it go: it was still waiting after 15 s";

pub(crate) const HELD_BY_CALLER: Check = Check {
    name: "row_lock_held_by_caller_transaction",
    behaviour: "S1 holds the fence row in its own open transaction (AssertHolder) past the lease's end; \
                S2 acquires, then again after S1 commits",
    document: "engines.md row 1 and row 5; B1, B3, B5; contract: Procedures (Acquire: waits at most 5 s)",
    expected: "S2 waits about 5 s and answers the procedure's row Busy with LeaseUntilUtc = ServerUtc (never \
               Acquired, never an error) while S1 is open; Acquired with the next generation after S1 commits",
    run: |ctx| Box::pin(held_by_caller(ctx)),
};

async fn held_by_caller(ctx: &Context) -> Result<Verdict> {
    let [a, b]: [_; 2] = ctx.clients(2).await?.try_into().expect("two clients");
    let key = ctx.key(&a, "row-lock").await?;
    let lease = acquired(a.acquire(&key, SHORT).await?)?;
    let mut holder = ctx.session().await?;
    let held = holder.hold(&lease).await?;
    holder.wait_past(lease.until()).await?;
    let mut waiter = ctx.session().await?;
    let owner = Uuid::new_v4();
    let (waiting, let_go, waited) = acquire_let_go_by_rollback(&mut waiter, &mut holder, &key, owner).await?;
    if !let_go {
        holder.batch("COMMIT TRANSACTION;").await?;
    }
    if let Some(generation) = waiting.big("Generation") {
        let _ = waiter.call(RELEASE, &[&key.as_str(), &owner, &generation]).await;
    }
    let after = b.acquire(&key, LONG).await?;
    if let Acquire::Acquired(next) = &after {
        let _ = b.release(next).await;
    }
    let babelfish = ctx.engine.babelfish;
    let busy = waited_answer_holds(&waiting, babelfish);
    let bounded = (EARLIEST..=LATEST).contains(&waited);
    let next = matches!(&after, Acquire::Acquired(next) if next.generation() == lease.generation() + 1);
    let expected = match (babelfish, ctx.engine.read_committed_snapshot) {
        (true, _) => {
            "Babelfish: S2's Acquire ends after about 5 s in the engine's lock-timeout error (no procedure can \
             catch it there; the client answers it as Busy), never Acquired while S1 is open; Acquired with the \
             next generation after S1 commits"
        }
        (false, Some(true)) => {
            "with READ_COMMITTED_SNAPSHOT on: S2's Acquire answers the row Outcome = Busy after about 5 s, \
             LeaseUntilUtc = ServerUtc (the committed lease ended; S1's open transaction decides), never an \
             error; Acquired with the next generation after S1 commits"
        }
        (false, _) => {
            "with READ_COMMITTED_SNAPSHOT off: S2's Acquire answers the row Outcome = Busy after about 5 s, \
             LeaseUntilUtc = ServerUtc (the committed row cannot be read without waiting), never an error; \
             Acquired with the next generation after S1 commits"
        }
    };
    Ok(Verdict::judge(
        held == "Holding" && busy && bounded && next,
        format!(
            "S1 AssertHolder {held}; S2 answered {} after {:.1} s (bound {} s){}; after S1's commit S2 {}",
            describe_waited(&waiting),
            waited.as_secs_f64(),
            BOUND.as_secs(),
            if let_go { LET_GO } else { "" },
            acquire_name(&after)
        ),
    )
    .expecting(expected))
}

/// What S2's Acquire behind S1's open transaction must answer: on SQL
/// Server and Azure SQL the procedure's own row, `Busy` with nothing left
/// of the ended lease (`LeaseUntilUtc` = `ServerUtc`, B5), never an error;
/// on Babelfish the engine's lock-timeout error, which no procedure there
/// can catch. Anything else fails the check.
fn waited_answer_holds(answer: &Answer, babelfish: bool) -> bool {
    match answer {
        Answer::Row(row) if !babelfish => {
            row.get::<&str, _>("Outcome") == Some("Busy")
                && row.get::<time::PrimitiveDateTime, _>("LeaseUntilUtc").is_some()
                && row.get::<time::PrimitiveDateTime, _>("LeaseUntilUtc")
                    == row.get::<time::PrimitiveDateTime, _>("ServerUtc")
        }
        Answer::Error { message, .. } if babelfish => message.contains("lock timeout"),
        _ => false,
    }
}

/// S2's answer in a few words.
fn describe_waited(answer: &Answer) -> String {
    match answer {
        Answer::Row(row) => {
            let until = row.get::<time::PrimitiveDateTime, _>("LeaseUntilUtc");
            let now = row.get::<time::PrimitiveDateTime, _>("ServerUtc");
            match (answer.outcome().as_str(), until, now) {
                ("Busy", Some(u), Some(n)) if u == n => "the row Busy (LeaseUntilUtc = ServerUtc)".to_string(),
                ("Busy", Some(u), Some(n)) => format!("the row Busy ({:.1} s left)", (u - n).as_seconds_f64()),
                (outcome, _, _) => format!("the row {outcome}"),
            }
        }
        Answer::Error { .. } => answer.outcome(),
    }
}

pub(crate) const WAIT_IN_CALLER_TRANSACTION: Check = Check {
    name: "lock_bound_inside_caller_transaction",
    behaviour: "S1 holds the fence row in its open transaction; S2 acquires inside a transaction of its own",
    document: "engines.md row 5 (A lock time-out is caught, SET LOCK_TIMEOUT reverts); B3, B18; contract: \
               Procedures (Acquire: inside your transaction it is error 50129)",
    expected: "S2's call fails after about 5 s with 50129, its transaction rolled back (@@TRANCOUNT 0), and \
               @@LOCK_TIMEOUT back to -1 after the call",
    run: |ctx| Box::pin(wait_in_caller_transaction(ctx)),
};

async fn wait_in_caller_transaction(ctx: &Context) -> Result<Verdict> {
    let a = ctx.client().await?;
    let key = ctx.key(&a, "row-lock-in-transaction").await?;
    let lease = acquired(a.acquire(&key, LONG).await?)?;
    let mut holder = ctx.session().await?;
    let mut waiter = ctx.session().await?;
    let held = holder.hold(&lease).await?;
    waiter.batch("BEGIN TRANSACTION;").await?;
    let owner = Uuid::new_v4();
    let (answer, let_go, waited) = acquire_let_go_by_rollback(&mut waiter, &mut holder, &key, owner).await?;
    let trancount = waiter.int("SELECT @@TRANCOUNT").await?;
    let lock_timeout = waiter.int("SELECT CAST(@@LOCK_TIMEOUT AS int)").await?;
    waiter.rollback().await;
    holder.rollback().await;
    let _ = a.release(&lease).await;
    let (refused, expected) = if ctx.engine.babelfish {
        (
            matches!(&answer, Answer::Error { message, .. } if message.contains("lock timeout")),
            "Babelfish: S2's call fails after about 5 s with the engine's lock-timeout error (no procedure can \
             catch it there), its transaction rolled back (@@TRANCOUNT 0), @@LOCK_TIMEOUT back to -1",
        )
    } else {
        (
            matches!(&answer, Answer::Error { number: 50129, .. }),
            "S2's call fails after about 5 s with 50129, its transaction rolled back (@@TRANCOUNT 0), and \
             @@LOCK_TIMEOUT back to -1 after the call",
        )
    };
    Ok(Verdict::judge(
        held == "Holding"
            && refused
            && (EARLIEST..=LATEST).contains(&waited)
            && trancount == Some(0)
            && lock_timeout == Some(-1),
        format!(
            "S1 AssertHolder {held}; S2 answered {} after {:.1} s{}; @@TRANCOUNT {}; @@LOCK_TIMEOUT {}",
            answer.outcome(),
            waited.as_secs_f64(),
            if let_go { LET_GO } else { "" },
            show(trancount),
            show(lock_timeout)
        ),
    )
    .expecting(expected))
}

fn show(value: Option<i32>) -> String {
    value.map_or("NULL".to_string(), |v| v.to_string())
}

/// A raw Acquire of `key` for `owner` on `waiter`, with how long it waited
/// and whether it was still waiting at `LATEST`, when `holder`'s rollback
/// let it go so that the check ends in time and says so. Raw, not the
/// client's: the client answers Busy for the lock time-out errors too, and
/// these checks must tell the procedure's own Busy row from an error.
async fn acquire_let_go_by_rollback(
    waiter: &mut Session,
    holder: &mut Session,
    key: &str,
    owner: Uuid,
) -> Result<(Answer, bool, Duration)> {
    let args: [&dyn tiberius::ToSql; 3] = [&key, &owner, &30i32];
    let started = Instant::now();
    let call = waiter.call(ACQUIRE, &args);
    tokio::pin!(call);
    let (answer, let_go) = tokio::select! {
        answer = &mut call => (answer?, false),
        () = tokio::time::sleep(LATEST) => {
            holder.rollback().await;
            (call.await?, true)
        }
    };
    Ok((answer, let_go, started.elapsed()))
}
