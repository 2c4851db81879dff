//! What a deploy asks of a database, one step per call: the seam between the
//! orchestration (what runs in which order, what a failure leaves) and the
//! T-SQL each step sends. A [`Session`] is the target of a real deploy; the
//! orchestration's unit tests use one that records the calls instead.

use std::time::Duration;

use super::permissions::{self, PermissionsRun};
use super::session::Session;
use super::{lock, migrations, procedures, read};
use crate::deploy::error::DeployError;
use crate::deploy::state::ServerState;
use crate::source::{MigrationSource, ProcedureSource, ScriptSource};

/// A database a deploy runs against.
pub(crate) trait Target {
    /// Waits up to `timeout` for the deploy lock and reads the state under
    /// it (hashing the definitions of `shipped`); how long it waited. When
    /// it fails, the lock is not held.
    async fn lock_and_read_state(
        &mut self,
        timeout: Duration,
        shipped: &[String],
    ) -> Result<(Duration, ServerState), DeployError>;

    /// Reads the state, without the lock or under the one already held.
    async fn read_state(&mut self, shipped: &[String]) -> Result<ServerState, DeployError>;

    /// Creates the migration history when missing.
    async fn create_history(&mut self) -> Result<(), DeployError>;

    /// Applies and records one migration, or rolls back what it can of it.
    async fn apply_migration(&mut self, migration: &MigrationSource, lock_timeout: Duration)
    -> Result<(), DeployError>;

    /// Creates or alters one procedure, with its journal row.
    async fn deploy_procedure(&mut self, procedure: &ProcedureSource) -> Result<(), DeployError>;

    /// Drops a procedure fencepost deployed and no longer ships.
    async fn drop_procedure(&mut self, name: &str) -> Result<(), DeployError>;

    /// Applies the permission scripts, records the deployment with `record`
    /// when they all succeeded, and releases the lock, whatever happened.
    async fn apply_permissions_and_release(&mut self, scripts: &[ScriptSource], record: &str) -> PermissionsRun;

    /// Releases the lock after a failure.
    async fn release(&mut self) -> Result<(), DeployError>;

    /// Round trips made so far.
    fn round_trips(&self) -> usize;
}

impl Target for Session<'_> {
    async fn lock_and_read_state(
        &mut self,
        timeout: Duration,
        shipped: &[String],
    ) -> Result<(Duration, ServerState), DeployError> {
        lock::lock_and_read_state(self, timeout, shipped).await
    }

    async fn read_state(&mut self, shipped: &[String]) -> Result<ServerState, DeployError> {
        read::read_state(self, shipped).await
    }

    async fn create_history(&mut self) -> Result<(), DeployError> {
        migrations::create_history(self).await
    }

    async fn apply_migration(
        &mut self,
        migration: &MigrationSource,
        lock_timeout: Duration,
    ) -> Result<(), DeployError> {
        migrations::apply(self, migration, lock_timeout).await
    }

    async fn deploy_procedure(&mut self, procedure: &ProcedureSource) -> Result<(), DeployError> {
        procedures::deploy_procedure(self, procedure).await
    }

    async fn drop_procedure(&mut self, name: &str) -> Result<(), DeployError> {
        procedures::drop_retired(self, name).await
    }

    async fn apply_permissions_and_release(&mut self, scripts: &[ScriptSource], record: &str) -> PermissionsRun {
        permissions::apply_and_release(self, scripts, record).await
    }

    async fn release(&mut self) -> Result<(), DeployError> {
        lock::release(self).await
    }

    fn round_trips(&self) -> usize {
        Session::round_trips(self)
    }
}
