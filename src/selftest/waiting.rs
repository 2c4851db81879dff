//! Calls forced to queue behind a fence row another session holds. Each call
//! is sent from a session of its own and watched from another until the
//! engine shows it waiting behind the holder (the lookup a watched
//! force-release names its blocker with), so every call has made whatever
//! decision it makes before taking the row, nothing is decided before the
//! holder lets go, and the calls get the row in the order they were queued.
//! The engine's own evidence orders the schedule: no sleep stands in for it.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow};
use tiberius::ToSql;
use tokio::task::JoinHandle;

use super::context::Context;
use super::session::{Answer, Session};
use crate::client::admin::blockers::blockers_of;

/// How long a call may take to be seen waiting: well inside the
/// procedures' own 5 s bound on the wait for a row, so the holder lets go
/// before any waiter gives up.
const QUEUE_BOUND: Duration = Duration::from_secs(3);

/// How often the watcher looks.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// Links followed from a waiter towards the holder: each call queued ahead
/// of it is one.
const MAX_CHAIN: usize = 8;

/// Why a forced schedule cannot run for this login.
pub(crate) const NOT_VISIBLE: &str = "this login cannot see other sessions' waits (VIEW SERVER STATE on SQL Server, \
                                      VIEW DATABASE STATE on Azure SQL Database), so the calls cannot be shown queued \
                                      behind the held row and their interleaving cannot be forced";

/// A call running on a session of its own.
pub(crate) struct Sent {
    /// The session id it runs on.
    pub(crate) spid: i32,
    task: Option<JoinHandle<(Session, Result<Answer>, Instant)>>,
}

impl Sent {
    /// Sends `sql` with `args` on `session`; the call runs while the check
    /// goes on, and [`Sent::answer`] gives the session back with its answer.
    pub(crate) async fn send(mut session: Session, sql: &'static str, args: Vec<Box<dyn ToSql>>) -> Result<Sent> {
        let spid = session.spid().await?;
        let task = tokio::spawn(async move {
            let refs: Vec<&dyn ToSql> = args.iter().map(AsRef::as_ref).collect();
            let answer = session.call(sql, &refs).await;
            (session, answer, Instant::now())
        });
        Ok(Sent { spid, task: Some(task) })
    }

    /// Whether the call has answered (or failed) by now.
    pub(crate) fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Waits for the call's answer.
    pub(crate) async fn answer(self) -> Result<(Session, Answer)> {
        let (session, answer, _) = self.answer_at().await?;
        Ok((session, answer))
    }

    /// Waits for the call's answer, and says when it came: so a check can
    /// tell which of two calls answered first from the calls themselves.
    pub(crate) async fn answer_at(mut self) -> Result<(Session, Answer, Instant)> {
        let task = self.task.take().context("the call's answer was already taken")?;
        let (session, answer, at) = task.await.context("the call's task")?;
        Ok((session, answer?, at))
    }
}

impl Drop for Sent {
    /// A check that ends early (its bound, an error) ends its calls too:
    /// their sessions close, and the server rolls back what they began.
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Where a sent call stood when the watcher stopped looking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Queued {
    /// Seen waiting behind the holder, directly or behind calls queued ahead of it.
    Waiting,
    /// It answered before it was seen waiting: it did not wait for the row.
    Answered,
    /// Still running, but not seen waiting behind the holder within the bound.
    NotSeen,
}

impl Queued {
    /// As said of a call the session S1 holds up.
    pub(crate) fn word(self) -> String {
        self.behind("S1")
    }

    /// As said of a call the session named `holder` holds up.
    pub(crate) fn behind(self, holder: &str) -> String {
        match self {
            Queued::Waiting => format!("queued behind {holder}"),
            Queued::Answered => format!("ANSWERED WITHOUT WAITING for {holder}"),
            Queued::NotSeen => format!("NOT SEEN WAITING behind {holder}"),
        }
    }
}

/// A session of the check's own to hold a fence row, its id, and a watcher
/// that sees the calls queued behind it; `None` when this login cannot see
/// other sessions' waits (the check is then skipped, [`NOT_VISIBLE`]).
pub(crate) async fn holder_watched(ctx: &Context) -> Result<Option<(Session, i32, Watcher)>> {
    let mut watcher = Watcher::open(ctx).await?;
    let mut holder = ctx.session().await?;
    let spid = holder.spid().await?;
    Ok(watcher.sees(spid).await?.then_some((holder, spid, watcher)))
}

/// A session of the check's own that watches which sessions wait behind which.
pub(crate) struct Watcher {
    session: Session,
    babelfish: bool,
}

impl Watcher {
    pub(crate) async fn open(ctx: &Context) -> Result<Watcher> {
        Ok(Watcher {
            session: ctx.session().await?,
            babelfish: ctx.engine.babelfish,
        })
    }

    /// Whether this login sees session `spid` at all: without VIEW SERVER
    /// STATE a SQL Server login sees only its own session. On Babelfish the
    /// waits are read with pg_blocking_pids, which every login may call;
    /// its sys.dm_exec_sessions is no test there, as it may not list a
    /// session that has just signed in.
    pub(crate) async fn sees(&mut self, spid: i32) -> Result<bool> {
        if self.babelfish {
            return Ok(true);
        }
        let sql = format!("SELECT CAST(COUNT(*) AS int) FROM sys.dm_exec_sessions WHERE session_id = {spid};");
        Ok(self.session.int(&sql).await? == Some(1))
    }

    /// Watches `call` until it waits behind `holder`, answers, or the bound passes.
    pub(crate) async fn queue(&mut self, call: &Sent, holder: i32) -> Result<Queued> {
        let give_up = tokio::time::Instant::now() + QUEUE_BOUND;
        loop {
            // Finished first: a call seen waiting is still running, so one
            // that finished before it was seen did not wait.
            if call.is_finished() {
                return Ok(Queued::Answered);
            }
            if self.waits_behind(call.spid, holder).await? {
                return Ok(Queued::Waiting);
            }
            if tokio::time::Instant::now() > give_up {
                return Ok(Queued::NotSeen);
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }

    /// Waits until some session other than the watcher's is seen waiting
    /// directly behind `holder` (for a call whose session id the check
    /// cannot know, as a client's pooled connection), or the bound passes;
    /// `Answered` when `done` says the call ended first.
    pub(crate) async fn any_behind(&mut self, holder: i32, done: impl Fn() -> bool) -> Result<Queued> {
        let sql = if self.babelfish {
            "SELECT CAST(COUNT(*) AS int) FROM pg_catalog.pg_stat_activity AS a \
             WHERE a.pid <> @@SPID AND @P1 = ANY (pg_catalog.pg_blocking_pids(a.pid))"
        } else {
            "SELECT CAST(COUNT(*) AS int) FROM sys.dm_exec_requests \
             WHERE blocking_session_id = @P1 AND session_id <> @@SPID"
        };
        let give_up = tokio::time::Instant::now() + QUEUE_BOUND;
        loop {
            if done() {
                return Ok(Queued::Answered);
            }
            let row = self
                .session
                .connection()
                .query(sql, &[&holder])
                .await?
                .into_row()
                .await?;
            if row.and_then(|r| r.get::<i32, _>(0)).unwrap_or(0) > 0 {
                return Ok(Queued::Waiting);
            }
            if tokio::time::Instant::now() > give_up {
                return Ok(Queued::NotSeen);
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }

    /// Whether `waiter` waits for `holder`, directly or behind sessions that
    /// themselves wait for it (the calls queued ahead for the same row).
    async fn waits_behind(&mut self, waiter: i32, holder: i32) -> Result<bool> {
        let mut seen = vec![waiter];
        let mut frontier = vec![waiter];
        for _ in 0..MAX_CHAIN {
            let mut next = Vec::new();
            for spid in frontier {
                let blockers = blockers_of(self.session.connection(), spid, self.babelfish)
                    .await
                    .map_err(|e| anyhow!("reading which sessions {spid} waits for: {e}"))?;
                for blocker in blockers {
                    if blocker == holder {
                        return Ok(true);
                    }
                    if !seen.contains(&blocker) {
                        seen.push(blocker);
                        next.push(blocker);
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
        Ok(false)
    }
}
