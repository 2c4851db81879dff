//! `lease reset-source-version`: an operator lowers or clears the source
//! version a resource's publications are fenced by (contract v1.4), after the
//! source's versions restarted. The command has an operation id
//! (`--operation-id`, or a fresh one), printed in `--format json`: a call
//! whose reply is lost is replayed with it, and sending the same id again
//! changes nothing.

use anyhow::{Result, bail};
use fencepost::client::Error;
use fencepost::client::admin::ResetSourceVersion;
use serde_json::json;
use uuid::Uuid;

use super::{admin, unknown_outcome};
use crate::cli::opt::{Format, LeaseResetSourceVersionArgs};
use crate::cli::out;
use crate::cli::{EXIT_ATTENTION, EXIT_OK};

pub(super) async fn reset(args: LeaseResetSourceVersionArgs) -> Result<u8> {
    let operation_id = args.operation.operation_id.unwrap_or_else(Uuid::new_v4);
    let answer = match admin(&args.connect)
        .await?
        .reset_source_version_as(&args.key, args.source_version, operation_id)
        .await
    {
        Ok(answer) => answer,
        Err(error @ Error::OperatorOutcomeUnknown { .. }) => return Err(unknown_outcome(&args.key, error)),
        Err(error) => return Err(error.into()),
    };
    let (reset, previous) = match answer {
        ResetSourceVersion::Reset { previous } => (true, previous),
        ResetSourceVersion::NotProvisioned => (false, None),
        other => bail!("{}: this command cannot show the answer {}", args.key, other.name()),
    };
    match args.format {
        Format::Json => out::line(serde_json::to_string_pretty(&json!({
            "key": args.key,
            "outcome": answer.name(),
            "previous_source_version": previous,
            "source_version": if reset { args.source_version } else { None },
            "operation_id": operation_id,
        }))?)?,
        Format::Text if !reset => out::line(format_args!("{}: no fence row (provision it first)", args.key))?,
        Format::Text => {
            let was = previous.map_or("none".to_string(), |v| v.to_string());
            let now = args
                .source_version
                .map_or("cleared".to_string(), |v| format!("now {v}"));
            out::line(format_args!("{}: source version {now} (was {was})", args.key))?;
        }
    }
    Ok(if reset { EXIT_OK } else { EXIT_ATTENTION })
}
