//! `lease reset-source-version`: an operator lowers or clears the source
//! version a resource's publications are fenced by (contract v1.4), after the
//! source's versions restarted.

use anyhow::Result;
use serde_json::json;

use super::{call, get, outcome};
use crate::cli::opt::{Format, LeaseResetSourceVersionArgs};
use crate::cli::{EXIT_ATTENTION, EXIT_OK, connect};

pub(super) async fn reset(args: LeaseResetSourceVersionArgs) -> Result<u8> {
    let (_, mut conn) = connect(&args.connect).await?;
    let rows = call(
        &mut conn,
        "EXEC fence_admin.ResetSourceVersion @ResourceKey = @P1, @SourceVersion = @P2",
        &[&args.key.as_str(), &args.source_version],
    )
    .await?;
    let row = rows.first();
    let answer = row.map(outcome).unwrap_or_default();
    let previous: Option<i64> = row.and_then(|r| get(r, "PreviousSourceVersion"));
    let reset = answer == "Reset";
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "key": args.key,
                "outcome": answer,
                "previous_source_version": previous,
                "source_version": if reset { args.source_version } else { None },
            }))?
        ),
        Format::Text if !reset => println!("{}: no fence row (provision it first)", args.key),
        Format::Text => {
            let was = previous.map_or("none".to_string(), |v| v.to_string());
            let now = args
                .source_version
                .map_or("cleared".to_string(), |v| format!("now {v}"));
            println!("{}: source version {now} (was {was})", args.key);
        }
    }
    Ok(if reset { EXIT_OK } else { EXIT_ATTENTION })
}
