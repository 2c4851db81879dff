//! The fence called from the transactions services' stacks open:
//! implicit-transaction mode, SNAPSHOT, and a savepoint rolled back.

use std::time::{Duration, Instant};

use anyhow::Result;
use uuid::Uuid;

use crate::client::Acquire;
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::{Context, LONG, SHORT, acquire_name, acquired, state};
use crate::selftest::session::{ACQUIRE, ASSERT_HOLDER, Answer, INSPECT};

pub(crate) const IMPLICIT_TRANSACTIONS: Check = Check {
    name: "implicit_transactions_caller",
    behaviour: "with SET IMPLICIT_TRANSACTIONS ON, Acquire then AssertHolder, then ROLLBACK",
    document: "engines.md row 4; B11; contract: Inside your own transaction (Implicit-transaction mode)",
    expected: "Acquire leaves @@TRANCOUNT 1; AssertHolder answers Holding; the rollback undoes the acquisition \
               (the row's generation and holder as before)",
    run: |ctx| Box::pin(implicit_transactions(ctx)),
};

async fn implicit_transactions(ctx: &Context) -> Result<Verdict> {
    let a = ctx.client().await?;
    let key = ctx.key(&a, "implicit").await?;
    let before = state(&a, &key).await?;
    let mut caller = ctx.session().await?;
    caller.batch("SET IMPLICIT_TRANSACTIONS ON;").await?;
    let owner = Uuid::new_v4();
    let acquire = caller.call(ACQUIRE, &[&key.as_str(), &owner, &30i32]).await?;
    let trancount = caller.int("SELECT @@TRANCOUNT").await?;
    let holding = match acquire.big("Generation") {
        Some(generation) => caller
            .call(ASSERT_HOLDER, &[&key.as_str(), &owner, &generation])
            .await?
            .outcome(),
        None => "not called".to_string(),
    };
    caller.rollback().await;
    caller.batch("SET IMPLICIT_TRANSACTIONS OFF;").await?;
    let after = state(&a, &key).await?;
    let undone = after.generation == before.generation && !after.is_held;
    Ok(Verdict::judge(
        acquire.outcome() == "Acquired" && trancount == Some(1) && holding == "Holding" && undone,
        format!(
            "Acquire {}; @@TRANCOUNT {}; AssertHolder {holding}; after the rollback generation {} → {} held {}",
            acquire.outcome(),
            trancount.map_or("NULL".to_string(), |t| t.to_string()),
            before.generation,
            after.generation,
            after.is_held
        ),
    ))
}

pub(crate) const SNAPSHOT: Check = Check {
    name: "snapshot_caller",
    behaviour: "a SNAPSHOT transaction whose first statement is AssertHolder, while another session publishes on \
                another key, then AssertHolder and Inspect again and COMMIT",
    document: "engines.md row 3; B8; contract: Inside your own transaction (SNAPSHOT)",
    expected: "every call answers (Holding, Holding, Found) and the commit succeeds: no 3951, no 3960",
    run: |ctx| Box::pin(snapshot(ctx)),
};

async fn snapshot(ctx: &Context) -> Result<Verdict> {
    if ctx.engine.allow_snapshot_isolation != Some(true) {
        return Ok(Verdict::skipped(
            "ALLOW_SNAPSHOT_ISOLATION is OFF in this database, so no caller can open a SNAPSHOT transaction; the \
             selftest does not change database settings",
        ));
    }
    let [a, b]: [_; 2] = ctx.clients(2).await?.try_into().expect("two clients");
    let key = ctx.key(&a, "snapshot").await?;
    let other_key = ctx.key(&b, "snapshot-other").await?;
    let lease = acquired(a.acquire(&key, LONG).await?)?;
    let other = acquired(b.acquire(&other_key, LONG).await?)?;
    let mut caller = ctx.session().await?;
    let holder = [
        &key.as_str() as &dyn tiberius::ToSql,
        &lease.owner(),
        &lease.generation(),
    ];
    let mut seen = Vec::new();
    let mut committed = false;
    if let Err(e) = caller
        .batch("SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRANSACTION;")
        .await
    {
        seen.push(format!("BEGIN refused: {e}"));
    } else {
        seen.push(caller.call(ASSERT_HOLDER, &holder).await?.outcome());
        let published = b
            .publish(&other, Uuid::new_v4(), &ctx.keys.payload("beside a snapshot"))
            .await?;
        seen.push(caller.call(ASSERT_HOLDER, &holder).await?.outcome());
        seen.push(caller.call(INSPECT, &[&key.as_str()]).await?.outcome());
        match caller.batch("COMMIT TRANSACTION;").await {
            Ok(()) => committed = true,
            Err(e) => seen.push(format!("COMMIT failed: {e}")),
        }
        seen.push(format!("other session's publish {published:?}"));
    }
    caller.rollback().await;
    let _ = caller.batch("SET TRANSACTION ISOLATION LEVEL READ COMMITTED;").await;
    let _ = a.release(&lease).await;
    let _ = b.release(&other).await;
    let held = committed && seen.get(..3).is_some_and(|s| s == ["Holding", "Holding", "Found"]);
    let verdict = Verdict::judge(held, seen.join("; "));
    Ok(if ctx.engine.babelfish {
        verdict.expecting(
            "Babelfish runs SNAPSHOT as PostgreSQL REPEATABLE READ and its procedures never change the level: \
             every call answers (Holding, Holding, Found) and the commit succeeds. The 3951 this check guards \
             against on SQL Server cannot arise there",
        )
    } else {
        verdict
    })
}

pub(crate) const SAVEPOINT: Check = Check {
    name: "savepoint_rollback_rule",
    behaviour: "S1: BEGIN; SAVE TRANSACTION; AssertHolder; ROLLBACK to the savepoint; the lease expires; S2 \
                acquires; S1 asserts again before its COMMIT",
    document: "contract: Fencing your own tables (a rollback to a savepoint releases the lock; AssertHolder as \
               the last statement before COMMIT); B10",
    expected: "@@TRANCOUNT stays 1 after the savepoint rollback; S2 Acquired without waiting for S1 (the lock \
               went with the savepoint); S1's closing AssertHolder refused with 50110 and its transaction rolled \
               back",
    run: |ctx| Box::pin(savepoint(ctx)),
};

async fn savepoint(ctx: &Context) -> Result<Verdict> {
    let [a, b]: [_; 2] = ctx.clients(2).await?.try_into().expect("two clients");
    let key = ctx.key(&a, "savepoint").await?;
    let lease = acquired(a.acquire(&key, SHORT).await?)?;
    let holder = [
        &key.as_str() as &dyn tiberius::ToSql,
        &lease.owner(),
        &lease.generation(),
    ];
    let mut caller = ctx.session().await?;
    caller
        .batch("BEGIN TRANSACTION; SAVE TRANSACTION fencepost_selftest;")
        .await?;
    let first = caller.call(ASSERT_HOLDER, &holder).await?.outcome();
    caller.batch("ROLLBACK TRANSACTION fencepost_selftest;").await?;
    let open = caller.int("SELECT @@TRANCOUNT").await?;
    caller.wait_past(lease.until()).await?;
    let started = Instant::now();
    let successor = b.acquire(&key, LONG).await?;
    let waited = started.elapsed();
    let closing = caller.call(ASSERT_HOLDER, &holder).await?;
    let after = caller.int("SELECT @@TRANCOUNT").await?;
    caller.rollback().await;
    if let Acquire::Acquired(next) = &successor {
        let _ = b.release(next).await;
    }
    let held = first == "Holding"
        && open == Some(1)
        && matches!(successor, Acquire::Acquired(_))
        && waited < Duration::from_secs(4)
        && matches!(closing, Answer::Error { number: 50110, .. })
        && after == Some(0);
    Ok(Verdict::judge(
        held,
        format!(
            "AssertHolder {first}; @@TRANCOUNT after the savepoint rollback {}; S2 {} after {:.1} s; closing \
             AssertHolder {}; @@TRANCOUNT {}",
            open.map_or("NULL".to_string(), |t| t.to_string()),
            acquire_name(&successor),
            waited.as_secs_f64(),
            closing.outcome(),
            after.map_or("NULL".to_string(), |t| t.to_string())
        ),
    ))
}
