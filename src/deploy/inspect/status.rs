//! The plan read without the deploy lock: what `status` shows, and what a
//! dry run of `migrate` shows (the same read).

use crate::connection::Connection;
use crate::deploy::error::DeployError;
use crate::deploy::plan::Plan;
use crate::deploy::run::{Session, read_plan};
use crate::source::Sources;

/// Compares what ships with what the database holds, changing nothing.
pub async fn status(conn: &mut Connection, sources: &Sources) -> Result<Plan, DeployError> {
    read_plan(&mut Session::new(conn), sources).await
}
