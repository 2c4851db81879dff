//! `lease recover`: after a restore or a data-losing failover, every
//! generation is raised above any issued before, and every open lease voided.

use anyhow::{Context, Result};
use fencepost::Connection;
use serde_json::json;
use uuid::Uuid;

use super::{call, get, outcome, utc};
use crate::cli::EXIT_OK;
use crate::cli::connect;
use crate::cli::opt::{Format, LeaseRecoverArgs};

pub(super) async fn recover(args: LeaseRecoverArgs) -> Result<u8> {
    let (_, mut conn) = connect(&args.connect).await?;
    let identity = database_identity(&mut conn).await;
    // One restore, one recovery: keyed by the database's recovery fork when
    // the engine shows it, so a second run for the same restore changes nothing.
    let (recovery_id, id_from) = match (args.id, identity) {
        (Some(id), _) => (id, "--id"),
        (None, Some(fork)) => (fork, "the database's recovery fork"),
        (None, None) => (Uuid::new_v4(), "a fresh id"),
    };
    let rows = call(
        &mut conn,
        "EXEC fence_admin.Recover @RecoveryId = @P1, @Floor = @P2, @DatabaseIdentity = @P3",
        &[&recovery_id, &args.floor, &identity],
    )
    .await?;
    let row = rows.first().context("fence_admin.Recover answered no row")?;
    let floor: i64 = get(row, "GenerationFloor").unwrap_or_default();
    let voided: i32 = get(row, "LeasesVoided").unwrap_or_default();
    let at = utc(row, "RecoveredAtUtc").unwrap_or_default();
    let repeated = outcome(row) == "AlreadyRecovered";
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "outcome": outcome(row),
                "recovery_id": recovery_id,
                "recovery_id_from": id_from,
                "database_identity": identity,
                "generation_floor": floor,
                "leases_voided": voided,
                "recovered_at_utc": at,
            }))?
        ),
        Format::Text if repeated => println!(
            "recovery {recovery_id} (from {id_from}) already ran at {at}: every generation was raised to {floor}; \
             nothing changed. To recover from another restore or failover since then, pass a new --id"
        ),
        Format::Text => {
            println!(
                "recovered: every generation raised to {floor}, so every next acquisition gets a higher one; \
                 {voided} open lease(s) voided (their holders' publishes answer Superseded)"
            );
            println!("recovery id {recovery_id} (from {id_from}): repeat with --id {recovery_id} to change nothing");
        }
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
