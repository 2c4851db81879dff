//! `lease recover`: after a restore or a data-losing failover, every
//! generation is raised above any issued before, and every open lease voided.

use anyhow::{Result, bail};
use fencepost::Connection;
use fencepost::client::Error;
use fencepost::client::admin::{Recover, Recovery};
use serde_json::json;
use uuid::Uuid;

use super::{admin, utc};
use crate::cli::EXIT_OK;
use crate::cli::connect;
use crate::cli::opt::{Format, LeaseRecoverArgs};
use crate::cli::out;

pub(super) async fn recover(args: LeaseRecoverArgs) -> Result<u8> {
    let identity = {
        let (_, mut conn) = connect(&args.connect).await?;
        database_identity(&mut conn).await
    };
    // One restore, one recovery: keyed by the database's recovery fork when
    // the engine shows it, so a second run for the same restore changes nothing.
    let (recovery_id, id_from) = match (args.id, identity) {
        (Some(id), _) => (id, "--id"),
        (None, Some(fork)) => (fork, "the database's recovery fork"),
        (None, None) => (Uuid::new_v4(), "a fresh id"),
    };
    let mut recovery = Recovery::new(recovery_id);
    if let Some(floor) = args.floor {
        recovery.floor(floor);
    }
    if let Some(identity) = identity {
        recovery.database_identity(identity);
    }
    let answer = match admin(&args.connect).await?.recover_watched(&recovery).await {
        Ok(answer) => answer,
        // Recover gave up rather than hold up every key behind a transaction
        // that stays open: nothing changed, and the same recovery runs again.
        Err(Error::Blocked { session, cause, .. }) => bail!(
            "recovery {recovery_id}: session {session} holds a fence row in a transaction that stays open, and Recover \
             gave up waiting for it after 5 seconds rather than hold up every key meanwhile ({cause}); nothing changed. \
             Stop the services or end that session (KILL {session}, or `fencepost lease force-release --kill-blocker` \
             on the key it holds), then run the same recovery again: --id {recovery_id}"
        ),
        Err(error) => return Err(error.into()),
    };
    let record = answer.record();
    let (floor, voided, at) = (record.generation_floor, record.leases_voided, utc(record.recovered_at));
    match args.format {
        Format::Json => out::line(serde_json::to_string_pretty(&json!({
            "outcome": answer.name(),
            "recovery_id": recovery_id,
            "recovery_id_from": id_from,
            "database_identity": identity,
            "generation_floor": floor,
            "leases_voided": voided,
            "recovered_at_utc": at,
        }))?)?,
        Format::Text => match answer {
            Recover::AlreadyRecovered(_) => out::line(format_args!(
                "recovery {recovery_id} (from {id_from}) already ran at {at}: every generation was raised to \
                 {floor}; nothing changed. To recover from another restore or failover since then, pass a new --id"
            ))?,
            Recover::Recovered(_) => {
                out::line(format_args!(
                    "recovered: every generation raised to {floor}, so every next acquisition gets a higher one; \
                     {voided} open lease(s) voided (their holders' publishes answer Superseded)"
                ))?;
                out::line(format_args!(
                    "recovery id {recovery_id} (from {id_from}): repeat with --id {recovery_id} to change nothing"
                ))?;
            }
            other => bail!(
                "recovery {recovery_id}: this command cannot show the answer {}",
                other.name()
            ),
        },
    }
    Ok(EXIT_OK)
}

/// The database's recovery fork, or `None` where the engine does not show
/// one (Babelfish). A login that may not read it gets a warning, not a
/// refusal: the recovery matters more than recording the identity.
async fn database_identity(conn: &mut Connection) -> Option<Uuid> {
    match fencepost::identity::read_current(conn).await {
        Ok(identity) => identity,
        Err(error) => {
            tracing::warn!(
                "could not read the database identity, so this recovery does not record it \
                 (check keeps reporting FP019 until a recovery that can read it runs): {error}"
            );
            None
        }
    }
}
