//! `fencepost status`.

use anyhow::Result;
use fencepost::client::ContractVersion;
use fencepost::deploy::{self, MigrationState, Plan, ProcedureState, SecurityDefiner};
use serde_json::json;

use super::deploy_history::{history_json, identity_json, render_history, render_identity};
use super::opt::{Format, StatusArgs};
use super::{EXIT_ATTENTION, EXIT_OK, connect, sources};

pub async fn run(args: StatusArgs) -> Result<u8> {
    let sources = sources(args.source_dir.as_deref())?;
    let (target, mut conn) = connect(&args.connect).await?;
    let plan = deploy::status(&mut conn, &sources).await?;
    let definer = deploy::read_security_definer(&mut conn).await?;
    let contract = deploy::read_contract_version(&mut conn).await?;
    // Without --history, the last deployment only.
    let history = deploy::read_history(&mut conn, args.history.unwrap_or(1)).await?;
    let recorded_identity = deploy::read_recorded_identity(&mut conn).await?;
    let identity = fencepost::identity::compare(
        recorded_identity.as_ref().map(|r| r.recovery_fork),
        deploy::read_current_identity(&mut conn).await?,
    );
    let diffs = if args.diff {
        drift_diffs(&mut conn, &sources, &plan).await?
    } else {
        Vec::new()
    };
    let where_ = format!("{} / {}", target.server(), target.database());
    // An engine that shows no identity is not a reason to act; a restore is.
    let current = plan.is_current() && definer_is_current(&definer) && !identity.is_changed();
    match args.format {
        Format::Json => {
            let mut document = json!({
                "server": target.server(),
                "database": target.database(),
                "current": current,
                "contract_version": contract.map(|v| format!("{}.{}", v.major, v.minor)),
                "migrations": plan.migrations,
                "procedures": plan.procedures,
                "deployments": history_json(&history, args.history),
                "database_identity": identity_json(identity, recorded_identity.as_ref()),
            });
            if args.diff {
                document["diffs"] = diffs
                    .iter()
                    .map(|(name, diff)| (name.clone(), json!(diff)))
                    .collect::<serde_json::Map<_, _>>()
                    .into();
            }
            // Only Babelfish needs it; other engines' documents stay as they were.
            if definer != SecurityDefiner::NotNeeded {
                document["babelfish_security_definer"] = serde_json::to_value(&definer)?;
            }
            println!("{}", serde_json::to_string_pretty(&document)?);
        }
        Format::Text => {
            print!("{}", render_text(&where_, &plan));
            for (name, diff) in &diffs {
                match diff {
                    Some(diff) => print!("\n{diff}"),
                    None => println!("\n{name}: this login cannot read its definition on the server"),
                }
            }
            print!("{}", render_contract(contract));
            print!("{}", render_identity(identity, recorded_identity.as_ref()));
            print!("{}", render_history(&history, args.history));
            print!("{}", render_security_definer(&definer, target.database()));
        }
    }
    Ok(if current { EXIT_OK } else { EXIT_ATTENTION })
}

/// Each drifted procedure with its diff from the shipped text, or `None`
/// when the server's definition cannot be read.
async fn drift_diffs(
    conn: &mut fencepost::Connection,
    sources: &fencepost::source::Sources,
    plan: &Plan,
) -> Result<Vec<(String, Option<String>)>> {
    let mut diffs = Vec::new();
    for status in plan.procedures.iter().filter(|p| p.state == ProcedureState::Drifted) {
        let Some(shipped) = sources.procedures().iter().find(|p| p.qualified_name() == status.name) else {
            continue;
        };
        let server = deploy::read_definition(conn, &status.name).await?;
        diffs.push((
            status.name.clone(),
            server.map(|text| deploy::definition_diff(shipped, &text)),
        ));
    }
    Ok(diffs)
}

/// "cannot verify" needs attention too: it is never a pass.
fn definer_is_current(definer: &SecurityDefiner) -> bool {
    match definer {
        SecurityDefiner::Babelfish { not_security_definer } => not_security_definer.is_empty(),
        SecurityDefiner::CannotVerify { .. } => false,
        _ => true,
    }
}

fn render_security_definer(definer: &SecurityDefiner, database: &str) -> String {
    let fix = format!(
        "a PostgreSQL-side administrator runs `fencepost script --target babelfish-postgres --database {database}` with psql"
    );
    match definer {
        SecurityDefiner::Babelfish { not_security_definer } if not_security_definer.is_empty() => {
            "\nBabelfish: every fence procedure is SECURITY DEFINER\n".to_owned()
        }
        SecurityDefiner::Babelfish { not_security_definer } => {
            let mut out = format!(
                "\nBabelfish: {} fence procedure(s) are not SECURITY DEFINER, so a fence_service-only login cannot run them \
                 (a T-SQL ALTER PROCEDURE, as migrate deploys, resets it): {fix}\n",
                not_security_definer.len()
            );
            for name in not_security_definer {
                out += &format!("  {name}\n");
            }
            out
        }
        SecurityDefiner::CannotVerify { reason } => {
            format!("\nBabelfish: cannot verify that the fence procedures are SECURITY DEFINER ({reason}); {fix}\n")
        }
        _ => String::new(),
    }
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

/// The contract line, with what the fencepost that prints it speaks.
fn render_contract(deployed: Option<ContractVersion>) -> String {
    let speaks = fencepost::client::CONTRACT_VERSION;
    match deployed {
        Some(version) => format!("\ncontract {version} deployed (this fencepost speaks {speaks})\n"),
        None => format!("\ncontract: no fence_api.ContractVersion deployed (this fencepost speaks {speaks})\n"),
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
    } else if plan.drift().is_some() {
        out += &format!(
            "\n{attention} item(s) need attention: drifted procedures stop `fencepost migrate`; review them with \
             `fencepost status --diff`, then run `fencepost migrate --overwrite-drift` to restore what ships\n"
        );
    } else {
        out += &format!("\n{attention} item(s) need attention: run `fencepost migrate` to deploy what ships\n");
    }
    out
}
