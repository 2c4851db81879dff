//! The database identity as `status` reads it: the two reads of
//! [`crate::identity`], failing as a deploy's reads do.

use uuid::Uuid;

use crate::connection::Connection;
use crate::deploy::error::DeployError;
use crate::identity::{self, RecordedIdentity};

/// The database's identity now: its recovery fork, or `None` where the
/// engine does not show one.
pub async fn read_current_identity(conn: &mut Connection) -> Result<Option<Uuid>, DeployError> {
    Ok(identity::read_current(conn).await?)
}

/// The identity recorded in fence.DatabaseIdentity, or `None` when none is
/// (or the table does not exist yet).
pub async fn read_recorded_identity(conn: &mut Connection) -> Result<Option<RecordedIdentity>, DeployError> {
    Ok(identity::read_recorded(conn).await?)
}
