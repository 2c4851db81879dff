//! How to run a deploy, and what it tells a person while it runs.

use std::time::Duration;

use crate::deploy::plan::ProcedureState;

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
