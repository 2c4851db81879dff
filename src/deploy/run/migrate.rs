//! `fencepost migrate`: bring one database to what ships, under the deploy
//! lock, and say what changed. The order of the steps, the re-planning after
//! migrations and what a failure leaves are decided here, over a
//! [`Target`], so they are tested without a server.

use std::time::Instant;

use super::options::{MigrateOptions, Progress};
use super::read::shipped_names;
use super::session::Session;
use super::target::Target;
use crate::connection::Connection;
use crate::deploy::error::DeployError;
use crate::deploy::plan::Plan;
use crate::deploy::report::{Change, Committed, MigrateReport};
use crate::deploy::sql::record_deployment;
use crate::deploy::state::ServerState;
use crate::identity;
use crate::source::Sources;

/// Deploys `sources` to the database `conn` is connected to.
pub async fn migrate(
    conn: &mut Connection,
    sources: &Sources,
    options: &MigrateOptions,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<MigrateReport, DeployError> {
    deploy(&mut Session::new(conn), sources, options, on_progress).await
}

/// The plan for `sources` from the state `target` holds now, read without
/// the deploy lock: what `status` and a dry run show.
pub(crate) async fn read_plan(target: &mut impl Target, sources: &Sources) -> Result<Plan, DeployError> {
    Ok(Plan::new(sources, &target.read_state(&shipped_names(sources)).await?))
}

/// Deploys `sources` to `target`: under the lock, migrations, then the
/// procedures as the migrations left them, then, in one request, the
/// permission scripts, the record of the deployment and the release.
async fn deploy(
    target: &mut impl Target,
    sources: &Sources,
    options: &MigrateOptions,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<MigrateReport, DeployError> {
    if options.dry_run {
        let plan = read_plan(target, sources).await?;
        return Ok(MigrateReport {
            plan,
            changes: Vec::new(),
            permissions_applied: Vec::new(),
            dry_run: true,
            lock_wait_seconds: 0.0,
            round_trips: target.round_trips(),
            deployment_id: None,
            database_identity: None,
            warnings: Vec::new(),
        });
    }

    let shipped = shipped_names(sources);
    on_progress(Progress::WaitingForLock);
    let (waited, state) = target.lock_and_read_state(options.lock_timeout, &shipped).await?;
    let mut done = Committed::default();
    let plan = match deploy_locked(target, sources, options, &shipped, state, &mut done, on_progress).await {
        Ok(plan) => plan,
        Err(error) => {
            // The first error is the one worth reporting.
            let _ = target.release().await;
            return Err(stopped_part_way(done, error));
        }
    };
    // The permission scripts, the record of the deployment, then the release
    // of the lock, in one request.
    let record = record_deployment(
        &count_of(&done.changes, |c| matches!(c, Change::Migration { .. })),
        &count_of(&done.changes, |c| matches!(c, Change::Procedure { .. })),
    );
    let run = target
        .apply_permissions_and_release(sources.permissions(), &record)
        .await;
    for script in &sources.permissions()[..run.applied] {
        on_progress(Progress::PermissionsApplied(script.file().to_string()));
        done.permissions_applied.push(script.file().to_string());
    }
    if let Some(error) = run.error {
        return Err(stopped_part_way(done, error));
    }
    let database_identity = run
        .recorded
        .map(|r| identity::compare(r.recorded_identity, r.current_identity));
    Ok(MigrateReport {
        plan,
        changes: done.changes,
        permissions_applied: done.permissions_applied,
        dry_run: false,
        lock_wait_seconds: waited.as_secs_f64(),
        round_trips: target.round_trips(),
        deployment_id: run.recorded.and_then(|r| r.id),
        database_identity,
        warnings: MigrateReport::identity_warnings(database_identity),
    })
}

/// How many of `changes` are of one kind, as a T-SQL int literal.
fn count_of(changes: &[Change], kind: impl Fn(&Change) -> bool) -> String {
    changes.iter().filter(|c| kind(c)).count().to_string()
}

/// `error`, wrapped with what committed before it when anything did.
fn stopped_part_way(done: Committed, error: DeployError) -> DeployError {
    let committed = Committed::new(done.changes, done.permissions_applied);
    if committed.is_empty() {
        error
    } else {
        DeployError::Incomplete {
            committed: Box::new(committed),
            cause: Box::new(error),
        }
    }
}

/// Applies migrations, then procedures, noting in `done` each change as it
/// commits; returns the plan as found (from `state`, read under the lock)
/// before any change.
async fn deploy_locked(
    target: &mut impl Target,
    sources: &Sources,
    options: &MigrateOptions,
    shipped: &[String],
    state: ServerState,
    done: &mut Committed,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<Plan, DeployError> {
    let plan = Plan::new(sources, &state);
    // Drift is judged before migrations run: one of them may alter a
    // procedure itself.
    if let Some(blocker) = plan.would_stop(options.overwrite_drift) {
        return Err(DeployError::Blocked(blocker));
    }

    let mut after_migrations = plan.clone();
    if plan.pending_migrations().next().is_some() {
        apply_migrations(target, sources, &plan, options, done, on_progress).await?;
        // A migration may have dropped or altered a shipped procedure (to
        // change a type it depends on): plan procedures from what is there now.
        after_migrations = Plan::new(sources, &target.read_state(shipped).await?);
    }

    for status in after_migrations.procedures_to_deploy() {
        let Some(procedure) = sources.procedures().iter().find(|p| p.qualified_name() == status.name) else {
            continue;
        };
        target.deploy_procedure(procedure).await?;
        on_progress(Progress::ProcedureDeployed(status.name.clone(), status.state));
        done.changes.push(Change::Procedure {
            name: status.name.clone(),
            was: status.state,
        });
    }

    for status in after_migrations.procedures_to_drop() {
        target.drop_procedure(&status.name).await?;
        on_progress(Progress::ProcedureDropped(status.name.clone()));
        done.changes.push(Change::RetiredProcedure {
            name: status.name.clone(),
        });
    }

    Ok(plan)
}

/// Applies the plan's pending migrations in version order, noting each that
/// commits. The plan already refused what refinery's runner would (a
/// divergent, unknown or out-of-order migration), from the history read
/// under the lock, so nothing is read again here.
async fn apply_migrations(
    target: &mut impl Target,
    sources: &Sources,
    plan: &Plan,
    options: &MigrateOptions,
    done: &mut Committed,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<(), DeployError> {
    target.create_history().await?;
    for pending in plan.pending_migrations() {
        let Some(migration) = sources.migrations().iter().find(|m| m.version() == pending.version) else {
            continue;
        };
        on_progress(Progress::MigrationStarted(migration.name()));
        let started = Instant::now();
        target
            .apply_migration(migration, options.migration_lock_timeout)
            .await?;
        on_progress(Progress::MigrationCommitted(
            migration.name(),
            started.elapsed().as_secs_f64(),
        ));
        done.changes.push(Change::Migration { name: migration.name() });
    }
    Ok(())
}

