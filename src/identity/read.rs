//! Reading the database's identity: the current one and the recorded one,
//! one round trip each. Used by `status` (through the deploy's inspection)
//! and by `lease recover`.

use uuid::Uuid;

use super::{CURRENT_IDENTITY_SQL, RECORDED_IDENTITY_SQL, RecordedIdentity};
use crate::connection::Connection;

/// A read of the identity that failed: what was being read, and the
/// driver's error.
#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct ReadError {
    /// What was being read.
    pub context: &'static str,
    /// The driver's error.
    #[source]
    pub source: tiberius::error::Error,
}

impl ReadError {
    fn at(context: &'static str) -> impl FnOnce(tiberius::error::Error) -> Self {
        move |source| Self { context, source }
    }
}

/// The database's identity now: its recovery fork, or `None` where the
/// engine does not show one.
pub async fn read_current(conn: &mut Connection) -> Result<Option<Uuid>, ReadError> {
    const CONTEXT: &str = "reading the database identity (sys.database_recovery_status)";
    let rows = conn
        .simple_query(CURRENT_IDENTITY_SQL)
        .await
        .map_err(ReadError::at(CONTEXT))?
        .into_first_result()
        .await
        .map_err(ReadError::at(CONTEXT))?;
    Ok(rows.first().and_then(|row| row.get::<Uuid, usize>(0)))
}

/// The identity recorded in fence.DatabaseIdentity, or `None` when none is
/// (or the table does not exist yet).
pub async fn read_recorded(conn: &mut Connection) -> Result<Option<RecordedIdentity>, ReadError> {
    const CONTEXT: &str = "reading the recorded database identity (fence.DatabaseIdentity)";
    let rows = conn
        .simple_query(RECORDED_IDENTITY_SQL)
        .await
        .map_err(ReadError::at(CONTEXT))?
        .into_first_result()
        .await
        .map_err(ReadError::at(CONTEXT))?;
    Ok(rows.first().and_then(|row| {
        Some(RecordedIdentity {
            recovery_fork: row.get::<Uuid, usize>(0)?,
            recorded_at_utc: row.get::<&str, usize>(1).unwrap_or_default().to_owned(),
            recorded_by: row.get::<&str, usize>(2).unwrap_or_default().to_owned(),
        })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_read_keeps_the_driver_error_as_the_cause_only() {
        let error = ReadError {
            context: "reading the database identity",
            source: tiberius::error::Error::Io {
                kind: std::io::ErrorKind::ConnectionReset,
                message: "connection reset by peer".into(),
            },
        };
        assert_eq!(error.to_string(), "reading the database identity");
        crate::says_once::assert_each_cause_said_once(&error);
    }
}
