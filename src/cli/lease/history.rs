//! `lease history` and `lease prune`: the tenures a resource had, newest
//! first, and the bound an operator keeps on them.

use anyhow::{Result, bail};
use fencepost::client::admin::{Ending, LeaseHistory, Prune, Tenure};
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::{admin, utc};
use crate::cli::opt::{Format, LeaseHistoryArgs, LeasePruneArgs};
use crate::cli::out;
use crate::cli::{EXIT_ATTENTION, EXIT_OK};

/// One tenure as JSON: the owner only as a hash.
fn tenure_json(tenure: &Tenure) -> Value {
    json!({
        "generation": tenure.generation,
        // SHA-256 of the owner's upper-case text, in hex.
        "owner_sha256": tenure.owner_hash,
        "acquired_at_utc": tenure.acquired_at.map(utc),
        // NULL while the tenure is open.
        "ended_at_utc": tenure.ended_at.map(utc),
        "ending": tenure.ending.map(Ending::name),
        "published": tenure.published,
        // The open tenure's lease end.
        "lease_until_utc": tenure.lease_until.map(utc),
        // The source version its accepted publish carried (contract v1.4).
        "source_version": tenure.source_version,
    })
}

/// One tenure as a line of text; `server_utc` tells an open lease that ran
/// out from one still held. The times compare as times: their RFC 3339 text
/// has as many fraction digits as each needs, so `12:00:00Z` sorts after
/// `12:00:00.1Z`.
fn tenure_text(tenure: &Tenure, server_utc: Option<OffsetDateTime>) -> String {
    let how = match (tenure.ending, tenure.ended_at, tenure.lease_until) {
        (Some(ending), Some(at), _) => format!("{} {}", ending.name(), utc(at)),
        (_, _, Some(until)) if server_utc.is_some_and(|now| until <= now) => {
            format!("open, lease ran out {} (nobody took over yet)", utc(until))
        }
        (_, _, Some(until)) => format!("open, held until {}", utc(until)),
        _ => "open".to_string(),
    };
    let acquired = tenure
        .acquired_at
        .map_or("acquired before the history began".to_string(), |at| {
            format!("acquired {}", utc(at))
        });
    let published = match (tenure.published, tenure.source_version) {
        (true, Some(version)) => format!("published from source version {version}"),
        (true, None) => "published".to_string(),
        (false, _) => "not published".to_string(),
    };
    let owner = tenure.owner_hash.as_deref().map_or("", |h| &h[..h.len().min(12)]);
    format!(
        "generation {}  {how}  {acquired}  {published}  owner sha256 {owner}…",
        tenure.generation
    )
}

pub(super) async fn history(args: LeaseHistoryArgs) -> Result<u8> {
    // At least 1: the flag's parser bounds it.
    let answer = admin(&args.connect)
        .await?
        .lease_history(&args.key, args.limit.unsigned_abs())
        .await?;
    let (tenures, server_utc, truncated) = match &answer {
        LeaseHistory::Found(history) => (&history.tenures[..], history.server_utc, history.is_full()),
        LeaseHistory::NotProvisioned { server_utc } => (&[][..], Some(*server_utc), false),
        other => bail!("{}: this command cannot show the answer {}", args.key, other.name()),
    };
    let provisioned = matches!(answer, LeaseHistory::Found(_));
    match args.format {
        Format::Json => out::line(serde_json::to_string_pretty(&json!({
            "key": args.key,
            "outcome": answer.name(),
            "server_utc": server_utc.map(utc),
            "truncated": truncated,
            "tenures": tenures.iter().map(tenure_json).collect::<Vec<_>>(),
        }))?)?,
        Format::Text if !provisioned => out::line(format_args!("{}: no fence row (provision it first)", args.key))?,
        Format::Text => {
            out::line(format_args!("{}: {} tenure(s), newest first", args.key, tenures.len()))?;
            for tenure in tenures {
                out::line(format_args!("  {}", tenure_text(tenure, server_utc)))?;
            }
            if truncated {
                out::line(format_args!(
                    "(stopped at --limit {}: there may be older ones)",
                    args.limit
                ))?;
            }
        }
    }
    Ok(if provisioned { EXIT_OK } else { EXIT_ATTENTION })
}

pub(super) async fn prune(args: LeasePruneArgs) -> Result<u8> {
    // 1 to 36500: the flag's parser bounds it.
    let answer = admin(&args.connect)
        .await?
        .prune_tenure(args.older_than.unsigned_abs())
        .await?;
    let (deleted, before) = match answer {
        Prune::Pruned { deleted, ended_before } => (deleted, utc(ended_before)),
        other => bail!("this command cannot show the answer {}", other.name()),
    };
    match args.format {
        Format::Json => out::line(serde_json::to_string_pretty(&json!({
            "outcome": answer.name(),
            "deleted": deleted,
            "ended_before_utc": before,
        }))?)?,
        Format::Text => out::line(format_args!("pruned {deleted} tenure(s) that ended before {before}"))?,
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    fn open_until(until: OffsetDateTime) -> Tenure {
        Tenure {
            generation: 4,
            owner_hash: Some("ab".repeat(32)),
            acquired_at: Some(datetime!(2025-03-01 11:00:00 UTC)),
            ended_at: None,
            ending: None,
            published: false,
            lease_until: Some(until),
            source_version: None,
        }
    }

    #[test]
    fn an_open_lease_that_ended_on_a_whole_second_ran_out_by_a_later_fraction() {
        let until = datetime!(2025-03-01 12:00:00 UTC);
        let now = datetime!(2025-03-01 12:00:00.1 UTC);
        assert!(utc(until) > utc(now), "the text alone sorts the other way");
        let line = tenure_text(&open_until(until), Some(now));
        assert!(
            line.contains("open, lease ran out 2025-03-01T12:00:00Z (nobody took over yet)"),
            "{line}"
        );
        let held = tenure_text(&open_until(datetime!(2025-03-01 12:00:00.5 UTC)), Some(now));
        assert!(held.contains("open, held until 2025-03-01T12:00:00.5Z"), "{held}");
    }
}
