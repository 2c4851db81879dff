//! Operator calls watched from a second session. Behind a holder whose
//! transaction stays open (a frozen process, a client that never commits)
//! ForceRelease and Recover wait at most their bound and fail; the watcher
//! names the session that blocks them, and for a force-release can end that
//! session and fence the key.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::Admin;
use super::blockers::blockers_of;
use super::force_release::{ForceRelease, force_release};
use super::recover::{Recover, Recovery, recover};
use crate::client::call::{Reply, checkout, classify_statement};
use crate::client::contract::Procedure;
use crate::client::pool::{Manager, Session};
use crate::client::span::About;
use crate::client::{Client, Error, input};

/// How often the watcher looks for the session blocking the call.
const WATCH: Duration = Duration::from_millis(400);

/// The most one look at the blocking sessions, or a kill, may take.
const LOOK: Duration = Duration::from_secs(5);

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
        // A fake's calls never wait on another session: nothing to watch.
        #[cfg(feature = "fake")]
        if client.as_fake().is_some() {
            return Ok(ForceReleased {
                outcome: self.force_release_as(key, operation_id).await?,
                killed_session: None,
            });
        }
        let (mut session, mut watcher, spid, babelfish) = sessions(client).await?;
        let arguments: [&dyn tiberius::ToSql; 2] = [&key, &operation_id];
        let call = Watched {
            procedure: Procedure::ForceRelease,
            arguments: &arguments,
            about: About::key(key).operation(operation_id),
            spid,
            babelfish,
        };
        let sent = Instant::now();
        let blocker = match call.run(client, &mut session, &mut watcher).await {
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
                    session: blocker.spid,
                    cause: Box::new(error),
                });
            }
            Err((_, Some(blocker))) => blocker,
        };
        kill(&mut watcher, &blocker, babelfish).await?;
        // The killed session's rollback may take a moment; the call waits
        // for it within its own bound, watched as the first was: another
        // session may take the row meanwhile, and that one is named, never
        // ended as well.
        let sent = Instant::now();
        let outcome = match call.run(client, &mut session, &mut watcher).await {
            Ok(reply) => force_release(&reply)?,
            Err((error, None)) => self.force_release_settled(key, operation_id, sent, Err(error)).await?,
            Err((error, Some(holder))) => {
                return Err(Error::BlockedAfterKill {
                    procedure: Procedure::ForceRelease.name(),
                    killed: blocker.spid,
                    session: holder.spid,
                    cause: Box::new(error),
                });
            }
        };
        Ok(ForceReleased {
            outcome,
            killed_session: Some(blocker.spid),
        })
    }

    /// [`recover`](Admin::recover), watched from a second session. Behind a
    /// transaction that stays open on a fence row, Recover gives up after
    /// its bound (5 s) rather than hold up every key for as long as that
    /// transaction stays open; the answer is then [`Error::Blocked`] naming
    /// the session at the head of the wait. Nothing changed: end that
    /// session (or let it finish) and run the same recovery again. Seeing
    /// other sessions needs VIEW SERVER STATE on SQL Server (VIEW DATABASE
    /// STATE on Azure SQL Database); without it a blocked recovery fails
    /// with the procedure's own error.
    pub async fn recover_watched(&self, recovery: &Recovery) -> Result<Recover, Error> {
        let id = input::recovery_id(recovery.id())?;
        let floor = input::recovery_floor(recovery.floor_given())?;
        let identity = input::database_identity(recovery.database_identity_given())?;
        let client = &self.client;
        #[cfg(feature = "fake")]
        if client.as_fake().is_some() {
            return self.recover(recovery).await;
        }
        let (mut session, mut watcher, spid, babelfish) = sessions(client).await?;
        let arguments: [&dyn tiberius::ToSql; 3] = [&id, &floor, &identity];
        let call = Watched {
            procedure: Procedure::Recover,
            arguments: &arguments,
            about: About::default(),
            spid,
            babelfish,
        };
        match call.run(client, &mut session, &mut watcher).await {
            Ok(reply) => recover(&reply),
            Err((error, Some(blocker))) => Err(Error::Blocked {
                procedure: Procedure::Recover.name(),
                session: blocker.spid,
                cause: Box::new(error),
            }),
            Err((error, None)) => Err(error),
        }
    }
}

/// The session a watched call runs on, its watcher (outside the pool: the
/// call holds the pool's connection meanwhile), the call's session id, and
/// whether the engine is Babelfish.
async fn sessions(client: &Client) -> Result<(bb8::PooledConnection<'_, Manager>, Session, i32, bool), Error> {
    let mut watcher = client.pool.dedicated_connection().await?;
    let mut session = checkout(&client.pool, &client.last_connect_error, &client.config).await?;
    let spid = single_int(&mut session, SPID, client).await?;
    let babelfish = single_int(&mut watcher, BABELFISH, client).await? == 1;
    Ok((session, watcher, spid, babelfish))
}

/// One operator call to run while a second session watches what blocks it.
struct Watched<'a> {
    procedure: Procedure,
    arguments: &'a [&'a dyn tiberius::ToSql],
    about: About<'a>,
    /// The calling session's id.
    spid: i32,
    babelfish: bool,
}

impl Watched<'_> {
    /// Runs the call on `session` while `watcher` looks for the session that
    /// blocks it; on failure, the error and, when the call gave up waiting
    /// for a lock, the last session seen at the head of its wait, if it
    /// still holds the transaction it held then. One that finished it is
    /// not named: ending it would free nothing.
    async fn run(
        &self,
        client: &Client,
        session: &mut Session,
        watcher: &mut Session,
    ) -> Result<Reply, (Error, Option<Blocker>)> {
        let mut blocker: Option<Blocker> = None;
        let mut watching = true;
        let call = client.call_on(session, self.procedure, self.arguments, self.about);
        tokio::pin!(call);
        loop {
            tokio::select! {
                result = &mut call => {
                    // Exactly one row: these procedures do not answer rows.
                    let error = match result {
                        Ok(mut replies) => return Ok(replies.swap_remove(0)),
                        Err(error) => error,
                    };
                    if !error.gave_up_waiting_for_the_row() || !watching {
                        return Err((error, None));
                    }
                    // The last session seen heading the wait, if it still
                    // holds the transaction it held then: once the call has
                    // given up, nothing waits behind it to be seen any more.
                    let still = match blocker {
                        Some(seen) => {
                            let now = tokio::time::timeout(LOOK, open_transaction(watcher, seen.spid, self.babelfish));
                            match now.await {
                                Ok(Some(transaction)) if transaction == seen.transaction => Some(seen),
                                _ => None,
                            }
                        }
                        None => None,
                    };
                    return Err((error, still));
                }
                () = tokio::time::sleep(WATCH), if watching => {
                    // A look that takes too long leaves the watcher's
                    // connection mid-reply: no more looks, and nobody named.
                    match tokio::time::timeout(LOOK, head_blocker(watcher, self.spid, self.babelfish)).await {
                        Ok(Some(seen)) => blocker = Some(seen),
                        Ok(None) => {}
                        Err(_) => {
                            watching = false;
                            blocker = None;
                        }
                    }
                }
            }
        }
    }
}

/// A session seen blocking a watched call: its id, and the transaction it
/// had open (see [`open_transaction`]).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Blocker {
    spid: i32,
    transaction: String,
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
/// A chain that comes back to `spid` (SQL Server shows a session blocked by
/// itself in a parallel wait) names nobody.
async fn head_blocker(watcher: &mut Session, spid: i32, babelfish: bool) -> Option<Blocker> {
    let mut chain = vec![spid];
    let mut head = blocking_session(watcher, spid, babelfish).await?;
    loop {
        // A chain that comes back on itself has no head, and one longer than
        // this is a pile-up whose head is not worth guessing: ending the
        // session reached would end a caller that only waits.
        if chain.contains(&head) || chain.len() > MAX_CHAIN {
            return None;
        }
        chain.push(head);
        match blocking_session(watcher, head, babelfish).await {
            Some(next) => head = next,
            None => break,
        }
    }
    let transaction = open_transaction(watcher, head, babelfish).await?;
    Some(Blocker {
        spid: head,
        transaction,
    })
}

/// The transaction session `spid` has open, named by when the session
/// started and which transaction it is, so that neither a new session that
/// was given the id nor a later transaction of the same session is taken
/// for it; `None` when it has none, is gone, or this login may not see it.
async fn open_transaction(watcher: &mut Session, spid: i32, babelfish: bool) -> Option<String> {
    let sql = if babelfish {
        "SELECT CAST(a.backend_start AS nvarchar(60)) + N'/' + CAST(a.xact_start AS nvarchar(60)) \
         FROM pg_catalog.pg_stat_activity AS a WHERE a.pid = @P1 AND a.xact_start IS NOT NULL"
    } else {
        "SELECT TOP (1) CONVERT(nvarchar(60), s.login_time, 126) + N'/' + CAST(t.transaction_id AS nvarchar(30)) \
         FROM sys.dm_exec_sessions AS s JOIN sys.dm_tran_session_transactions AS t ON t.session_id = s.session_id \
         WHERE s.session_id = @P1 ORDER BY t.transaction_id"
    };
    let row = watcher
        .connection
        .query(sql, &[&spid])
        .await
        .ok()?
        .into_row()
        .await
        .ok()??;
    row.get::<&str, _>(0).map(str::to_string)
}

/// The first session `spid` waits for, if this login may see it (see
/// [`blockers_of`]).
async fn blocking_session(watcher: &mut Session, spid: i32, babelfish: bool) -> Option<i32> {
    blockers_of(&mut watcher.connection, spid, babelfish)
        .await
        .ok()?
        .into_iter()
        .next()
}

/// Ends `blocker`, which rolls its open transaction back, once it is seen
/// again to hold the same transaction open: a session that finished it
/// meanwhile (and perhaps began another), and a new one the server gave its
/// id to, are never ended. Each step is bounded: a watcher connection that
/// stopped answering fails the kill instead of holding the command.
async fn kill(watcher: &mut Session, blocker: &Blocker, babelfish: bool) -> Result<(), Error> {
    let session = blocker.spid;
    let failed = |reason: String| Error::KillFailed { session, reason };
    let mut attempt = 1;
    loop {
        let still = tokio::time::timeout(LOOK, open_transaction(watcher, session, babelfish))
            .await
            .map_err(|_| failed(format!("seeing it again took longer than {LOOK:?}")))?;
        if still.as_ref() != Some(&blocker.transaction) {
            return Err(failed(
                "it no longer holds the transaction that blocked the call (it finished, or its id now names another \
                 session), so it was not ended: force-release again"
                    .into(),
            ));
        }
        let statement = async {
            watcher
                .connection
                .simple_query(format!("KILL {session};"))
                .await?
                .into_results()
                .await
        };
        let error = match tokio::time::timeout(LOOK, statement)
            .await
            .map_err(|_| failed(format!("KILL took longer than {LOOK:?}")))?
        {
            Ok(_) => return Ok(()),
            Err(error) => error,
        };
        // Babelfish's KILL looks the session up in its own list of TDS
        // sessions, which under load may briefly miss one that
        // pg_stat_activity shows with the same transaction open: seen
        // again holding it, the session is asked for again.
        let missed = babelfish
            && error
                .to_string()
                .contains("is not an active process ID for a TDS connection");
        if !missed || attempt == KILL_ATTEMPTS {
            return Err(failed(error.to_string()));
        }
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many times a KILL Babelfish answers with "not an active process ID"
/// is sent, each after seeing the session still hold the transaction.
const KILL_ATTEMPTS: u32 = 3;

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
