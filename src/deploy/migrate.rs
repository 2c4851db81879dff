//! `fencepost migrate`: bring one database to what ships, under the deploy
//! lock, and say what changed.

use std::time::Duration;

use serde::Serialize;

use crate::connection::Connection;

use super::error::DeployError;
use super::executor::{MigrationDriver, MigrationEvent};
use super::lock;
use super::plan::{Plan, ProcedureState};
use super::procedure::ProcedureSource;
use super::session::Session;
use super::sources::Sources;
use super::state::{HISTORY_TABLE, read_state};
use super::statements::{begin_procedure_deploy, record_procedure};

/// How to run a deploy.
#[derive(Clone, Debug)]
pub struct MigrateOptions {
    /// How long to wait for another deployment to finish.
    pub lock_timeout: Duration,
    /// Show the plan and change nothing.
    pub dry_run: bool,
}

impl Default for MigrateOptions {
    fn default() -> Self {
        Self {
            lock_timeout: Duration::from_secs(60),
            dry_run: false,
        }
    }
}

/// One thing a deploy changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A migration was applied.
    Migration {
        /// e.g. `V1__lease_tables`.
        name: String,
    },
    /// A procedure was created or altered to the shipped text.
    Procedure {
        /// `schema.name`.
        name: String,
        /// Why it was deployed: missing, changed, drifted or untracked.
        was: ProcedureState,
    },
}

/// What a deploy found and did.
#[derive(Clone, Debug, Serialize)]
pub struct MigrateReport {
    /// The plan, as found before any change.
    pub plan: Plan,
    /// What was changed, in order; empty for a dry run or an up-to-date database.
    pub changes: Vec<Change>,
    /// Permission scripts re-applied (they are idempotent); empty for a dry run.
    pub permissions_applied: Vec<String>,
    /// True when nothing was changed because it was a dry run.
    pub dry_run: bool,
    /// How long the deploy waited for another deployment's lock.
    pub lock_wait_seconds: f64,
    /// Round trips made to the server, lock included.
    pub round_trips: usize,
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
    if options.dry_run {
        let plan = Plan::new(sources, &read_state(&mut session).await?);
        return Ok(MigrateReport {
            plan,
            changes: Vec::new(),
            permissions_applied: Vec::new(),
            dry_run: true,
            lock_wait_seconds: 0.0,
            round_trips: session.round_trips(),
        });
    }

    on_progress(Progress::WaitingForLock);
    let waited = lock::take(&mut session, options.lock_timeout).await?;
    let outcome = deploy_locked(&mut session, sources, on_progress).await;
    let released = lock::release(&mut session).await;
    let (plan, changes, permissions_applied) = outcome?;
    released?;
    Ok(MigrateReport {
        plan,
        changes,
        permissions_applied,
        dry_run: false,
        lock_wait_seconds: waited.as_secs_f64(),
        round_trips: session.round_trips(),
    })
}

type Deployed = (Plan, Vec<Change>, Vec<String>);

async fn deploy_locked(
    session: &mut Session<'_>,
    sources: &Sources,
    on_progress: &mut (dyn FnMut(Progress) + Send),
) -> Result<Deployed, DeployError> {
    let state = read_state(session).await?;
    let plan = Plan::new(sources, &state);
    if let Some(blocker) = plan.blocker() {
        return Err(blocker);
    }
    let mut changes = Vec::new();

    if plan.pending_migrations().next().is_some() {
        let mut forward = |event: MigrationEvent| match event {
            MigrationEvent::Started(name) => on_progress(Progress::MigrationStarted(name)),
            MigrationEvent::Committed { name, seconds } => on_progress(Progress::MigrationCommitted(name, seconds)),
        };
        let migrations: Vec<refinery::Migration> = sources.migrations().iter().map(|m| m.migration().clone()).collect();
        let mut driver = MigrationDriver::new(session, sources.migrations(), &mut forward);
        let mut runner = refinery::Runner::new(&migrations)
            .set_abort_divergent(true)
            .set_abort_missing(true);
        runner.set_migration_table_name(HISTORY_TABLE);
        let result = runner.run_async(&mut driver).await;
        changes.extend(
            driver
                .applied()
                .iter()
                .map(|name| Change::Migration { name: name.clone() }),
        );
        if let Err(error) = result {
            return Err(driver.take_failure().unwrap_or_else(|| DeployError::Server {
                context: "applying migrations".into(),
                source: tiberius::error::Error::Protocol(error.to_string().into()),
            }));
        }
    }

    for status in plan.procedures_to_deploy() {
        let Some(procedure) = sources.procedures().iter().find(|p| p.qualified_name() == status.name) else {
            continue;
        };
        deploy_procedure(session, procedure).await?;
        on_progress(Progress::ProcedureDeployed(status.name.clone(), status.state));
        changes.push(Change::Procedure {
            name: status.name.clone(),
            was: status.state,
        });
    }

    let mut permissions_applied = Vec::new();
    for script in sources.permissions() {
        let file = format!("permissions/{}", script.file());
        session.run_script(&file, script.batches()).await?;
        on_progress(Progress::PermissionsApplied(script.file().to_string()));
        permissions_applied.push(script.file().to_string());
    }
    Ok((plan, changes, permissions_applied))
}

/// Creates (as a stub, when `OBJECT_ID` finds none) and alters one procedure,
/// and journals it, in one transaction: a failure leaves the previous
/// definition in place.
async fn deploy_procedure(session: &mut Session<'_>, procedure: &ProcedureSource) -> Result<(), DeployError> {
    let file = format!("procedures/{}", procedure.file());
    let steps = async {
        session.run_one(&file, &begin_procedure_deploy(procedure)).await?;
        session.run_one(&file, &procedure.alter_text()).await?;
        session.run_one(&file, &record_procedure(procedure)).await?;
        session
            .run("COMMIT TRANSACTION;")
            .await
            .map(drop)
            .map_err(DeployError::server(format!(
                "committing {}",
                procedure.qualified_name()
            )))
    };
    let result = steps.await;
    if result.is_err() {
        session.roll_back().await;
    }
    result
}
