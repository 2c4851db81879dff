//! `lease inspect` and `lease list`: a resource's lease now, and many at once.

use anyhow::Result;
use fencepost::client::admin::{Inspected, LeaseQuery};
use fencepost::client::{Inspection, LeaseState};
use serde_json::{Value, json};

use super::{admin, utc};
use crate::cli::EXIT_ATTENTION;
use crate::cli::EXIT_OK;
use crate::cli::opt::{Format, LeaseKeyArgs, LeaseListArgs};
use crate::cli::out;

/// One resource's lease as JSON: never an owner.
fn lease_json(key: &str, state: &LeaseState) -> Value {
    json!({
        "key": key,
        "generation": state.generation,
        "is_held": state.is_held,
        "lease_until_utc": state.lease_until.map(utc),
        "published_generation": state.published_generation,
        // The newest source version a publish or fenced write committed
        // (contract v1.4); an older one is refused.
        "source_version": state.source_version,
    })
}

/// One resource's lease as a line of text.
fn lease_text(key: &str, state: &LeaseState) -> String {
    let lease = match (state.lease_until.map(utc), state.is_held) {
        (Some(until), true) => format!("held until {until}"),
        (Some(until), false) => format!("free (the last lease ended {until})"),
        (None, _) => "free".to_string(),
    };
    let published = state
        .published_generation
        .map_or("nothing published".to_string(), |g| format!("published generation {g}"));
    let source = state
        .source_version
        .map_or(String::new(), |v| format!("  source version {v}"));
    format!("{key}  generation {}  {lease}  {published}{source}", state.generation)
}

pub(super) async fn inspect(args: LeaseKeyArgs) -> Result<u8> {
    let Inspected { inspection, server_utc } = admin(&args.connect).await?.inspect(&args.key).await?;
    let state = match &inspection {
        Inspection::Found(state) => Some(state),
        Inspection::NotProvisioned => None,
    };
    match args.format {
        Format::Json => out::line(serde_json::to_string_pretty(&json!({
            "key": args.key,
            "outcome": inspection.name(),
            "lease": state.map(|state| lease_json(&args.key, state)),
            "server_utc": utc(server_utc),
        }))?)?,
        Format::Text => match state {
            Some(state) => out::line(lease_text(&args.key, state))?,
            None => out::line(format_args!("{}: no fence row (provision it first)", args.key))?,
        },
    }
    Ok(if state.is_some() { EXIT_OK } else { EXIT_ATTENTION })
}

pub(super) async fn list(args: LeaseListArgs) -> Result<u8> {
    let mut query = LeaseQuery::new();
    // At least 1: the flag's parser bounds it.
    query
        .prefix(&args.prefix)
        .held_only(args.held)
        .max_rows(args.limit.unsigned_abs());
    if let Some(after) = &args.after {
        query.after(after);
    }
    let page = admin(&args.connect).await?.list_leases(&query).await?;
    match args.format {
        Format::Json => out::line(serde_json::to_string_pretty(&json!({
            "server_utc": page.server_utc().map(utc),
            "truncated": page.is_full(),
            "next_after": page.next_after(),
            "leases": page.leases.iter().map(|l| lease_json(&l.key, &l.state)).collect::<Vec<_>>(),
        }))?)?,
        Format::Text => {
            for lease in &page.leases {
                out::line(lease_text(&lease.key, &lease.state))?;
            }
            let what = if args.held { "held lease(s)" } else { "resource(s)" };
            out::line(format_args!("{} {what}", page.leases.len()))?;
            if page.is_full() {
                out::line(format_args!(
                    "(stopped at --limit {}: there may be more; the next page: --after {:?})",
                    args.limit,
                    page.next_after().unwrap_or_default()
                ))?;
            }
        }
    }
    Ok(EXIT_OK)
}
