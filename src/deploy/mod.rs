//! Deciding and doing a deploy: the runner behind `fencepost migrate`,
//! `status` and `script`, over the shipped T-SQL of [`crate::source`].
//!
//! The rooms form a pipeline. The [`Plan`] compares what ships with the
//! [`ServerState`] a database holds, and gives any refusal as a [`Blocker`].
//! `run` is the only code that changes a database: under the deploy lock it
//! applies the pending migrations (split on `GO`, one transaction each,
//! recorded in refinery's history only when every batch left it intact),
//! then, from the state the migrations left, every procedure that changed,
//! drifted or is missing, drops the procedures it deployed and no longer
//! ships, and in one last request applies every permission script, records
//! the deployment and releases the lock. A failure part-way reports what
//! committed before it ([`Committed`]) and records no deployment. `inspect`
//! holds the read-only probes of `status`, and `script` renders the same
//! deploy as text.

mod blocker;
pub mod cost;
mod error;
#[cfg(test)]
mod fixtures;
mod inspect;
mod plan;
mod report;
mod rights;
mod run;
mod script;
mod sql;
mod state;
mod upgrade;

pub use blocker::Blocker;
pub use error::{DeployError, LockHolder};
pub use inspect::{
    DeployHistory, Deployment, ProcedureDiff, SecurityDefiner, StatusOptions, StatusReport, definition_diff,
    read_contract_version, read_current_identity, read_definition, read_history, read_recorded_identity,
    read_security_definer, status, status_report,
};
pub use plan::{MigrationState, MigrationStatus, Plan, ProcedureState, ProcedureStatus};
pub use report::{Change, Committed, MigrateReport};
pub use rights::{DeployRights, MissingRight};
pub use run::{
    DEFAULT_MIGRATION_LOCK_TIMEOUT, Grant, GrantOutcome, MigrateOptions, Progress, ensure_members, migrate,
    refuse_deploying_user,
};
pub use script::{
    GRANT_REFUSED_DEPLOYING_USER, GRANT_REFUSED_NO_USER, UNINSTALL_REFUSED_HELD, refuse_for_sqlcmd,
    render as render_script, render_babelfish_postgres as render_babelfish_postgres_script,
    render_schemas as render_schemas_script, render_uninstall as render_uninstall_script,
    render_with_grants as render_script_with_grants,
};
pub use state::{AppliedMigration, ServerProcedure, ServerState};

// Where they were first public, before the rooms above `deploy` held them.
pub use crate::identity;
pub use crate::schema::{FENCE_ROLES, HISTORY_TABLE, PROCEDURE_SCHEMAS};
pub use crate::source::{MigrationSource, ProcedureSource, ScriptSource, SourceError, Sources};
pub use crate::tsql::{BadSeparator, Batch, split_batches};
