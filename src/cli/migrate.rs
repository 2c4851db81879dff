//! `fencepost migrate`.

use std::time::Duration;

use anyhow::Result;
use fencepost::deploy::{self, Change, MigrateOptions, MigrateReport, Progress};

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
    let report = deploy::migrate(&mut conn, &sources, &options, &mut progress).await?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print!(
            "{}",
            summary(&format!("{} / {}", target.server(), target.database()), &report)
        ),
    }
    Ok(EXIT_OK)
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
        out += &format!(
            "nothing changed on {where_}: {} migration(s) applied, {} procedure(s) current\n",
            plan.migrations.len(),
            plan.procedures.len()
        );
    } else {
        out += &format!("deployed to {where_}:\n");
        for change in &report.changes {
            out += &match change {
                Change::Migration { name } => format!("  applied migration {name}\n"),
                Change::Procedure { name, was } => {
                    format!("  deployed procedure {name} (was {})\n", procedure_word(*was))
                }
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
