//! `lease retire`: remove a key the application no longer uses, with its
//! publish records and history (contract v1.6). Refused while the key is
//! held. The command has an operation id (`--operation-id`, or a fresh one),
//! printed in `--format json`: a call whose reply is lost is replayed with
//! it, and sending the same id again changes nothing, even after the key was
//! provisioned again.

use anyhow::{Result, bail};
use fencepost::client::Error;
use fencepost::client::admin::{RETIRE_REFUSED_HELD, Retire};
use serde_json::json;
use uuid::Uuid;

use super::{admin, unknown_outcome};
use crate::cli::opt::{Format, LeaseRetireArgs};
use crate::cli::out;
use crate::cli::{EXIT_ATTENTION, EXIT_OK};

pub(super) async fn retire(args: LeaseRetireArgs) -> Result<u8> {
    let operation_id = args.operation.operation_id.unwrap_or_else(Uuid::new_v4);
    let answer = match admin(&args.connect).await?.retire_as(&args.key, operation_id).await {
        Ok(answer) => answer,
        Err(error @ Error::OperatorOutcomeUnknown { .. }) => return Err(unknown_outcome(&args.key, error)),
        Err(error) if error.server_number() == Some(RETIRE_REFUSED_HELD) => bail!(
            "{}: not retired: the key is held by an unexpired lease. Let its holder release it, or fence it out \
             (fencepost lease force-release {}), then retire it",
            args.key,
            args.key
        ),
        Err(error) => return Err(error.into()),
    };
    let generation = match answer {
        Retire::Retired { generation } => Some(generation),
        Retire::NotProvisioned => None,
        other => bail!("{}: this command cannot show the answer {}", args.key, other.name()),
    };
    match args.format {
        Format::Json => out::line(serde_json::to_string_pretty(&json!({
            "key": args.key,
            "outcome": answer.name(),
            "generation": generation,
            "operation_id": operation_id,
        }))?)?,
        Format::Text => match generation {
            Some(generation) => out::line(format_args!(
                "{}: retired at generation {generation}: its fence row, publish records and history are gone; a \
                 key provisioned from now on starts at generation {generation} or above",
                args.key
            ))?,
            None => out::line(format_args!("{}: no fence row, nothing to retire", args.key))?,
        },
    }
    Ok(if generation.is_some() { EXIT_OK } else { EXIT_ATTENTION })
}
