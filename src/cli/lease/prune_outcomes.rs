//! `lease prune-outcomes`: delete the outcome records of publishes and
//! operator commands older than the replay window (contract v1.6).

use anyhow::{Result, bail};
use fencepost::client::admin::PruneOutcomes;
use serde_json::json;

use super::{admin, utc};
use crate::cli::EXIT_OK;
use crate::cli::opt::{Format, LeasePruneOutcomesArgs};
use crate::cli::out;

pub(super) async fn prune_outcomes(args: LeasePruneOutcomesArgs) -> Result<u8> {
    // 1 to 36500: the flag's parser bounds it.
    let answer = admin(&args.connect)
        .await?
        .prune_outcomes(args.older_than.unsigned_abs())
        .await?;
    let (publishes, commands, before) = match answer {
        PruneOutcomes::Pruned {
            publishes,
            commands,
            recorded_before,
        } => (publishes, commands, utc(recorded_before)),
        other => bail!("this command cannot show the answer {}", other.name()),
    };
    match args.format {
        Format::Json => out::line(serde_json::to_string_pretty(&json!({
            "outcome": answer.name(),
            "publishes_deleted": publishes,
            "commands_deleted": commands,
            "recorded_before_utc": before,
        }))?)?,
        Format::Text => out::line(format_args!(
            "pruned {publishes} publish record(s) and {commands} operator command record(s) recorded before \
             {before}: a replay of one of them is now judged afresh (see the contract's replay window)"
        ))?,
    }
    Ok(EXIT_OK)
}
