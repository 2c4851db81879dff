//! PruneTenure below lock escalation: its batches of 4,000 each commit by
//! themselves, so no statement or transaction of it holds the 5,000 locks on
//! `fence.Tenure` at which SQL Server escalates to a table lock, which
//! would stop every call that writes a tenure.
//!
//! The prune is stopped part-way, not watched: S1 holds the newest of
//! 9,000 old tenures (deleted in its open transaction), the prune is seen
//! waiting behind S1, and what it holds and what it committed are read
//! while it waits. The tenures end one second apart, oldest first, so the
//! batches reach S1's row last.

use anyhow::Result;
use tiberius::ToSql;

use super::LATEST;
use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::Context;
use crate::selftest::session::{Answer, Session};
use crate::selftest::waiting::{NOT_VISIBLE, Queued, Sent, holder_watched};

const PRUNE: &str = "EXEC fence_admin.PruneTenure @OlderThanDays = @P1";

/// Old tenures: two batches and a part.
const OLD: i64 = 9_000;
/// The procedure's batch.
const BATCH: i64 = 4_000;
/// Where SQL Server escalates: "at least 5,000 locks on a single
/// nonpartitioned table or index" (Transaction locking and row versioning guide).
const ESCALATION: i64 = 5_000;

pub(crate) const CHECK: Check = Check {
    name: "prune_below_lock_escalation",
    behaviour: "9,000 tenures ended 400 days ago; S1 deletes the newest in its open transaction; PruneTenure \
                30 is seen waiting behind S1, and what it holds and has committed is read while it waits",
    document: "engines.md row 6; B12; contract: PruneTenure",
    expected: "while it waits, its open batch holds fewer than 5,000 locks on any index of fence.Tenure and \
               only an intent lock on the table (with READ_COMMITTED_SNAPSHOT on, also 8,000 of the tenures \
               gone: two batches committed); after S1 rolls back it answers Pruned, Deleted 9,000",
    run: |ctx| Box::pin(run(ctx)),
};

/// The prune's locks on fence.Tenure: the most on one index (rows, pages or
/// keys), and its table locks' modes.
const LOCKS: &str = "SELECT CAST(ISNULL(MAX(n), 0) AS bigint) AS MostOnAnIndex, \
       (SELECT STRING_AGG(CAST(l.request_mode AS nvarchar(max)), N',') FROM sys.dm_tran_locks AS l \
         WHERE l.request_session_id = @P1 AND l.resource_database_id = DB_ID() AND l.resource_type = N'OBJECT' \
           AND l.resource_associated_entity_id = OBJECT_ID(N'fence.Tenure')) AS TableModes \
  FROM (SELECT COUNT_BIG(*) AS n FROM sys.dm_tran_locks AS l \
          JOIN sys.partitions AS p ON p.hobt_id = l.resource_associated_entity_id \
         WHERE l.request_session_id = @P1 AND l.resource_database_id = DB_ID() \
           AND l.resource_type IN (N'KEY', N'PAGE', N'RID') AND p.object_id = OBJECT_ID(N'fence.Tenure') \
         GROUP BY l.resource_associated_entity_id) AS per_index;";

/// Under optimized locking a row lock is let go as soon as the row is
/// written; what the prune's open batch holds is its transaction's lock
/// (XACT, the TID every row it wrote is stamped with) and intent locks
/// above the rows.
const XACT_LOCKS: &str = "SELECT CAST(COUNT_BIG(*) AS bigint) FROM sys.dm_tran_locks \
         WHERE request_session_id = @P1 AND resource_type = N'XACT' AND request_status = N'GRANT';";

/// Why the check cannot judge an engine with optimized locking on and
/// READ_COMMITTED_SNAPSHOT off: a batch holds no row locks to count, and what
/// the batches committed cannot be read without waiting for the prune.
const UNPROVEN: &str = "with optimized locking on and READ_COMMITTED_SNAPSHOT off, a prune's open batch holds no row \
                        locks to count and its committed batches cannot be read without waiting for it: whether \
                        it deletes in batches below lock escalation cannot be shown on this engine";

async fn run(ctx: &Context) -> Result<Verdict> {
    let babelfish = ctx.engine.babelfish;
    if !babelfish && ctx.engine.optimized_locking == Some(true) && ctx.engine.read_committed_snapshot != Some(true) {
        return Ok(Verdict::skipped(UNPROVEN));
    }
    let Some((mut holder, holder_spid, mut watcher)) = holder_watched(ctx).await? else {
        return Ok(Verdict::skipped(NOT_VISIBLE));
    };
    let key = ctx.keys.key("prune");
    let mut reader = ctx.session().await?;
    old_tenures(&mut reader, &key).await?;
    holder.batch("BEGIN TRANSACTION;").await?;
    holder
        .connection()
        .execute(
            "DELETE FROM fence.Tenure WHERE ResourceKey = @P1 AND Generation = @P2;",
            &[&key.as_str(), &OLD],
        )
        .await?;
    let prune = Sent::send(ctx.session().await?, PRUNE, vec![Box::new(30i32)]).await?;
    let queued = watcher.queue(&prune, holder_spid).await?;
    let mut seen = vec![format!("PruneTenure {}", queued.word())];
    let mut held = queued == Queued::Waiting;
    if queued == Queued::Waiting {
        // What committed, read from row versions, which wait for nobody:
        // PostgreSQL's always, SQL Server's with READ_COMMITTED_SNAPSHOT on.
        // With it off the read would wait for the prune's own locks.
        if babelfish || ctx.engine.read_committed_snapshot == Some(true) {
            let committed = OLD - count(&mut reader, &key).await?;
            seen.push(format!("{committed} of the {OLD} gone (committed) while it waited"));
            held &= committed == (OLD - 1) / BATCH * BATCH;
        }
        let optimized = ctx.engine.optimized_locking == Some(true);
        if !babelfish {
            let row = reader
                .connection()
                .query(LOCKS, &[&prune.spid])
                .await?
                .into_row()
                .await?;
            let most = row.as_ref().and_then(|r| r.get::<i64, _>("MostOnAnIndex")).unwrap_or(0);
            let modes = row
                .as_ref()
                .and_then(|r| r.get::<&str, _>("TableModes"))
                .unwrap_or("none")
                .to_string();
            let intent_only = modes.split(',').all(|m| m.starts_with('I') || m == "none");
            if optimized {
                // Optimized locking: rows are not held, so there is nothing
                // to escalate; the open batch must hold its transaction's
                // lock and nothing on the whole table but intent.
                let xact = reader
                    .connection()
                    .query(XACT_LOCKS, &[&prune.spid])
                    .await?
                    .into_row()
                    .await?
                    .and_then(|r| r.get::<i64, _>(0))
                    .unwrap_or(0);
                seen.push(format!(
                    "optimized locking: its open batch holds {most} row, page or key locks on one index of \
                     fence.Tenure, {xact} transaction (XACT) lock(s), table locks {modes}"
                ));
                held &= most < ESCALATION && xact > 0 && intent_only;
            } else {
                seen.push(format!(
                    "its open batch holds {most} locks on one index of fence.Tenure, table locks {modes}"
                ));
                held &= most > 0 && most < ESCALATION && intent_only;
            }
        }
    }
    holder.rollback().await;
    let answer = match tokio::time::timeout(LATEST, prune.answer()).await {
        Ok(answer) => answer?.1,
        Err(_) => {
            seen.push(format!("no answer {} s after S1 rolled back", LATEST.as_secs()));
            return Ok(Verdict::judge(false, seen.join("; ")));
        }
    };
    // The column is an int.
    let deleted = match &answer {
        Answer::Row(row) => row.try_get::<i32, _>("Deleted").ok().flatten().map(i64::from),
        Answer::Error { .. } => None,
    };
    seen.push(format!(
        "after S1 rolled back it answered {}, Deleted {}",
        answer.outcome(),
        deleted.map_or("NULL".to_string(), |d| d.to_string())
    ));
    held &= answer.outcome() == "Pruned" && deleted == Some(OLD);
    let verdict = Verdict::judge(held, seen.join("; "));
    Ok(if !babelfish && ctx.engine.optimized_locking == Some(true) {
        verdict.expecting(
            "optimized locking (always on in Azure SQL Database): a row lock is let go as soon as its row is \
             written, so there is nothing to escalate; while it waits, its open batch holds its transaction's \
             lock (XACT) and only intent locks on fence.Tenure, fewer than 5,000 row locks on any index (with \
             READ_COMMITTED_SNAPSHOT on, also 8,000 of the tenures gone: two batches committed); after S1 rolls \
             back it answers Pruned, Deleted 9,000",
        )
    } else if babelfish {
        verdict.expecting(
            "Babelfish: PostgreSQL never escalates row locks, so the batches are shown by what committed: \
             8,000 of the tenures gone (two batches of 4,000) while the third waits for S1's row; after S1 rolls \
             back Pruned, Deleted 9,000",
        )
    } else {
        verdict
    })
}

/// 9,000 tenures of `key`, ended 400 days ago, one second apart, oldest first.
async fn old_tenures(session: &mut Session, key: &str) -> Result<()> {
    let args: [&dyn ToSql; 2] = [&key, &OLD];
    session
        .connection()
        .execute(
            "WITH n AS (SELECT TOP (@P2) ROW_NUMBER() OVER (ORDER BY a.object_id) AS i \
                          FROM sys.all_objects AS a CROSS JOIN sys.all_objects AS b) \
             INSERT INTO fence.Tenure (ResourceKey, Generation, OwnerHash, AcquiredAtUtc, EndedAtUtc, Ending, Published) \
             SELECT @P1, i, 0x00, NULL, DATEADD(SECOND, CAST(i AS int), DATEADD(DAY, -400, SYSUTCDATETIME())), \
                    N'Released', 0 \
               FROM n ORDER BY i;",
            &args,
        )
        .await?;
    Ok(())
}

async fn count(session: &mut Session, key: &str) -> Result<i64> {
    let row = session
        .connection()
        .query(
            "SELECT CAST(COUNT(*) AS bigint) FROM fence.Tenure WHERE ResourceKey = @P1;",
            &[&key],
        )
        .await?
        .into_row()
        .await?;
    Ok(row.and_then(|r| r.get::<i64, _>(0)).unwrap_or(0))
}
