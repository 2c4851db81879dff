//! `lease force-release`: fence out a stuck holder. Behind a holder whose
//! transaction stays open (a frozen process, a client that never commits)
//! ForceRelease waits at most its bound and fails; the call is watched from a
//! second session, which names the session that blocks it and, with
//! `--kill-blocker`, ends that session and fences the key. The command has an
//! operation id (`--operation-id`, or a fresh one), printed in `--format
//! json`: a call whose reply is lost is replayed with it, and sending the
//! same id again changes nothing.

use anyhow::{Result, bail};
use fencepost::client::Error;
use fencepost::client::admin::{ForceRelease, WhenBlocked};
use serde_json::json;
use uuid::Uuid;

use super::{admin, unknown_outcome};
use crate::cli::opt::{Format, LeaseForceReleaseArgs};
use crate::cli::out;
use crate::cli::{EXIT_ATTENTION, EXIT_OK};

pub(super) async fn force_release(args: LeaseForceReleaseArgs) -> Result<u8> {
    let admin = admin(&args.connect).await?;
    let when_blocked = if args.kill_blocker {
        WhenBlocked::Kill
    } else {
        WhenBlocked::Fail
    };
    let operation_id = args.operation.operation_id.unwrap_or_else(Uuid::new_v4);
    let released = match admin
        .force_release_watched_as(&args.key, when_blocked, operation_id)
        .await
    {
        Ok(released) => released,
        Err(error @ Error::OperatorOutcomeUnknown { .. }) => return Err(unknown_outcome(&args.key, error)),
        Err(Error::Blocked { session, cause, .. }) => bail!(
            "{}: the fence row is held by session {session}, whose transaction is still open; ForceRelease gave up \
             waiting for it ({cause}). End that session to roll its transaction back (KILL {session}, or rerun with \
             --kill-blocker), then force-release again",
            args.key
        ),
        Err(Error::BlockedAfterKill {
            killed, session, cause, ..
        }) if session == killed => bail!(
            "{}: ended session {killed}, which held the fence row in an open transaction, but its rollback is not \
             done: ForceRelease gave up waiting for it again ({cause}). Force-release again once the rollback ends",
            args.key
        ),
        Err(Error::BlockedAfterKill {
            killed, session, cause, ..
        }) => bail!(
            "{}: ended session {killed}, which held the fence row in an open transaction (rolled back); session \
             {session} then took the row in an open transaction of its own, and ForceRelease gave up waiting again \
             ({cause}). Session {session} was not ended: find out what it is, then force-release again (--kill-blocker \
             ends it)",
            args.key
        ),
        Err(error @ Error::KillFailed { .. }) => return Err(error.into()),
        Err(error) => {
            return Err(anyhow::Error::new(error).context(
                "the blocking session, if any, could not be seen (seeing other sessions needs VIEW SERVER STATE on \
                 SQL Server, VIEW DATABASE STATE on Azure SQL Database)",
            ));
        }
    };
    let generation = match released.outcome {
        ForceRelease::Fenced { generation } => Some(generation),
        ForceRelease::NotProvisioned => None,
        other => bail!("{}: this command cannot show the answer {}", args.key, other.name()),
    };
    match args.format {
        Format::Json => out::line(serde_json::to_string_pretty(&json!({
            "key": args.key,
            "outcome": released.outcome.name(),
            "generation": generation,
            "killed_session": released.killed_session,
            "operation_id": operation_id,
        }))?)?,
        Format::Text => {
            if let Some(session) = released.killed_session {
                out::line(format_args!(
                    "{}: ended session {session}, which held the fence row in an open transaction (rolled back)",
                    args.key
                ))?;
            }
            match generation {
                Some(generation) => out::line(format_args!(
                    "{}: fenced; generation is now {generation}: the holder's next renew, publish or fenced \
                     transaction is refused, and the next acquirer gets the lease at once",
                    args.key
                ))?,
                None => out::line(format_args!("{}: no fence row, nothing to release", args.key))?,
            }
        }
    }
    Ok(if generation.is_some() { EXIT_OK } else { EXIT_ATTENTION })
}
