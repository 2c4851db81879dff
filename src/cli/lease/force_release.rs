//! `lease force-release`: fence out a stuck holder. Behind a holder whose
//! transaction stays open (a frozen process, a client that never commits)
//! ForceRelease waits at most its bound and fails; this command watches the
//! call from a second session, names the session that blocks it, and with
//! `--kill-blocker` ends that session and fences the key.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use fencepost::Connection;
use serde_json::json;

use super::{call, get, outcome};
use crate::cli::opt::{Format, LeaseForceReleaseArgs};
use crate::cli::{EXIT_ATTENTION, EXIT_OK, connect};

const FORCE_RELEASE: &str = "EXEC fence_admin.ForceRelease @ResourceKey = @P1";

/// How often the watcher looks for the session blocking the call.
const WATCH: Duration = Duration::from_millis(400);

pub(super) async fn force_release(args: LeaseForceReleaseArgs) -> Result<u8> {
    let (target, mut conn) = connect(&args.connect).await?;
    let mut watcher = target
        .connect()
        .await
        .context("opening a second session to watch the call")?;
    let spid = single_int(&mut conn, "SELECT CAST(@@SPID AS int)").await?;
    let babelfish = single_int(
        &mut watcher,
        "SELECT CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL THEN 0 ELSE 1 END AS int)",
    )
    .await?
        == 1;

    let mut killed = None;
    let rows = match watched_call(&mut conn, &mut watcher, &args.key, spid, babelfish).await {
        Ok(rows) => rows,
        Err((error, None)) => {
            return Err(error.context(
                "the blocking session, if any, could not be seen (seeing other sessions needs VIEW SERVER \
                 STATE on SQL Server, VIEW DATABASE STATE on Azure SQL Database)",
            ));
        }
        Err((error, Some(blocker))) if !args.kill_blocker => {
            bail!(
                "{}: the fence row is held by session {blocker}, whose transaction is still open; ForceRelease \
                 gave up waiting for it ({error:#}). End that session to roll its transaction back (KILL \
                 {blocker}, or rerun with --kill-blocker), then force-release again",
                args.key
            );
        }
        Err((_, Some(blocker))) => {
            watcher
                .simple_query(format!("KILL {blocker};"))
                .await
                .with_context(|| {
                    format!(
                        "KILL {blocker} (needs ALTER ANY CONNECTION, or KILL DATABASE CONNECTION on Azure SQL Database)"
                    )
                })?;
            killed = Some(blocker);
            // The killed session's rollback may take a moment; the call waits
            // for it within its own bound.
            call(&mut conn, FORCE_RELEASE, &[&args.key.as_str()]).await?
        }
    };
    let row = rows.first().context("fence_admin.ForceRelease answered no row")?;
    let fenced = outcome(row) == "Fenced";
    let generation: Option<i64> = get(row, "Generation");
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "key": args.key,
                "outcome": outcome(row),
                "generation": generation,
                "killed_session": killed,
            }))?
        ),
        Format::Text => {
            if let Some(session) = killed {
                println!(
                    "{}: ended session {session}, which held the fence row in an open transaction (rolled back)",
                    args.key
                );
            }
            if fenced {
                println!(
                    "{}: fenced; generation is now {}: the holder's next renew, publish or fenced transaction is \
                     refused, and the next acquirer gets the lease at once",
                    args.key,
                    generation.unwrap_or_default()
                );
            } else {
                println!("{}: no fence row, nothing to release", args.key);
            }
        }
    }
    Ok(if fenced { EXIT_OK } else { EXIT_ATTENTION })
}

/// Runs ForceRelease on `conn` while `watcher` looks for the session that
/// blocks it; on failure, the error and the last blocker seen.
async fn watched_call(
    conn: &mut Connection,
    watcher: &mut Connection,
    key: &str,
    spid: i32,
    babelfish: bool,
) -> Result<Vec<tiberius::Row>, (anyhow::Error, Option<i32>)> {
    let mut blocker = None;
    let params: [&dyn tiberius::ToSql; 1] = [&key];
    let call = call(conn, FORCE_RELEASE, &params);
    tokio::pin!(call);
    loop {
        tokio::select! {
            result = &mut call => return result.map_err(|error| (error, blocker)),
            () = tokio::time::sleep(WATCH) => {
                if let Some(seen) = blocking_session(watcher, spid, babelfish).await {
                    blocker = Some(seen);
                }
            }
        }
    }
}

/// The session `spid` waits for, if this login may see it. SQL Server and
/// Azure SQL show it in sys.dm_exec_requests; Babelfish has no such view, but
/// its sys.sysprocesses fills `blocked`.
async fn blocking_session(watcher: &mut Connection, spid: i32, babelfish: bool) -> Option<i32> {
    let sql = if babelfish {
        "SELECT TOP (1) CAST(blocked AS int) FROM sys.sysprocesses \
         WHERE spid = @P1 AND blocked <> 0 AND blocked <> @@SPID AND blocked <> @P1"
    } else {
        "SELECT TOP (1) CAST(blocking_session_id AS int) FROM sys.dm_exec_requests \
         WHERE session_id = @P1 AND blocking_session_id <> 0"
    };
    let row = watcher.query(sql, &[&spid]).await.ok()?.into_row().await.ok()??;
    row.get::<i32, _>(0)
}

async fn single_int(conn: &mut Connection, sql: &str) -> Result<i32> {
    let row = conn
        .simple_query(sql)
        .await
        .with_context(|| sql.to_string())?
        .into_row()
        .await
        .with_context(|| sql.to_string())?
        .with_context(|| format!("{sql}: no row"))?;
    row.get::<i32, _>(0).with_context(|| format!("{sql}: NULL"))
}
