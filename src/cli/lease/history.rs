//! `lease history` and `lease prune`: the tenures a resource had, newest
//! first, and the bound an operator keeps on them.

use anyhow::Result;
use serde::Serialize;
use serde_json::json;
use tiberius::Row;

use super::{call, get, outcome, utc};
use crate::cli::opt::{Format, LeaseHistoryArgs, LeasePruneArgs};
use crate::cli::{EXIT_ATTENTION, EXIT_OK, connect};

/// One tenure as LeaseHistory answers it: the owner only as a hash.
#[derive(Debug, Serialize)]
struct Tenure {
    generation: i64,
    /// SHA-256 of the owner's upper-case text, in hex.
    owner_sha256: Option<String>,
    acquired_at_utc: Option<String>,
    /// NULL while the tenure is open.
    ended_at_utc: Option<String>,
    /// Released, Expired, ForceReleased or Superseded; `None` while open.
    ending: Option<String>,
    published: bool,
    /// The open tenure's lease end.
    lease_until_utc: Option<String>,
    /// The source version its accepted publish carried (contract v1.4).
    source_version: Option<i64>,
}

impl Tenure {
    fn from_row(row: &Row) -> Tenure {
        Tenure {
            generation: get(row, "Generation").unwrap_or_default(),
            owner_sha256: get::<&[u8]>(row, "OwnerHash").map(hex::encode),
            acquired_at_utc: utc(row, "AcquiredAtUtc"),
            ended_at_utc: utc(row, "EndedAtUtc"),
            ending: get::<&str>(row, "Ending").map(str::to_string),
            published: get(row, "Published").unwrap_or_default(),
            lease_until_utc: utc(row, "LeaseUntilUtc"),
            source_version: get(row, "SourceVersion"),
        }
    }

    fn to_text(&self, server_utc: Option<&str>) -> String {
        let how = match (&self.ending, &self.ended_at_utc, &self.lease_until_utc) {
            (Some(ending), Some(at), _) => format!("{ending} {at}"),
            (_, _, Some(until)) if server_utc.is_some_and(|now| until.as_str() <= now) => {
                format!("open, lease ran out {until} (nobody took over yet)")
            }
            (_, _, Some(until)) => format!("open, held until {until}"),
            _ => "open".to_string(),
        };
        let acquired = self
            .acquired_at_utc
            .as_deref()
            .map_or("acquired before the history began".to_string(), |at| {
                format!("acquired {at}")
            });
        let published = match (self.published, self.source_version) {
            (true, Some(version)) => format!("published from source version {version}"),
            (true, None) => "published".to_string(),
            (false, _) => "not published".to_string(),
        };
        let owner = self.owner_sha256.as_deref().map_or("", |h| &h[..h.len().min(12)]);
        format!(
            "generation {}  {how}  {acquired}  {published}  owner sha256 {owner}…",
            self.generation
        )
    }
}

pub(super) async fn history(args: LeaseHistoryArgs) -> Result<u8> {
    let (_, mut conn) = connect(&args.connect).await?;
    let rows = call(
        &mut conn,
        "EXEC fence_admin.LeaseHistory @ResourceKey = @P1, @MaxRows = @P2",
        &[&args.key.as_str(), &args.limit],
    )
    .await?;
    let provisioned = rows.first().is_none_or(|row| outcome(row) == "Found");
    let server_utc = rows.first().and_then(|row| utc(row, "ServerUtc"));
    let tenures: Vec<Tenure> = if provisioned {
        rows.iter().map(Tenure::from_row).collect()
    } else {
        Vec::new()
    };
    let truncated = tenures.len() == args.limit as usize;
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "key": args.key,
                "outcome": if provisioned { "Found" } else { "NotProvisioned" },
                "server_utc": server_utc,
                "truncated": truncated,
                "tenures": tenures,
            }))?
        ),
        Format::Text if !provisioned => println!("{}: no fence row (provision it first)", args.key),
        Format::Text => {
            println!("{}: {} tenure(s), newest first", args.key, tenures.len());
            for tenure in &tenures {
                println!("  {}", tenure.to_text(server_utc.as_deref()));
            }
            if truncated {
                println!("(stopped at --limit {}: there may be older ones)", args.limit);
            }
        }
    }
    Ok(if provisioned { EXIT_OK } else { EXIT_ATTENTION })
}

pub(super) async fn prune(args: LeasePruneArgs) -> Result<u8> {
    let (_, mut conn) = connect(&args.connect).await?;
    let rows = call(
        &mut conn,
        "EXEC fence_admin.PruneTenure @OlderThanDays = @P1",
        &[&args.older_than],
    )
    .await?;
    let row = rows.first();
    let deleted: i32 = row.and_then(|r| get(r, "Deleted")).unwrap_or_default();
    let before = row.and_then(|r| utc(r, "EndedBeforeUtc"));
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "outcome": row.map(outcome),
                "deleted": deleted,
                "ended_before_utc": before,
            }))?
        ),
        Format::Text => println!(
            "pruned {deleted} tenure(s) that ended before {}",
            before.unwrap_or_default()
        ),
    }
    Ok(EXIT_OK)
}
