//! Deployment: the shipped T-SQL and the runner behind `fencepost migrate`,
//! `status` and `script`.
//!
//! A deploy takes the deploy lock, applies pending migrations through
//! refinery (split on `GO`, one transaction per migration, recorded only when
//! every batch left it intact), then, from the state the migrations left,
//! every procedure whose shipped text changed, whose server definition
//! drifted or that is missing (created as a stub when missing, then altered,
//! so grants survive), drops the procedures it deployed and no longer ships,
//! then applies every permission script, records the deployment
//! (fence.Deployment, and the database identity when none is recorded) and
//! releases the lock in one request. A failure part-way reports what committed
//! before it and records no deployment.

mod babelfish_postgres;
mod batch;
mod contract_version;
mod definition;
mod error;
mod executor;
mod grants;
mod history;
pub mod identity;
mod lint;
mod lock;
mod migrate;
mod migration;
mod permissions;
mod plan;
mod procedure;
mod report;
mod script;
mod script_guard;
mod security_definer;
mod session;
mod sources;
mod state;
mod statements;
mod upgrade;

pub use babelfish_postgres::render as render_babelfish_postgres_script;
pub use batch::{BadSeparator, Batch, split_batches};
pub use contract_version::read_contract_version;
pub use definition::{definition_diff, read_definition};
pub use error::{DeployError, LockHolder, SourceError};
pub use grants::{FENCE_ROLES, Grant, GrantOutcome, ensure_members, refuse_deploying_user};
pub use history::{DeployHistory, Deployment, read_history, record_deployment};
pub use migrate::{DEFAULT_MIGRATION_LOCK_TIMEOUT, MigrateOptions, Progress, migrate};
pub use migration::MigrationSource;
pub use plan::{MigrationState, MigrationStatus, Plan, ProcedureState, ProcedureStatus};
pub use procedure::{PROCEDURE_SCHEMAS, ProcedureSource};
pub use report::{Change, Committed, MigrateReport};
pub use script::render as render_script;
pub use security_definer::{SecurityDefiner, read as read_security_definer};
pub use sources::{ScriptSource, Sources};
pub use state::{AppliedMigration, HISTORY_TABLE, ServerProcedure, ServerState};
// Where they were first public: the checksum the journal records.
pub use crate::tsql::{checksum, normalize};

use crate::connection::Connection;

/// Compares what ships with what the database holds, changing nothing.
pub async fn status(conn: &mut Connection, sources: &Sources) -> Result<Plan, DeployError> {
    let mut session = session::Session::new(conn);
    let shipped: Vec<String> = sources
        .procedures()
        .iter()
        .map(ProcedureSource::qualified_name)
        .collect();
    Ok(Plan::new(sources, &state::read_state(&mut session, &shipped).await?))
}

/// Reads fencepost's footprint in a database (one round trip), hashing the
/// definitions of the procedures named in `shipped` (`schema.name`).
pub async fn read_state(conn: &mut Connection, shipped: &[String]) -> Result<ServerState, DeployError> {
    state::read_state(&mut session::Session::new(conn), shipped).await
}
