//! `lease inspect`, `lease list` and `lease slots`: a resource's lease now
//! (or each key of a lease set), many at once, and a resource's slots.

use anyhow::Result;
use fencepost::client::admin::{Inspected, LeaseQuery};
use fencepost::client::{Inspection, LeaseState};
use serde_json::{Value, json};

use super::{admin, utc};
use crate::cli::EXIT_ATTENTION;
use crate::cli::EXIT_OK;
use crate::cli::opt::{Format, LeaseKeyArgs, LeaseListArgs, LeaseSlotsArgs};
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
    let admin = admin(&args.connect).await?;
    let mut inspected = Vec::with_capacity(args.keys.len());
    for key in &args.keys {
        inspected.push((key, admin.inspect(key).await?));
    }
    let state = |inspection: &Inspection| match inspection {
        Inspection::Found(state) => Some(*state),
        Inspection::NotProvisioned => None,
    };
    match args.format {
        Format::Json => {
            let objects: Vec<Value> = inspected
                .iter()
                .map(|(key, Inspected { inspection, server_utc })| {
                    json!({
                        "key": key,
                        "outcome": inspection.name(),
                        "lease": state(inspection).map(|state| lease_json(key, &state)),
                        "server_utc": utc(*server_utc),
                    })
                })
                .collect();
            // One key, one object, as before lease sets; a set, an array.
            let shown = match <[Value; 1]>::try_from(objects) {
                Ok([object]) => object,
                Err(objects) => Value::Array(objects),
            };
            out::line(serde_json::to_string_pretty(&shown)?)?;
        }
        Format::Text => {
            for (key, Inspected { inspection, .. }) in &inspected {
                match state(inspection) {
                    Some(state) => out::line(lease_text(key, &state))?,
                    None => out::line(format_args!("{key}: no fence row (provision it first)"))?,
                }
            }
        }
    }
    let every_key_found = inspected
        .iter()
        .all(|(_, Inspected { inspection, .. })| state(inspection).is_some());
    Ok(if every_key_found { EXIT_OK } else { EXIT_ATTENTION })
}

pub(super) async fn slots(args: LeaseSlotsArgs) -> Result<u8> {
    let found = admin(&args.connect).await?.slots(&args.resource).await?;
    let held = found.held();
    match args.format {
        Format::Json => out::line(serde_json::to_string_pretty(&json!({
            "resource": args.resource,
            "resource_provisioned": found.resource_provisioned,
            "server_utc": found.server_utc.map(utc),
            "held": held,
            "slots": found
                .slots
                .iter()
                .map(|slot| {
                    let mut lease = lease_json(&slot.key, &slot.state);
                    lease["slot"] = json!(slot.slot);
                    lease
                })
                .collect::<Vec<_>>(),
        }))?)?,
        Format::Text => {
            for slot in &found.slots {
                out::line(format_args!(
                    "slot {:>4}  {}",
                    slot.slot,
                    lease_text(&slot.key, &slot.state)
                ))?;
            }
            match found.slots.len() {
                0 => out::line(format_args!(
                    "{}: no slot provisioned (provision RESOURCE#0 to RESOURCE#N-1 first)",
                    args.resource
                ))?,
                provisioned => out::line(format_args!("{held} of {provisioned} provisioned slot(s) held"))?,
            }
            if !found.resource_provisioned {
                out::line(format_args!(
                    "{}: the resource's own key has no fence row: AcquireSlot answers NotProvisioned until it is provisioned",
                    args.resource
                ))?;
            }
        }
    }
    let usable = found.resource_provisioned && !found.slots.is_empty();
    Ok(if usable { EXIT_OK } else { EXIT_ATTENTION })
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
