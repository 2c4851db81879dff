//! `fencepost status`.

use anyhow::Result;
use fencepost::deploy::{self, MigrationState, Plan, ProcedureState};
use serde_json::json;

use super::opt::{Format, StatusArgs};
use super::{EXIT_ATTENTION, EXIT_OK, connect, sources};

pub async fn run(args: StatusArgs) -> Result<u8> {
    let sources = sources(args.source_dir.as_deref())?;
    let (target, mut conn) = connect(&args.connect).await?;
    let plan = deploy::status(&mut conn, &sources).await?;
    let where_ = format!("{} / {}", target.server(), target.database());
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "server": target.server(),
                "database": target.database(),
                "current": plan.is_current(),
                "migrations": plan.migrations,
                "procedures": plan.procedures,
            }))?
        ),
        Format::Text => print!("{}", render_text(&where_, &plan)),
    }
    Ok(if plan.is_current() { EXIT_OK } else { EXIT_ATTENTION })
}

pub fn migration_word(state: MigrationState) -> &'static str {
    match state {
        MigrationState::Applied => "applied",
        MigrationState::Pending => "pending",
        MigrationState::Divergent => "DIVERGENT: the shipped file changed after it was applied",
        MigrationState::NotShipped => "UNKNOWN: applied by a newer fencepost",
    }
}

pub fn procedure_word(state: ProcedureState) -> &'static str {
    match state {
        ProcedureState::Current => "current",
        ProcedureState::Missing => "pending: missing",
        ProcedureState::Changed => "pending: shipped text changed",
        ProcedureState::Drifted => {
            "DRIFTED: not the definition deployed (altered on the server, or unreadable to this login)"
        }
        ProcedureState::Untracked => "pending: not deployed by fencepost",
        ProcedureState::NotShipped => {
            "UNKNOWN: not deployed by fencepost; migrate refuses to run until it is dropped or moved out of the fence schemas"
        }
        ProcedureState::Retired => "pending: retired (fencepost deployed it and no longer ships it; migrate drops it)",
    }
}

fn render_text(where_: &str, plan: &Plan) -> String {
    let width = plan
        .procedures
        .iter()
        .map(|p| p.name.len())
        .chain(plan.migrations.iter().map(|m| m.name.len()))
        .max();
    let width = width.unwrap_or(0) + 2;
    let mut out = format!("{where_}\n\nmigrations\n");
    for m in &plan.migrations {
        out += &format!("  {:width$}{}\n", m.name, migration_word(m.state));
    }
    out += "\nprocedures\n";
    for p in &plan.procedures {
        out += &format!("  {:width$}{}\n", p.name, procedure_word(p.state));
    }
    let attention = plan
        .migrations
        .iter()
        .filter(|m| m.state != MigrationState::Applied)
        .count()
        + plan
            .procedures
            .iter()
            .filter(|p| p.state != ProcedureState::Current)
            .count();
    if attention == 0 {
        out += "\neverything is current\n";
    } else {
        out += &format!("\n{attention} item(s) need attention: run `fencepost migrate` to deploy what ships\n");
    }
    out
}
