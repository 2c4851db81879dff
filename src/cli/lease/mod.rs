//! `fencepost lease`: an operator's look at leases and their history, the
//! lever for a stuck one, the recovery after a restore, and the lifecycle:
//! retiring a key and pruning the outcome records. The calls are the
//! client's ([`fencepost::client::admin`]); these commands only render what
//! they answer.

mod force_release;
mod history;
mod prune_outcomes;
mod recover;
mod retire;
mod source_version;
mod state;

use std::time::Duration;

use anyhow::Result;
use fencepost::client::Admin;
use fencepost::{Client, ClientConfig};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::connection_string;
use super::opt::{ConnectArgs, Format, LeaseCommand};

/// How long one operator call may take. An operator's command waits as long
/// as the server takes (a recovery waits for every open transaction on a fence
/// row), as it did on a connection without a command timeout; the driver
/// needs a finite bound, so it is a day.
const OPERATOR_CALL_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

impl LeaseCommand {
    /// The output format asked for.
    pub fn format(&self) -> Format {
        match self {
            LeaseCommand::Inspect(args) => args.format,
            LeaseCommand::ForceRelease(args) => args.format,
            LeaseCommand::List(args) => args.format,
            LeaseCommand::Slots(args) => args.format,
            LeaseCommand::History(args) => args.format,
            LeaseCommand::Prune(args) => args.format,
            LeaseCommand::Recover(args) => args.format,
            LeaseCommand::ResetSourceVersion(args) => args.format,
            LeaseCommand::Retire(args) => args.format,
            LeaseCommand::PruneOutcomes(args) => args.format,
        }
    }
}

pub async fn run(command: LeaseCommand) -> Result<u8> {
    match command {
        LeaseCommand::Inspect(args) => state::inspect(args).await,
        LeaseCommand::List(args) => state::list(args).await,
        LeaseCommand::Slots(args) => state::slots(args).await,
        LeaseCommand::ForceRelease(args) => force_release::force_release(args).await,
        LeaseCommand::History(args) => history::history(args).await,
        LeaseCommand::Prune(args) => history::prune(args).await,
        LeaseCommand::Recover(args) => recover::recover(args).await,
        LeaseCommand::ResetSourceVersion(args) => source_version::reset(args).await,
        LeaseCommand::Retire(args) => retire::retire(args).await,
        LeaseCommand::PruneOutcomes(args) => prune_outcomes::prune_outcomes(args).await,
    }
}

/// The operators' calls, on one connection of the login given. No start-up
/// check: an operator's login holds an operator role, not the service role
/// `Client::verify_contract` expects, and is often the deploy login it would
/// refuse.
async fn admin(args: &ConnectArgs) -> Result<Admin> {
    let mut target = connection_string(args)?;
    target.set_application_name("fencepost");
    let mut config = ClientConfig::new(target);
    config.max_connections(1).call_timeout(OPERATOR_CALL_TIMEOUT);
    Ok(Client::connect_with(config).await?.admin())
}

/// An operator command on `key` whose outcome stayed unknown, with what to
/// do: send it again with its operation id (which the error, and in
/// `--format json` its `operation_id`, carries).
fn unknown_outcome(key: &str, error: fencepost::client::Error) -> anyhow::Error {
    let rerun = error
        .unknown_operation()
        .map(|id| format!("; rerun the same command with --operation-id {id}"))
        .unwrap_or_default();
    anyhow::Error::new(error).context(format!(
        "{key}: no answer came, even to a replay: the command may or may not have applied{rerun}"
    ))
}

/// A server time (UTC by contract) as RFC 3339.
fn utc(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}
