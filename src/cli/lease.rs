//! `fencepost lease`: an operator's look at leases, and the lever for a stuck
//! one, through the fence procedures only.

use anyhow::{Context, Result};
use fencepost::Connection;
use serde::Serialize;
use serde_json::json;
use tiberius::{Row, ToSql};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, PrimitiveDateTime};

use super::opt::{Format, LeaseCommand, LeaseKeyArgs, LeaseListArgs};
use super::{EXIT_ATTENTION, EXIT_OK, connect};

impl LeaseCommand {
    /// The output format asked for.
    pub fn format(&self) -> Format {
        match self {
            LeaseCommand::Inspect(args) | LeaseCommand::ForceRelease(args) => args.format,
            LeaseCommand::List(args) => args.format,
        }
    }
}

pub async fn run(command: LeaseCommand) -> Result<u8> {
    match command {
        LeaseCommand::Inspect(args) => inspect(args).await,
        LeaseCommand::List(args) => list(args).await,
        LeaseCommand::ForceRelease(args) => force_release(args).await,
    }
}

/// One resource's lease, as Inspect and ListLeases show it: never an owner.
#[derive(Debug, Serialize)]
struct Lease {
    key: String,
    generation: i64,
    is_held: bool,
    lease_until_utc: Option<String>,
    published_generation: Option<i64>,
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
        format!("{}  generation {}  {lease}  {published}", self.key, self.generation)
    }
}

async fn inspect(args: LeaseKeyArgs) -> Result<u8> {
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

async fn list(args: LeaseListArgs) -> Result<u8> {
    let (_, mut conn) = connect(&args.connect).await?;
    let rows = call(
        &mut conn,
        "EXEC fence_admin.ListLeases @Prefix = @P1, @HeldOnly = @P2, @MaxRows = @P3",
        &[&args.prefix.as_str(), &args.held, &args.limit],
    )
    .await?;
    let leases: Vec<Lease> = rows.iter().map(|row| Lease::from_row(row, None)).collect();
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "server_utc": rows.first().and_then(|r| utc(r, "ServerUtc")),
                "truncated": leases.len() == args.limit as usize,
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
                println!("(stopped at --limit {}: there may be more)", args.limit);
            }
        }
    }
    Ok(EXIT_OK)
}

async fn force_release(args: LeaseKeyArgs) -> Result<u8> {
    let row = &key_call(&args, "fence_admin.ForceRelease").await?;
    let fenced = outcome(row) == "Fenced";
    let generation: Option<i64> = get(row, "Generation");
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "key": args.key,
                "outcome": outcome(row),
                "generation": generation,
            }))?
        ),
        Format::Text if fenced => println!(
            "{}: fenced; generation is now {}: the holder's next renew, publish or fenced transaction is refused, \
             and the next acquirer gets the lease at once",
            args.key,
            generation.unwrap_or_default()
        ),
        Format::Text => println!("{}: no fence row, nothing to release", args.key),
    }
    Ok(if fenced { EXIT_OK } else { EXIT_ATTENTION })
}

/// Calls `procedure` with the command's key and returns its one row.
async fn key_call(args: &LeaseKeyArgs, procedure: &str) -> Result<Row> {
    let (_, mut conn) = connect(&args.connect).await?;
    let sql = format!("EXEC {procedure} @ResourceKey = @P1");
    let rows = call(&mut conn, &sql, &[&args.key.as_str()]).await?;
    rows.into_iter()
        .next()
        .with_context(|| format!("{procedure} answered no row"))
}

/// Runs one procedure call and returns its rows; a server error names the
/// procedure and keeps the server's message (a refused parameter, a missing
/// permission).
async fn call(conn: &mut Connection, sql: &str, params: &[&dyn ToSql]) -> Result<Vec<Row>> {
    let procedure = sql.split_whitespace().nth(1).unwrap_or(sql);
    let rows = conn
        .query(sql, params)
        .await
        .with_context(|| format!("calling {procedure}"))?
        .into_first_result()
        .await
        .with_context(|| format!("calling {procedure}"))?;
    Ok(rows)
}

fn outcome(row: &Row) -> &str {
    get::<&str>(row, "Outcome").unwrap_or_default()
}

/// A column found without regard to case (some engines fold names), or
/// `None` when it is missing, NULL or of another type.
fn get<'a, T: tiberius::FromSql<'a>>(row: &'a Row, column: &str) -> Option<T> {
    let index = row
        .columns()
        .iter()
        .position(|c| c.name().eq_ignore_ascii_case(column))?;
    row.try_get::<T, _>(index).ok().flatten()
}

/// A `datetime2` column (UTC by contract) as RFC 3339.
fn utc(row: &Row, column: &str) -> Option<String> {
    let value: OffsetDateTime = get::<PrimitiveDateTime>(row, column)?.assume_utc();
    value.format(&Rfc3339).ok()
}
