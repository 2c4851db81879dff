//! Foreign keys and their referential actions, one row per referenced
//! column: a cascading one on a fence table lets a DELETE or UPDATE of the
//! referenced table write fence rows.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{ForeignKey, ReferentialAction};
use super::query::{Query, Reading};
use super::rows::{int, required, text};

/// Every foreign key of the database with its actions and referenced
/// columns. Babelfish has both views; an engine or login that cannot read
/// them leaves the keys unknown, which FP027 reports as "cannot verify".
const FOREIGN_KEYS: &str = "SELECT CAST(fk.name AS nvarchar(256)),
                CAST(SCHEMA_NAME(t.schema_id) + N'.' + t.name AS nvarchar(520)),
                CAST(SCHEMA_NAME(r.schema_id) + N'.' + r.name AS nvarchar(520)),
                CAST(fk.delete_referential_action AS int), CAST(fk.update_referential_action AS int),
                CAST(c.name AS nvarchar(256))
           FROM sys.foreign_keys AS fk
           JOIN sys.tables AS t ON t.object_id = fk.parent_object_id
           JOIN sys.tables AS r ON r.object_id = fk.referenced_object_id
           LEFT JOIN sys.foreign_key_columns AS k ON k.constraint_object_id = fk.object_id
           LEFT JOIN sys.columns AS c ON c.object_id = k.referenced_object_id AND c.column_id = k.referenced_column_id";

pub(super) fn foreign_keys() -> Query {
    Query::optional("foreign keys", FOREIGN_KEYS, read_foreign_keys)
}

fn read_foreign_keys(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    reading.catalog.foreign_keys = rows.map(|rows| keys(rows, what)).transpose()?;
    Ok(())
}

fn keys(rows: &[Row], what: &'static str) -> Result<Vec<ForeignKey>, AuditError> {
    let mut out: Vec<ForeignKey> = Vec::new();
    for row in rows {
        let name = required(row, 0, what)?;
        let table = required(row, 1, what)?;
        let column = text(row, 5, what)?;
        if let Some(key) = out.iter_mut().find(|k| k.name == name && k.table == table) {
            key.referenced_columns.extend(column);
            continue;
        }
        out.push(ForeignKey {
            name,
            table,
            referenced: required(row, 2, what)?,
            referenced_columns: column.into_iter().collect(),
            on_delete: action(row, 3, what)?,
            on_update: action(row, 4, what)?,
        });
    }
    Ok(out)
}

/// An action number; one the views do not define counts as CASCADE, the
/// widest, so an engine's new action is never read as writing nothing.
fn action(row: &Row, i: usize, what: &'static str) -> Result<ReferentialAction, AuditError> {
    Ok(int(row, i, what)?.map_or(ReferentialAction::Cascade, |n| {
        ReferentialAction::from_code(n).unwrap_or(ReferentialAction::Cascade)
    }))
}
