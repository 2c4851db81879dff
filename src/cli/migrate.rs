//! `fencepost migrate`.

use std::time::Duration;

use anyhow::Result;
use fencepost::deploy::{
    self, Blocker, Change, Grant, GrantOutcome, MigrateOptions, MigrateReport, MigrationState, ProcedureState, Progress,
};
use serde::Serialize;

use super::opt::{Format, MigrateArgs};
use super::rights::render_rights;
use super::status::procedure_word;
use super::{EXIT_ATTENTION, EXIT_ERROR, EXIT_OK, connect, environment_grants, out, sources};

pub async fn run(args: MigrateArgs) -> Result<u8> {
    let sources = sources(args.source.source_dir.as_deref())?;
    let (target, mut conn) = connect(&args.connect).await?;
    let mut options = MigrateOptions::default();
    options
        .lock_timeout(Duration::from_secs(args.lock_timeout))
        .migration_lock_timeout(Duration::from_secs(args.migration_lock_timeout))
        .dry_run(args.dry_run)
        .overwrite_drift(args.overwrite_drift);
    let mut progress = |event: Progress| super::progress(format_args!("{}", describe(&event)));
    // A failure is rendered by the caller, JSON included, with what committed.
    // Flags override the environment's grants.
    let grants = if args.grants.is_empty() {
        environment_grants(&args.connect)?
    } else {
        args.grants.clone()
    };
    deploy::refuse_deploying_user(&mut conn, &grants).await?;
    let report = deploy::migrate(&mut conn, &sources, &options, &mut progress).await?;
    // After the deploy, so the roles exist; a dry run adds nobody.
    let granted = if report.dry_run {
        Vec::new()
    } else {
        deploy::ensure_members(&mut conn, &grants).await?
    };
    match args.format {
        Format::Json => {
            let document = Document {
                report: &report,
                would_grant: report.dry_run.then_some(&grants[..]),
                grants: (!report.dry_run).then_some(&granted[..]),
            };
            // Through a `Value`, whose keys sort, as the document's always have.
            out::line(serde_json::to_string_pretty(&serde_json::to_value(&document)?)?)?;
        }
        Format::Text => {
            out::print(summary(
                &format!("{} / {}", target.server(), target.database()),
                &report,
            ))?;
            out::print(grants_text(report.dry_run, &grants, &granted))?;
        }
    }
    Ok(exit_status(&report))
}

/// `migrate --format json`: the report, and the memberships a dry run would
/// ensure or a deploy ensured.
#[derive(Serialize)]
struct Document<'a> {
    #[serde(flatten)]
    report: &'a MigrateReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    would_grant: Option<&'a [Grant]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    grants: Option<&'a [GrantOutcome]>,
}

/// One line per membership: added, already there, or (dry run) to ensure.
fn grants_text(dry_run: bool, grants: &[Grant], granted: &[GrantOutcome]) -> String {
    if dry_run {
        return grants
            .iter()
            .map(|g| format!("  would add {} to {} (unless a member already)\n", g.member, g.role))
            .collect();
    }
    granted
        .iter()
        .map(|g| match g.added {
            true => format!("added {} to {}\n", g.member, g.role),
            false => format!("{} is already a member of {}\n", g.member, g.role),
        })
        .collect()
}

/// A deploy exits 0. A dry run exits 0 when there is nothing to do, 1 when
/// changes are pending, 2 when a deploy would stop.
fn exit_status(report: &MigrateReport) -> u8 {
    if !report.dry_run {
        EXIT_OK
    } else if report.would_stop.is_some() {
        EXIT_ERROR
    } else if report.plan.is_current() {
        EXIT_OK
    } else {
        EXIT_ATTENTION
    }
}

fn describe(event: &Progress) -> String {
    match event {
        Progress::WaitingForLock => "taking the deploy lock".into(),
        Progress::MigrationStarted { name } => format!("applying migration {name}"),
        Progress::MigrationCommitted { name, seconds } => {
            format!("applied migration {name} ({seconds:.1}s)")
        }
        Progress::ProcedureDeployed { name, was } => {
            format!("deployed procedure {name} (was {})", procedure_word(*was))
        }
        Progress::ProcedureDropped { name } => format!("dropped retired procedure {name}"),
        Progress::PermissionsApplied { file } => format!("applied permissions/{file}"),
        // An event this binary does not know yet is not worth a line.
        _ => String::new(),
    }
}

fn summary(where_: &str, report: &MigrateReport) -> String {
    let plan = &report.plan;
    if report.dry_run {
        let mut out = format!("dry run against {where_}: nothing was changed\n");
        let pending: Vec<String> = plan
            .pending_migrations()
            .map(|m| match m.cost {
                Some(cost) => format!("  would apply migration {}: {cost}\n", m.name),
                None => format!("  would apply migration {}\n", m.name),
            })
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
        out += &render_rights(&plan.rights, "  ");
        match &report.would_stop {
            // Named above, right by right.
            Some(Blocker::MissingRights { user, rights }) => {
                out += &format!(
                    "  a deploy would stop: {user} lacks {} right(s) it needs (above)\n",
                    rights.len()
                );
            }
            Some(reason) => out += &format!("  a deploy would stop: {reason}\n"),
            None => {}
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
                other => format!("  changed {other}\n"),
            };
        }
    }
    out += &format!(
        "re-applied {} permission script(s) (idempotent); {} round trip(s)\n",
        report.permissions_applied.len(),
        report.round_trips
    );
    if let Some(id) = report.deployment_id {
        out += &format!("recorded as deployment {id} in fence.Deployment\n");
    }
    for warning in &report.warnings {
        out += &format!("warning: {warning}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use fencepost::deploy::{MigrationStatus, Plan, ProcedureStatus};

    use super::*;

    fn report(procedures: &[(&str, ProcedureState)]) -> MigrateReport {
        MigrateReport {
            plan: Plan {
                cannot_give_roles_to_dbo: None,
                schema_not_owned_by_dbo: None,
                rights: Default::default(),
                migrations: vec![MigrationStatus {
                    version: 1,
                    name: "V1__a".into(),
                    state: MigrationState::Applied,
                    cost: None,
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
            deployment_id: Some(1),
            database_identity: None,
            warnings: vec![],
            would_stop: None,
        }
    }

    #[test]
    fn the_summary_names_the_recorded_deployment_and_warns_of_a_changed_identity() {
        let mut changed = report(&[]);
        let identity = Some(fencepost::identity::compare(
            Some(uuid::Uuid::from_u128(1)),
            Some(uuid::Uuid::from_u128(2)),
        ));
        changed.warnings = MigrateReport::identity_warnings(identity);
        let text = summary("db", &changed);
        assert!(
            text.contains("recorded as deployment 1 in fence.Deployment\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "warning: the database was restored or failed over since its identity was recorded: run \
                 `fencepost lease recover`\n"
            ),
            "{text}"
        );
        assert!(!summary("db", &report(&[])).contains("warning"));
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
