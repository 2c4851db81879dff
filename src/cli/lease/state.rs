//! `lease inspect` and `lease list`: a resource's lease now, and many at once.

use anyhow::Result;
use serde::Serialize;
use serde_json::json;
use tiberius::Row;

use super::{call, get, key_call, outcome, utc};
use crate::cli::opt::{Format, LeaseKeyArgs, LeaseListArgs};
use crate::cli::{EXIT_ATTENTION, EXIT_OK, connect};

/// One resource's lease, as Inspect and ListLeases show it: never an owner.
#[derive(Debug, Serialize)]
struct Lease {
    key: String,
    generation: i64,
    is_held: bool,
    lease_until_utc: Option<String>,
    published_generation: Option<i64>,
    /// The newest source version a publish or fenced write committed
    /// (contract v1.4); an older one is refused.
    source_version: Option<i64>,
}

impl Lease {
    fn from_row(row: &Row, key: Option<&str>) -> Lease {
        Lease {
            key: key
                .map(str::to_string)
                .or_else(|| get::<&str>(row, "ResourceKey").map(str::to_string))
                .unwrap_or_default(),
            generation: get(row, "Generation").unwrap_or_default(),
            is_held: get(row, "IsHeld").unwrap_or_default(),
            lease_until_utc: utc(row, "LeaseUntilUtc"),
            published_generation: get(row, "PublishedGeneration"),
            source_version: get(row, "SourceVersion"),
        }
    }

    fn to_text(&self) -> String {
        let lease = match (&self.lease_until_utc, self.is_held) {
            (Some(until), true) => format!("held until {until}"),
            (Some(until), false) => format!("free (the last lease ended {until})"),
            (None, _) => "free".to_string(),
        };
        let published = self
            .published_generation
            .map_or("nothing published".to_string(), |g| format!("published generation {g}"));
        let source = self
            .source_version
            .map_or(String::new(), |v| format!("  source version {v}"));
        format!(
            "{}  generation {}  {lease}  {published}{source}",
            self.key, self.generation
        )
    }
}

pub(super) async fn inspect(args: LeaseKeyArgs) -> Result<u8> {
    let row = &key_call(&args, "fence_api.Inspect").await?;
    let found = outcome(row) == "Found";
    let server_utc = utc(row, "ServerUtc");
    let lease = found.then(|| Lease::from_row(row, Some(&args.key)));
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "key": args.key,
                "outcome": outcome(row),
                "lease": lease,
                "server_utc": server_utc,
            }))?
        ),
        Format::Text => match &lease {
            Some(lease) => println!("{}", lease.to_text()),
            None => println!("{}: no fence row (provision it first)", args.key),
        },
    }
    Ok(if found { EXIT_OK } else { EXIT_ATTENTION })
}

pub(super) async fn list(args: LeaseListArgs) -> Result<u8> {
    let (_, mut conn) = connect(&args.connect).await?;
    // @After only when given: a NULL of no declared type is refused by some
    // engines' RPC parsers, and the parameter's default is NULL anyway.
    let rows = match &args.after {
        Some(after) => {
            call(
                &mut conn,
                "EXEC fence_admin.ListLeases @Prefix = @P1, @HeldOnly = @P2, @MaxRows = @P3, @After = @P4",
                &[&args.prefix.as_str(), &args.held, &args.limit, &after.as_str()],
            )
            .await?
        }
        None => {
            call(
                &mut conn,
                "EXEC fence_admin.ListLeases @Prefix = @P1, @HeldOnly = @P2, @MaxRows = @P3",
                &[&args.prefix.as_str(), &args.held, &args.limit],
            )
            .await?
        }
    };
    let leases: Vec<Lease> = rows.iter().map(|row| Lease::from_row(row, None)).collect();
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "server_utc": rows.first().and_then(|r| utc(r, "ServerUtc")),
                "truncated": leases.len() == args.limit as usize,
                "next_after": (leases.len() == args.limit as usize).then(|| leases.last().map(|l| l.key.clone())).flatten(),
                "leases": leases,
            }))?
        ),
        Format::Text => {
            for lease in &leases {
                println!("{}", lease.to_text());
            }
            let what = if args.held { "held lease(s)" } else { "resource(s)" };
            println!("{} {what}", leases.len());
            if leases.len() == args.limit as usize {
                println!(
                    "(stopped at --limit {}: there may be more; the next page: --after {:?})",
                    args.limit,
                    leases.last().map(|l| l.key.as_str()).unwrap_or_default()
                );
            }
        }
    }
    Ok(EXIT_OK)
}
