//! Foreign keys and their referential actions, one row per referenced
//! column: a cascading one on a fence table lets a DELETE or UPDATE of the
//! referenced table write fence rows.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{ForeignKey, ReferentialAction};
use super::query::{Query, Reading};
use super::rows::{int, required, text};

/// Every foreign key of the database with its actions and referenced
/// columns, after a row naming the database the views answered for: on
/// Babelfish a batch can move into another database (see `queries`), and
/// keys read there would be another database's, or none. Babelfish has both
/// views; an engine or login that cannot read them leaves the keys unknown,
/// which FP027 reports as "cannot verify". Names come from the ids
/// (OBJECT_NAME, COL_NAME), not from joins with sys.tables and sys.columns:
/// on Babelfish those views are functions over the whole database, and a
/// plan that joins them per row takes minutes in a database of thousands of
/// tables.
const FOREIGN_KEYS: &str = "SELECT CAST(N'database' AS nvarchar(16)), CAST(DB_NAME() AS nvarchar(520)),
                CAST(NULL AS nvarchar(520)), CAST(NULL AS nvarchar(520)), CAST(NULL AS int), CAST(NULL AS int),
                CAST(NULL AS nvarchar(256))
         UNION ALL
         SELECT N'key', CAST(fk.name AS nvarchar(256)),
                CAST(OBJECT_SCHEMA_NAME(fk.parent_object_id) + N'.' + OBJECT_NAME(fk.parent_object_id) AS nvarchar(520)),
                CAST(OBJECT_SCHEMA_NAME(fk.referenced_object_id) + N'.' + OBJECT_NAME(fk.referenced_object_id)
                     AS nvarchar(520)),
                CAST(fk.delete_referential_action AS int), CAST(fk.update_referential_action AS int),
                CAST(COL_NAME(k.referenced_object_id, k.referenced_column_id) AS nvarchar(256))
           FROM sys.foreign_keys AS fk
           LEFT JOIN sys.foreign_key_columns AS k ON k.constraint_object_id = fk.object_id
          WHERE OBJECT_NAME(fk.parent_object_id) IS NOT NULL AND OBJECT_NAME(fk.referenced_object_id) IS NOT NULL";

pub(super) fn foreign_keys() -> Query {
    Query::optional("foreign keys", FOREIGN_KEYS, read_foreign_keys)
}

fn read_foreign_keys(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    let database = reading.catalog.database.clone();
    reading.catalog.foreign_keys = match rows {
        Some(rows) => keys(rows, &database, what)?,
        None => None,
    };
    Ok(())
}

/// The keys, or `None` unless a row says the views answered for
/// `database` (UNION ALL keeps no order, so it is looked for).
fn keys(rows: &[Row], database: &str, what: &'static str) -> Result<Option<Vec<ForeignKey>>, AuditError> {
    let mut here = false;
    let mut keys = Vec::new();
    for row in rows {
        match text(row, 0, what)?.as_deref() {
            Some("database") => here = text(row, 1, what)?.is_some_and(|d| d.eq_ignore_ascii_case(database)),
            Some("key") => keys.push(row),
            _ => return Ok(None),
        }
    }
    if !here {
        return Ok(None);
    }
    let mut out: Vec<ForeignKey> = Vec::new();
    for row in keys {
        let name = required(row, 1, what)?;
        let table = required(row, 2, what)?;
        let column = text(row, 6, what)?;
        if let Some(key) = out.iter_mut().find(|k| k.name == name && k.table == table) {
            key.referenced_columns.extend(column);
            continue;
        }
        out.push(ForeignKey {
            name,
            table,
            referenced: required(row, 3, what)?,
            referenced_columns: column.into_iter().collect(),
            on_delete: action(row, 4, what)?,
            on_update: action(row, 5, what)?,
        });
    }
    Ok(Some(out))
}

/// An action number; one the views do not define counts as CASCADE, the
/// widest, so an engine's new action is never read as writing nothing.
fn action(row: &Row, i: usize, what: &'static str) -> Result<ReferentialAction, AuditError> {
    Ok(int(row, i, what)?.map_or(ReferentialAction::Cascade, |n| {
        ReferentialAction::from_code(n).unwrap_or(ReferentialAction::Cascade)
    }))
}

#[cfg(test)]
mod tests {
    use tiberius::{ColumnData, ColumnType, Row};

    use super::*;

    fn row(cells: [Option<&str>; 7]) -> Row {
        cells
            .iter()
            .enumerate()
            .fold(Row::builder(), |row, (i, cell)| {
                let data = match i {
                    4 | 5 => (ColumnType::Int4, ColumnData::I32(cell.map(|c| c.parse().unwrap()))),
                    _ => (
                        ColumnType::NVarchar,
                        ColumnData::String(cell.map(|c| c.to_string().into())),
                    ),
                };
                row.column(format!("c{i}"), data.0, data.1)
            })
            .build()
    }

    fn answer(database: &str) -> Vec<Row> {
        vec![
            row([
                Some("key"),
                Some("FK_R_T"),
                Some("fence.Resource"),
                Some("dbo.Tenants"),
                Some("1"),
                Some("0"),
                Some("TenantId"),
            ]),
            row([Some("database"), Some(database), None, None, None, None, None]),
        ]
    }

    #[test]
    fn keys_read_in_the_checked_database_are_kept_with_their_actions() {
        let keys = keys(&answer("orders"), "orders", "foreign keys").unwrap().unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].on_delete, ReferentialAction::Cascade);
        assert_eq!(keys[0].referenced_columns, ["TenantId"]);
    }

    #[test]
    fn keys_read_in_another_database_are_unknown_not_none() {
        assert_eq!(keys(&answer("msdb"), "orders", "foreign keys").unwrap(), None);
        assert_eq!(keys(&[], "orders", "foreign keys").unwrap(), None);
    }
}
