//! `fencepost migrate`.

use std::time::Duration;

use anyhow::Result;
use fencepost::deploy::{
    self, Change, Committed, DeployError, MigrateOptions, MigrateReport, MigrationState, ProcedureState, Progress,
};
use serde_json::json;

use super::opt::{Format, MigrateArgs};
use super::status::procedure_word;
use super::{EXIT_OK, connect, sources};

pub async fn run(args: MigrateArgs) -> Result<u8> {
    let sources = sources(args.source.source_dir.as_deref())?;
    let (target, mut conn) = connect(&args.connect).await?;
    let options = MigrateOptions {
        lock_timeout: Duration::from_secs(args.lock_timeout),
        dry_run: args.dry_run,
    };
    let mut progress = |event: Progress| eprintln!("{}", describe(&event));
    let report = match deploy::migrate(&mut conn, &sources, &options, &mut progress).await {
        Ok(report) => report,
        Err(error) => {
            if args.format == Format::Json {
                println!("{}", serde_json::to_string_pretty(&failure_json(&error))?);
            }
            return Err(error.into());
        }
    };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print!(
            "{}",
            summary(&format!("{} / {}", target.server(), target.database()), &report)
        ),
    }
    Ok(EXIT_OK)
}

/// The JSON document of a failed deploy: the error and what it committed
/// (which stays), so a pipeline can tell what the database now holds.
fn failure_json(error: &DeployError) -> serde_json::Value {
    let committed = match error {
        DeployError::Incomplete { committed, .. } => committed.as_ref().clone(),
        _ => Committed::default(),
    };
    json!({
        "completed": false,
        "error": with_causes(error),
        "committed": committed,
    })
}

/// The error and its causes on one line, as `{:#}` prints them on stderr.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        line += &format!(": {next}");
        cause = next.source();
    }
    line
}

fn describe(event: &Progress) -> String {
    match event {
        Progress::WaitingForLock => "taking the deploy lock".into(),
        Progress::MigrationStarted(name) => format!("applying migration {name}"),
        Progress::MigrationCommitted(name, seconds) => {
            format!("applied migration {name} ({seconds:.1}s)")
        }
        Progress::ProcedureDeployed(name, was) => {
            format!("deployed procedure {name} (was {})", procedure_word(*was))
        }
        Progress::ProcedureDropped(name) => format!("dropped retired procedure {name}"),
        Progress::PermissionsApplied(file) => format!("applied permissions/{file}"),
    }
}

fn summary(where_: &str, report: &MigrateReport) -> String {
    let plan = &report.plan;
    if report.dry_run {
        let mut out = format!("dry run against {where_}: nothing was changed\n");
        let pending: Vec<String> = plan
            .pending_migrations()
            .map(|m| format!("  would apply migration {}\n", m.name))
            .chain(
                plan.procedures_to_deploy()
                    .map(|p| format!("  would deploy procedure {} ({})\n", p.name, procedure_word(p.state))),
            )
            .chain(
                plan.procedures_to_drop()
                    .map(|p| format!("  would drop retired procedure {}\n", p.name)),
            )
            .collect();
        if pending.is_empty() {
            out += "  the database is current; a deploy would only re-apply the permission scripts\n";
        }
        out += &pending.concat();
        for file in &plan.permissions {
            out += &format!("  would re-apply permissions/{file}\n");
        }
        if let Some(blocker) = plan.blocker() {
            out += &format!("  a deploy would stop: {blocker}\n");
        }
        return out;
    }
    let mut out = String::new();
    if report.changes.is_empty() {
        let applied = plan
            .migrations
            .iter()
            .filter(|m| m.state == MigrationState::Applied)
            .count();
        let current = plan
            .procedures
            .iter()
            .filter(|p| p.state == ProcedureState::Current)
            .count();
        out +=
            &format!("nothing changed on {where_}: {applied} migration(s) applied, {current} procedure(s) current\n");
    } else {
        out += &format!("deployed to {where_}:\n");
        for change in &report.changes {
            out += &match change {
                Change::Migration { name } => format!("  applied migration {name}\n"),
                Change::Procedure { name, was } => {
                    format!("  deployed procedure {name} (was {})\n", procedure_word(*was))
                }
                Change::RetiredProcedure { name } => format!("  dropped retired procedure {name}\n"),
            };
        }
    }
    out += &format!(
        "re-applied {} permission script(s) (idempotent); {} round trip(s)\n",
        report.permissions_applied.len(),
        report.round_trips
    );
    out
}

#[cfg(test)]
mod tests {
    use fencepost::deploy::{MigrationStatus, Plan, ProcedureStatus};

    use super::*;

    fn report(procedures: &[(&str, ProcedureState)]) -> MigrateReport {
        MigrateReport {
            plan: Plan {
                migrations: vec![MigrationStatus {
                    version: 1,
                    name: "V1__a".into(),
                    state: MigrationState::Applied,
                }],
                procedures: procedures
                    .iter()
                    .map(|(name, state)| ProcedureStatus {
                        name: (*name).into(),
                        state: *state,
                    })
                    .collect(),
                permissions: vec![],
            },
            changes: vec![],
            permissions_applied: vec![],
            dry_run: false,
            lock_wait_seconds: 0.0,
            round_trips: 3,
        }
    }

    #[test]
    fn the_summary_counts_as_current_only_procedures_that_are_current() {
        let text = summary(
            "db",
            &report(&[
                ("fence_api.A", ProcedureState::Current),
                ("fence_api.Stray", ProcedureState::NotShipped),
            ]),
        );
        assert!(
            text.contains("1 migration(s) applied, 1 procedure(s) current"),
            "{text}"
        );
    }
}
