//! `fencepost migrate`: bring one database to what ships, under the deploy
//! lock, and say what changed.

use std::time::Duration;

use crate::connection::Connection;

use super::error::DeployError;
use super::executor::{MigrationDriver, MigrationEvent};
use super::history::record_deployment;
use super::identity;
use super::lock;
use super::permissions;
use super::plan::{Plan, ProcedureState};
use super::procedure::ProcedureSource;
use super::report::{Change, Committed, MigrateReport};
use super::session::Session;
use super::sources::Sources;
use super::state::{HISTORY_TABLE, ServerState, read_state};
use super::statements::{begin_procedure_deploy, commit_procedure, drop_retired_procedure};

/// How long a migration's statement waits for a lock unless told otherwise:
/// long enough for the short transactions of fence calls, short enough that
/// traffic queued behind a schema change waits seconds, not minutes.
pub const DEFAULT_MIGRATION_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// How to run a deploy.
#[derive(Clone, Debug)]
pub struct MigrateOptions {
    /// How long to wait for another deployment to finish.
    pub lock_timeout: Duration,
    /// How long each statement of a migration waits for a lock (`SET
    /// LOCK_TIMEOUT`) before the migration fails and is rolled back: a
    /// caller's open transaction on a fence table then fails the deploy
    /// instead of queueing every fence call behind the migration's wait.
    pub migration_lock_timeout: Duration,
    /// Show the plan and change nothing.
    pub dry_run: bool,
    /// Redeploy shipped procedures altered on the server (drift) instead of
    /// stopping.
    pub overwrite_drift: bool,
}

impl Default for MigrateOptions {
    fn default() -> Self {
        Self {
            lock_timeout: Duration::from_secs(60),
            migration_lock_timeout: DEFAULT_MIGRATION_LOCK_TIMEOUT,
            dry_run: false,
            overwrite_drift: false,
        }
    }
}

/// Something worth telling a person while a deploy runs.
#[derive(Clone, Debug)]
pub enum Progress {
    /// Waiting for the deploy lock.
    WaitingForLock,
    /// A migration started.
    MigrationStarted(String),
    /// A migration committed after this many seconds.
    MigrationCommitted(String, f64),
    /// A procedure was deployed.
    ProcedureDeployed(String, ProcedureState),
    /// A procedure fencepost had deployed and no longer ships was dropped.
    ProcedureDropped(String),
    /// A permission script was applied.
    PermissionsApplied(String),
}

/// Deploys `sources` to the database `conn` is connected to.
pub async fn migrate(
    conn: &mut Connection,
    sources: &Sources,
    options: &MigrateOptions,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<MigrateReport, DeployError> {
    let mut session = Session::new(conn);
    let shipped = shipped_names(sources);
    if options.dry_run {
        let plan = Plan::new(sources, &read_state(&mut session, &shipped).await?);
        return Ok(MigrateReport {
            plan,
            changes: Vec::new(),
            permissions_applied: Vec::new(),
            dry_run: true,
            lock_wait_seconds: 0.0,
            round_trips: session.round_trips(),
            deployment_id: None,
            database_identity: None,
            warnings: Vec::new(),
        });
    }

    on_progress(Progress::WaitingForLock);
    let (waited, state) = lock::take_reading_state(&mut session, options.lock_timeout, &shipped).await?;
    let mut done = Committed::default();
    let plan = match deploy_locked(&mut session, sources, options, &shipped, state, &mut done, on_progress).await {
        Ok(plan) => plan,
        Err(error) => {
            // The first error is the one worth reporting.
            let _ = lock::release(&mut session).await;
            return Err(stopped_part_way(done, error));
        }
    };
    // The permission scripts, the record of the deployment, then the release
    // of the lock, in one request.
    let record = record_deployment(
        &count_of(&done.changes, |c| matches!(c, Change::Migration { .. })),
        &count_of(&done.changes, |c| matches!(c, Change::Procedure { .. })),
    );
    let run = permissions::apply_and_release(&mut session, sources.permissions(), &record).await;
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
        round_trips: session.round_trips(),
        deployment_id: run.recorded.and_then(|r| r.id),
        database_identity,
        warnings: MigrateReport::identity_warnings(database_identity),
    })
}

/// How many of `changes` are of one kind, as a T-SQL int literal.
fn count_of(changes: &[Change], kind: impl Fn(&Change) -> bool) -> String {
    changes.iter().filter(|c| kind(c)).count().to_string()
}

/// The names of the shipped procedures, `schema.name`: the definitions the
/// state query hashes.
fn shipped_names(sources: &Sources) -> Vec<String> {
    sources
        .procedures()
        .iter()
        .map(ProcedureSource::qualified_name)
        .collect()
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
    session: &mut Session<'_>,
    sources: &Sources,
    options: &MigrateOptions,
    shipped: &[String],
    state: ServerState,
    done: &mut Committed,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<Plan, DeployError> {
    let plan = Plan::new(sources, &state);
    if let Some(blocker) = plan.blocker() {
        return Err(blocker);
    }
    // Judged before migrations run: one of them may alter a procedure itself.
    if !options.overwrite_drift
        && let Some(drift) = plan.drift()
    {
        return Err(drift);
    }

    let mut after_migrations = plan.clone();
    if plan.pending_migrations().next().is_some() {
        apply_migrations(session, sources, options, done, on_progress).await?;
        // A migration may have dropped or altered a shipped procedure (to
        // change a type it depends on): plan procedures from what is there now.
        after_migrations = Plan::new(sources, &read_state(session, shipped).await?);
    }

    for status in after_migrations.procedures_to_deploy() {
        let Some(procedure) = sources.procedures().iter().find(|p| p.qualified_name() == status.name) else {
            continue;
        };
        deploy_procedure(session, procedure).await?;
        on_progress(Progress::ProcedureDeployed(status.name.clone(), status.state));
        done.changes.push(Change::Procedure {
            name: status.name.clone(),
            was: status.state,
        });
    }

    for status in after_migrations.procedures_to_drop() {
        session
            .run(&drop_retired_procedure(&status.name))
            .await
            .map_err(DeployError::server(format!(
                "dropping retired procedure {}",
                status.name
            )))?;
        on_progress(Progress::ProcedureDropped(status.name.clone()));
        done.changes.push(Change::RetiredProcedure {
            name: status.name.clone(),
        });
    }

    Ok(plan)
}

/// Runs refinery over the shipped migrations, noting each that commits.
async fn apply_migrations(
    session: &mut Session<'_>,
    sources: &Sources,
    options: &MigrateOptions,
    done: &mut Committed,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<(), DeployError> {
    let mut forward = |event: MigrationEvent| match event {
        MigrationEvent::Started(name) => on_progress(Progress::MigrationStarted(name)),
        MigrationEvent::Committed { name, seconds } => on_progress(Progress::MigrationCommitted(name, seconds)),
    };
    let migrations: Vec<refinery::Migration> = sources.migrations().iter().map(|m| m.migration().clone()).collect();
    let mut driver = MigrationDriver::new(
        session,
        sources.migrations(),
        options.migration_lock_timeout,
        &mut forward,
    );
    let mut runner = refinery::Runner::new(&migrations)
        .set_abort_divergent(true)
        .set_abort_missing(true);
    runner.set_migration_table_name(HISTORY_TABLE);
    let result = runner.run_async(&mut driver).await;
    done.changes.extend(
        driver
            .applied()
            .iter()
            .map(|name| Change::Migration { name: name.clone() }),
    );
    result.map(drop).map_err(|error| {
        driver.take_failure().unwrap_or_else(|| DeployError::Server {
            context: "applying migrations".into(),
            source: tiberius::error::Error::Protocol(error.to_string().into()),
        })
    })
}

/// Creates (as a stub, when `OBJECT_ID` finds none) and alters one procedure,
/// and journals it, in one transaction: a failure leaves the previous
/// definition in place.
async fn deploy_procedure(session: &mut Session<'_>, procedure: &ProcedureSource) -> Result<(), DeployError> {
    let file = format!("procedures/{}", procedure.file());
    let steps = async {
        session.run_one(&file, &begin_procedure_deploy(procedure)).await?;
        session.run_one(&file, &procedure.alter_text()).await?;
        session.run_one(&file, &commit_procedure(procedure)).await
    };
    let result = steps.await;
    if result.is_err() {
        session.roll_back().await;
    }
    result
}
