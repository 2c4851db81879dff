//! `fencepost status`.

use anyhow::Result;
use fencepost::client::ContractVersion;
use fencepost::deploy::{
    self, Blocker, MigrationState, Plan, ProcedureState, SecurityDefiner, StatusOptions, StatusReport,
};
use serde::Serialize;

use super::deploy_history::{render_history, render_identity};
use super::opt::{Format, StatusArgs};
use super::rights::render_rights;
use super::{EXIT_ATTENTION, EXIT_OK, connect, out, sources};

pub async fn run(args: StatusArgs) -> Result<u8> {
    let sources = sources(args.source_dir.as_deref())?;
    let (target, mut conn) = connect(&args.connect).await?;
    let options = StatusOptions {
        history: args.history,
        diff: args.diff,
    };
    let report = deploy::status_report(&mut conn, &sources, &options).await?;
    match args.format {
        Format::Json => {
            let document = Document {
                server: target.server(),
                database: target.database(),
                report: &report,
            };
            // Through a `Value`, whose keys sort, as the document's always have.
            out::line(serde_json::to_string_pretty(&serde_json::to_value(&document)?)?)?;
        }
        Format::Text => {
            let where_ = format!("{} / {}", target.server(), target.database());
            out::print(render_text(&where_, &report.plan))?;
            out::print(format_args!("\n{}", render_rights(&report.plan.rights, "")))?;
            for diff in report.diffs.iter().flatten() {
                match &diff.diff {
                    Some(text) => out::print(format_args!("\n{text}"))?,
                    None => out::line(format_args!(
                        "\n{}: this login cannot read its definition on the server",
                        diff.name
                    ))?,
                }
            }
            out::print(render_contract(report.contract_version))?;
            out::print(render_identity(report.identity, report.recorded_identity.as_ref()))?;
            out::print(render_history(&report.history, args.history))?;
            out::print(render_security_definer(&report.security_definer, target.database()))?;
        }
    }
    Ok(if report.is_current() { EXIT_OK } else { EXIT_ATTENTION })
}

/// `status --format json`: where, then the report.
#[derive(Serialize)]
struct Document<'a> {
    server: String,
    database: &'a str,
    #[serde(flatten)]
    report: &'a StatusReport,
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
        // The library may learn a state before this text does.
        _ => "UNKNOWN: a state this command cannot describe; see status --format json",
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
    } else if let Some(Blocker::MissingRights { user, rights }) = plan.blocker() {
        // Named right by right in the rights section below.
        out += &format!(
            "\n{attention} item(s) need attention: `fencepost migrate` stops until {user} is granted the {} right(s) \
             named below\n",
            rights.len()
        );
    } else if let Some(blocker) = plan.blocker() {
        // A history or a procedure migrate refuses: its own words say what
        // to do, where "run migrate" would only lead to the refusal.
        out += &format!(
            "\n{attention} item(s) need attention: `fencepost migrate` stops until this is resolved: {blocker}\n"
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    const FIX: &str = "a PostgreSQL-side administrator runs `fencepost script --target babelfish-postgres --database orders` with psql";

    #[test]
    fn an_unreadable_catalog_is_cannot_verify_with_the_reason_and_the_fix() {
        let definer = SecurityDefiner::CannotVerify {
            reason: "Babelfish's PostgreSQL catalog is not readable over TDS: permission denied".to_owned(),
        };
        assert_eq!(
            render_security_definer(&definer, "orders"),
            format!(
                "\nBabelfish: cannot verify that the fence procedures are SECURITY DEFINER \
                 (Babelfish's PostgreSQL catalog is not readable over TDS: permission denied); {FIX}\n"
            )
        );
        // Never a pass: status exits 1 on it.
        assert!(!definer.is_current());
    }

    #[test]
    fn the_security_definer_lines_name_each_gap_and_say_nothing_off_babelfish() {
        let gap = SecurityDefiner::Babelfish {
            not_security_definer: vec!["fence_api.inspect".to_owned()],
        };
        assert_eq!(
            render_security_definer(&gap, "orders"),
            format!(
                "\nBabelfish: 1 fence procedure(s) are not SECURITY DEFINER, so a fence_service-only login cannot run them \
                 (a T-SQL ALTER PROCEDURE, as migrate deploys, resets it): {FIX}\n  fence_api.inspect\n"
            )
        );
        assert!(!gap.is_current());
        let none = SecurityDefiner::Babelfish {
            not_security_definer: Vec::new(),
        };
        assert_eq!(
            render_security_definer(&none, "orders"),
            "\nBabelfish: every fence procedure is SECURITY DEFINER\n"
        );
        assert!(none.is_current());
        assert_eq!(render_security_definer(&SecurityDefiner::NotNeeded, "orders"), "");
        assert!(SecurityDefiner::NotNeeded.is_current());
    }
}
