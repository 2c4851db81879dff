//! `fencepost lease`: an operator's look at leases and their history, the
//! lever for a stuck one, and the recovery after a restore, through the fence
//! procedures only.

mod force_release;
mod history;
mod recover;
mod source_version;
mod state;

use anyhow::{Context, Result};
use fencepost::Connection;
use tiberius::{Row, ToSql};
use time::format_description::well_known::Rfc3339;
use time::{OffsetDateTime, PrimitiveDateTime};

use super::connect;
use super::opt::{Format, LeaseCommand, LeaseKeyArgs};

impl LeaseCommand {
    /// The output format asked for.
    pub fn format(&self) -> Format {
        match self {
            LeaseCommand::Inspect(args) => args.format,
            LeaseCommand::ForceRelease(args) => args.format,
            LeaseCommand::List(args) => args.format,
            LeaseCommand::History(args) => args.format,
            LeaseCommand::Prune(args) => args.format,
            LeaseCommand::Recover(args) => args.format,
            LeaseCommand::ResetSourceVersion(args) => args.format,
        }
    }
}

pub async fn run(command: LeaseCommand) -> Result<u8> {
    match command {
        LeaseCommand::Inspect(args) => state::inspect(args).await,
        LeaseCommand::List(args) => state::list(args).await,
        LeaseCommand::ForceRelease(args) => force_release::force_release(args).await,
        LeaseCommand::History(args) => history::history(args).await,
        LeaseCommand::Prune(args) => history::prune(args).await,
        LeaseCommand::Recover(args) => recover::recover(args).await,
        LeaseCommand::ResetSourceVersion(args) => source_version::reset(args).await,
    }
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
