//! A force-release watched from a second session. Behind a holder whose
//! transaction stays open (a frozen process, a client that never commits)
//! ForceRelease waits at most its bound and fails; the watcher names the
//! session that blocks it, and can end that session and fence the key.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::Admin;
use super::force_release::{ForceRelease, force_release};
use crate::client::call::{Reply, checkout, classify_statement};
use crate::client::contract::Procedure;
use crate::client::pool::Session;
use crate::client::span::About;
use crate::client::{Client, Error, input};

/// How often the watcher looks for the session blocking the call.
const WATCH: Duration = Duration::from_millis(400);

/// What errors of the sessions' own queries name as their procedure.
const WHAT: &str = "the session query of force_release_watched";

const SPID: &str = "SELECT CAST(@@SPID AS int)";
const BABELFISH: &str = "SELECT CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL THEN 0 ELSE 1 END AS int)";

/// What [`Admin::force_release_watched`] does when another session's open
/// transaction holds the fence row past the procedure's bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WhenBlocked {
    /// Fail with [`Error::Blocked`], naming the session.
    #[default]
    Fail,
    /// End that session (`KILL`, which rolls its transaction back, so
    /// nothing it wrote commits) and force-release again. Needs ALTER ANY
    /// CONNECTION on SQL Server, KILL DATABASE CONNECTION on Azure SQL
    /// Database.
    Kill,
}

/// What a watched force-release did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForceReleased {
    /// What `ForceRelease` answered.
    pub outcome: ForceRelease,
    /// The session ended first because its open transaction held the fence
    /// row ([`WhenBlocked::Kill`]).
    pub killed_session: Option<i32>,
}

impl Admin {
    /// [`force_release`](Admin::force_release), watched from a second
    /// session. If the call fails while another session's open transaction
    /// holds the fence row, the answer is [`Error::Blocked`] naming that
    /// session (the head of the chain, when other callers queue for the row
    /// too), or with [`WhenBlocked::Kill`] the session is ended and the key
    /// fenced; if the row is held again when the call is made once more,
    /// the answer is [`Error::BlockedAfterKill`], and no second session is
    /// ended. Seeing other sessions needs VIEW SERVER STATE on SQL
    /// Server (VIEW DATABASE STATE on Azure SQL Database); without it a
    /// blocked call fails with the procedure's own error. A call whose reply
    /// is lost is replayed with the command's operation id, as
    /// [`force_release`](Admin::force_release)'s is.
    pub async fn force_release_watched(&self, key: &str, when_blocked: WhenBlocked) -> Result<ForceReleased, Error> {
        self.force_release_watched_as(key, when_blocked, Uuid::new_v4()).await
    }

    /// [`force_release_watched`](Admin::force_release_watched) as the
    /// command `operation_id`, as [`force_release_as`](Admin::force_release_as).
    pub async fn force_release_watched_as(
        &self,
        key: &str,
        when_blocked: WhenBlocked,
        operation_id: Uuid,
    ) -> Result<ForceReleased, Error> {
        let key = input::key(key)?;
        let operation_id = input::operation_id(operation_id)?;
        let client = &self.client;
        // Outside the pool: the call holds the pool's connection meanwhile.
        let mut watcher = client.pool.dedicated_connection().await?;
        let mut session = checkout(&client.pool, &client.last_connect_error, &client.config).await?;
        let spid = single_int(&mut session, SPID, client).await?;
        let babelfish = single_int(&mut watcher, BABELFISH, client).await? == 1;
        let sent = Instant::now();
        let blocker = match watched_call(client, &mut session, &mut watcher, key, operation_id, spid, babelfish).await {
            Ok(reply) => {
                return Ok(ForceReleased {
                    outcome: force_release(&reply)?,
                    killed_session: None,
                });
            }
            Err((error, None)) => {
                return Ok(ForceReleased {
                    outcome: self.force_release_settled(key, operation_id, sent, Err(error)).await?,
                    killed_session: None,
                });
            }
            Err((error, Some(blocker))) if when_blocked == WhenBlocked::Fail => {
                return Err(Error::Blocked {
                    procedure: Procedure::ForceRelease.name(),
                    session: blocker,
                    cause: Box::new(error),
                });
            }
            Err((_, Some(blocker))) => blocker,
        };
        kill(&mut watcher, blocker).await?;
        // The killed session's rollback may take a moment; the call waits
        // for it within its own bound, watched as the first was: another
        // session may take the row meanwhile, and that one is named, never
        // ended as well.
        let sent = Instant::now();
        let outcome = match watched_call(client, &mut session, &mut watcher, key, operation_id, spid, babelfish).await {
            Ok(reply) => force_release(&reply)?,
            Err((error, None)) => self.force_release_settled(key, operation_id, sent, Err(error)).await?,
            Err((error, Some(holder))) => {
                return Err(Error::BlockedAfterKill {
                    procedure: Procedure::ForceRelease.name(),
                    killed: blocker,
                    session: holder,
                    cause: Box::new(error),
                });
            }
        };
        Ok(ForceReleased {
            outcome,
            killed_session: Some(blocker),
        })
    }
}

/// Runs ForceRelease on `session` while `watcher` looks for the session that
/// blocks it; on failure, the error and the last blocker seen.
async fn watched_call(
    client: &Client,
    session: &mut Session,
    watcher: &mut Session,
    key: &str,
    operation_id: Uuid,
    spid: i32,
    babelfish: bool,
) -> Result<Reply, (Error, Option<i32>)> {
    let mut blocker = None;
    let arguments: [&dyn tiberius::ToSql; 2] = [&key, &operation_id];
    let call = client.call_on(
        session,
        Procedure::ForceRelease,
        &arguments,
        About::key(key).operation(operation_id),
    );
    tokio::pin!(call);
    loop {
        tokio::select! {
            result = &mut call => {
                // Exactly one row: ForceRelease does not answer rows.
                return result.map(|mut replies| replies.swap_remove(0)).map_err(|error| (error, blocker));
            }
            () = tokio::time::sleep(WATCH) => {
                if let Some(seen) = head_blocker(watcher, spid, babelfish).await {
                    blocker = Some(seen);
                }
            }
        }
    }
}

/// Links of a blocking chain followed before the watcher settles for the
/// session it reached: a chain longer than this is a pile-up behind one
/// open transaction that the force-release's bound will have ended anyway.
const MAX_CHAIN: usize = 8;

/// The session at the head of the chain `spid` waits behind: the one that
/// blocks while itself waiting for nobody. Another caller queued for the
/// fence row ahead of `spid` also blocks it, but ending that caller would
/// free nothing; the session whose open transaction holds the row heads the
/// chain. `None` when `spid` is not blocked or this login may not see it.
async fn head_blocker(watcher: &mut Session, spid: i32, babelfish: bool) -> Option<i32> {
    let mut chain = vec![spid];
    let mut head = blocking_session(watcher, spid, babelfish).await?;
    while chain.len() <= MAX_CHAIN && !chain.contains(&head) {
        chain.push(head);
        match blocking_session(watcher, head, babelfish).await {
            Some(next) => head = next,
            None => break,
        }
    }
    Some(head)
}

/// A session `spid` waits for, if this login may see it. SQL Server and
/// Azure SQL show it in sys.dm_exec_requests. Babelfish's
/// sys.dm_exec_requests has no blocking column, and the `blocked` column of
/// its sys.sysprocesses names any session holding any lock on an object
/// `spid` has locked, granted or not, conflicting or not: a session that
/// merely read the fence table in an open transaction. PostgreSQL's own
/// pg_blocking_pids names only the sessions whose locks conflict with the
/// one `spid` waits for, or that queue for it ahead of `spid`.
async fn blocking_session(watcher: &mut Session, spid: i32, babelfish: bool) -> Option<i32> {
    let sql = if babelfish {
        "SELECT TOP (1) CAST(b.pid AS int) \
         FROM pg_catalog.unnest(pg_catalog.pg_blocking_pids(@P1)) AS b (pid) \
         WHERE b.pid <> @@SPID"
    } else {
        "SELECT TOP (1) CAST(blocking_session_id AS int) FROM sys.dm_exec_requests \
         WHERE session_id = @P1 AND blocking_session_id <> 0"
    };
    let row = watcher
        .connection
        .query(sql, &[&spid])
        .await
        .ok()?
        .into_row()
        .await
        .ok()??;
    row.get::<i32, _>(0)
}

/// Ends `session`, which rolls its open transaction back.
async fn kill(watcher: &mut Session, session: i32) -> Result<(), Error> {
    let failed = |error: tiberius::error::Error| Error::KillFailed {
        session,
        reason: error.to_string(),
    };
    watcher
        .connection
        .simple_query(format!("KILL {session};"))
        .await
        .map_err(failed)?
        .into_results()
        .await
        .map_err(failed)?;
    Ok(())
}

/// The one int `sql` answers on `session`, within the client's call timeout.
async fn single_int(session: &mut Session, sql: &'static str, client: &Client) -> Result<i32, Error> {
    let timeout = client.config.call_timeout;
    // Left set if the read is abandoned: the pool then drops the connection.
    session.in_call = true;
    let connection = &mut session.connection;
    let read = async { connection.simple_query(sql).await?.into_row().await };
    let row = tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| Error::timed_out(WHAT, timeout))?
        .map_err(|error| classify_statement(WHAT, error))?;
    session.in_call = false;
    row.and_then(|row| row.get::<i32, _>(0))
        .ok_or_else(|| Error::UnexpectedReply {
            procedure: WHAT,
            detail: format!("{sql}: no value"),
        })
}
