//! How to run a deploy, and what it tells a person while it runs.

use std::time::Duration;

use crate::deploy::plan::ProcedureState;

/// How long a migration's statement waits for a lock unless told otherwise:
/// long enough for the short transactions of fence calls, short enough that
/// traffic queued behind a schema change waits seconds, not minutes.
pub const DEFAULT_MIGRATION_LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// How to run a deploy. Setters take `&mut self` and chain, as
/// [`ClientConfig`](crate::ClientConfig)'s do:
///
/// ```
/// # use std::time::Duration;
/// # use fencepost::deploy::MigrateOptions;
/// let mut options = MigrateOptions::default();
/// options.lock_timeout(Duration::from_secs(120)).dry_run(true);
/// ```
#[derive(Clone, Debug)]
pub struct MigrateOptions {
    pub(super) lock_timeout: Duration,
    pub(super) migration_lock_timeout: Duration,
    pub(super) dry_run: bool,
    pub(super) overwrite_drift: bool,
}

impl Default for MigrateOptions {
    /// Waits up to 60 s for another deployment and
    /// [`DEFAULT_MIGRATION_LOCK_TIMEOUT`] per migration statement, deploys
    /// (not a dry run), and stops at drift.
    fn default() -> Self {
        Self {
            lock_timeout: Duration::from_secs(60),
            migration_lock_timeout: DEFAULT_MIGRATION_LOCK_TIMEOUT,
            dry_run: false,
            overwrite_drift: false,
        }
    }
}

impl MigrateOptions {
    /// How long to wait for another deployment to finish.
    pub fn lock_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.lock_timeout = timeout;
        self
    }

    /// How long each statement of a migration waits for a lock (`SET
    /// LOCK_TIMEOUT`) before the migration fails and is rolled back: a
    /// caller's open transaction on a fence table then fails the deploy
    /// instead of queueing every fence call behind the migration's wait.
    pub fn migration_lock_timeout(&mut self, timeout: Duration) -> &mut Self {
        self.migration_lock_timeout = timeout;
        self
    }

    /// Show the plan and change nothing.
    pub fn dry_run(&mut self, dry_run: bool) -> &mut Self {
        self.dry_run = dry_run;
        self
    }

    /// Redeploy shipped procedures altered on the server (drift) instead of
    /// stopping.
    pub fn overwrite_drift(&mut self, overwrite: bool) -> &mut Self {
        self.overwrite_drift = overwrite;
        self
    }

    /// Whether drift is redeployed rather than a reason to stop (see
    /// [`overwrite_drift`](Self::overwrite_drift)).
    pub fn overwrites_drift(&self) -> bool {
        self.overwrite_drift
    }
}

/// Something worth telling a person while a deploy runs.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Progress {
    /// Waiting for the deploy lock.
    WaitingForLock,
    /// A migration started.
    MigrationStarted {
        /// e.g. `V1__lease_tables`.
        name: String,
    },
    /// A migration committed.
    MigrationCommitted {
        /// e.g. `V1__lease_tables`.
        name: String,
        /// How long it took, in seconds.
        seconds: f64,
    },
    /// A procedure was deployed.
    ProcedureDeployed {
        /// `schema.name`.
        name: String,
        /// Why it was deployed: missing, changed, drifted or untracked.
        was: ProcedureState,
    },
    /// A procedure fencepost had deployed and no longer ships was dropped.
    ProcedureDropped {
        /// `schema.name`.
        name: String,
    },
    /// A permission script was applied.
    PermissionsApplied {
        /// The script's file name, e.g. `020_fence_service.sql`.
        file: String,
    },
}
