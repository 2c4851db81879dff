//! Reading one column of a catalog row, with errors that say which query
//! and column answered in an unexpected shape.

use tiberius::Row;

use super::super::AuditError;

pub(super) fn text(row: &Row, i: usize, what: &'static str) -> Result<Option<String>, AuditError> {
    row.try_get::<&str, usize>(i)
        .map(|v| v.map(str::to_string))
        .map_err(|e| AuditError::UnexpectedShape {
            what,
            reason: format!("column {i}: {e}"),
        })
}

pub(super) fn required(row: &Row, i: usize, what: &'static str) -> Result<String, AuditError> {
    text(row, i, what)?.ok_or(AuditError::UnexpectedShape {
        what,
        reason: format!("column {i} is NULL"),
    })
}

pub(super) fn uuid(row: &Row, i: usize, what: &'static str) -> Result<Option<uuid::Uuid>, AuditError> {
    row.try_get::<uuid::Uuid, usize>(i)
        .map_err(|e| AuditError::UnexpectedShape {
            what,
            reason: format!("column {i}: {e}"),
        })
}

pub(super) fn int(row: &Row, i: usize, what: &'static str) -> Result<Option<i32>, AuditError> {
    row.try_get::<i32, usize>(i).map_err(|e| AuditError::UnexpectedShape {
        what,
        reason: format!("column {i}: {e}"),
    })
}
