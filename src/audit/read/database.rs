//! The database being checked and its engine: which engine answers, the
//! database's own options, which fence procedures Babelfish runs as their
//! owner, and the database identity.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{DatabaseSettings, Engine, IdentityReading};
use super::query::{Query, Reading};
use super::rows::{int, text, uuid};

/// No catalog view says whether an engine chains ownership; the engine
/// announcing itself is the only evidence there is. EngineEdition 5 is
/// Azure SQL Database.
pub(super) fn database_and_engine() -> Query {
    Query::required(
        "the database and engine",
        "SELECT CAST(DB_NAME() AS nvarchar(256)),
                    CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL THEN 1 ELSE 0 END AS int),
                    CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NOT NULL THEN N'Babelfish for PostgreSQL'
                              WHEN SERVERPROPERTY('EngineEdition') = 5 THEN N'Azure SQL Database'
                              ELSE N'SQL Server' END AS nvarchar(64)),
                    CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL AND SERVERPROPERTY('EngineEdition') = 5
                              THEN 1 ELSE 0 END AS int)",
        read_database_and_engine,
    )
}

fn read_database_and_engine(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    let row = rows.and_then(|r| r.first()).ok_or(AuditError::UnexpectedShape {
        what,
        reason: "no row".into(),
    })?;
    reading.catalog.database = text(row, 0, what)?.unwrap_or_default();
    reading.catalog.engine = Engine {
        chains_ownership: int(row, 1, what)? == Some(1),
        product: text(row, 2, what)?.unwrap_or_default(),
        azure_database: int(row, 3, what)? == Some(1),
        security_definer: None,
    };
    Ok(())
}

pub(super) fn database_options() -> Query {
    Query::optional(
        "database options",
        "SELECT CAST(d.is_trustworthy_on AS int), CAST(d.is_db_chaining_on AS int)
               FROM sys.databases AS d WHERE d.database_id = DB_ID()",
        read_database_options,
    )
}

fn read_database_options(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    reading.catalog.settings = match rows.and_then(|r| r.first()) {
        Some(row) => Some(DatabaseSettings {
            trustworthy: int(row, 0, what)? == Some(1),
            db_chaining: int(row, 1, what)? == Some(1),
        }),
        None => None,
    };
    Ok(())
}

/// Babelfish's PostgreSQL catalog, readable over TDS: which fence
/// procedures run as their owner. Inside EXEC so that SQL Server, which has
/// none of these objects, never compiles it.
pub(super) fn security_definer() -> Query {
    Query::optional(
        "Babelfish SECURITY DEFINER procedures",
        "IF SERVERPROPERTY('Babelfish') IS NULL
                 SELECT CAST(NULL AS nvarchar(257)) WHERE 1 = 0
             ELSE
                 EXEC (N'SELECT CAST(e.orig_name AS nvarchar(128)) + N''.'' + CAST(p.proname AS nvarchar(128))
                  FROM sys.babelfish_namespace_ext AS e
                  JOIN sys.babelfish_sysdatabases AS d ON d.dbid = e.dbid
                  JOIN pg_catalog.pg_namespace AS n ON n.nspname = e.nspname
                  JOIN pg_catalog.pg_proc AS p ON p.pronamespace = n.oid
                  WHERE d.name = DB_NAME() AND e.orig_name IN (N''fence_api'', N''fence_admin'')
                    AND CAST(p.prosecdef AS int) = 1')",
        read_security_definer,
    )
}

fn read_security_definer(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    // Asked of Babelfish only; elsewhere the query answers no rows.
    if !reading.catalog.engine.chains_ownership
        && let Some(rows) = rows
    {
        let mut definer = Vec::new();
        for row in rows {
            if let Some(name) = text(row, 0, what)? {
                definer.push(name.to_lowercase());
            }
        }
        reading.catalog.engine.security_definer = Some(definer);
    }
    Ok(())
}

/// The recorded and the current database identity as one row. The recorded
/// one is read by `sp_executesql` so that a database deployed before
/// fence.DatabaseIdentity existed still compiles the batch.
pub(super) fn database_identity() -> Query {
    use crate::identity::CURRENT_IDENTITY_SQL;
    let sql = format!(
        "IF OBJECT_ID(N'fence.DatabaseIdentity', N'U') IS NULL
                 SELECT CAST(NULL AS uniqueidentifier), ({CURRENT_IDENTITY_SQL})
             ELSE
                 EXEC sys.sp_executesql N'SELECT (SELECT RecoveryForkGuid FROM fence.DatabaseIdentity WHERE Singleton = 1),
                                                 ({CURRENT_IDENTITY_SQL})'"
    );
    Query::optional("the database identity", sql, read_database_identity)
}

fn read_database_identity(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    reading.catalog.database_identity = match rows.map(|r| r.first()) {
        Some(Some(row)) => Some(IdentityReading {
            recorded: uuid(row, 0, what)?,
            current: uuid(row, 1, what)?,
        }),
        // A query that answered no row read nothing.
        Some(None) | None => None,
    };
    Ok(())
}
