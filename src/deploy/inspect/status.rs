//! The plan read without the deploy lock: what `status` shows, and what a
//! dry run of `migrate` shows (the same read).

use crate::connection::Connection;
use crate::deploy::error::DeployError;
use crate::deploy::plan::Plan;
use crate::deploy::run::{Session, read_plan, read_state as read_state_in};
use crate::deploy::state::ServerState;
use crate::source::Sources;

/// Compares what ships with what the database holds, changing nothing.
pub async fn status(conn: &mut Connection, sources: &Sources) -> Result<Plan, DeployError> {
    read_plan(&mut Session::new(conn), sources).await
}

/// Reads fencepost's footprint in a database (one round trip), hashing the
/// definitions of the procedures named in `shipped` (`schema.name`).
pub async fn read_state(conn: &mut Connection, shipped: &[String]) -> Result<ServerState, DeployError> {
    read_state_in(&mut Session::new(conn), shipped).await
}
