//! The engine and the database settings that change what a check expects,
//! read once before the checks and printed in the report's header.

use serde::Serialize;

use crate::Connection;

/// What the report's header shows, and what checks read to pick the answer
/// that holds under the settings in effect.
#[derive(Clone, Debug, Default, Serialize)]
pub struct EngineFacts {
    /// `SERVERPROPERTY('ProductVersion')`.
    pub version: String,
    /// `SERVERPROPERTY('Edition')`.
    pub edition: String,
    /// `SERVERPROPERTY('EngineEdition')`: 5 is Azure SQL Database, 8 Azure SQL Managed Instance.
    pub engine_edition: Option<i32>,
    /// Babelfish for PostgreSQL (`SERVERPROPERTY('Babelfish')` is not NULL).
    pub babelfish: bool,
    /// The database the checks run in.
    pub database: String,
    /// `is_read_committed_snapshot_on`.
    pub read_committed_snapshot: Option<bool>,
    /// `snapshot_isolation_state` = 1 (ALLOW_SNAPSHOT_ISOLATION ON).
    pub allow_snapshot_isolation: Option<bool>,
    /// `DATABASEPROPERTYEX(DB_NAME(), 'IsOptimizedLockingOn')`; NULL where the engine has no such property.
    pub optimized_locking: Option<bool>,
    /// `compatibility_level`.
    pub compatibility_level: Option<i32>,
    /// The database's default collation.
    pub collation: Option<String>,
    /// The login the checks run as.
    pub login: String,
    /// Whether the login may execute `fence_admin.ForceRelease` (the force-release check).
    pub may_force_release: bool,
    /// Whether the login may execute `fence_admin.ListLeases` (the literal-prefix check).
    pub may_list_leases: bool,
}

impl EngineFacts {
    /// Azure SQL Database or Managed Instance.
    pub fn is_azure(&self) -> bool {
        matches!(self.engine_edition, Some(5 | 8))
    }

    /// The engine as one phrase, for the header.
    pub fn name(&self) -> String {
        let kind = if self.babelfish {
            "Babelfish for PostgreSQL"
        } else if self.engine_edition == Some(5) {
            "Azure SQL Database"
        } else if self.engine_edition == Some(8) {
            "Azure SQL Managed Instance"
        } else {
            "SQL Server"
        };
        format!("{kind} {} ({})", self.version, self.edition)
    }
}

const SETTINGS: &str = "\
    SELECT CAST(SERVERPROPERTY('ProductVersion') AS nvarchar(128)) AS Version, \
           CAST(SERVERPROPERTY('Edition') AS nvarchar(128)) AS Edition, \
           CAST(SERVERPROPERTY('EngineEdition') AS int) AS EngineEdition, \
           CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL THEN 0 ELSE 1 END AS int) AS Babelfish, \
           CAST(DB_NAME() AS nvarchar(128)) AS DatabaseName, \
           CAST(d.is_read_committed_snapshot_on AS int) AS Rcsi, \
           CAST(d.snapshot_isolation_state AS int) AS SnapshotState, \
           CAST(d.compatibility_level AS int) AS Compatibility, \
           CAST(d.collation_name AS nvarchar(128)) AS Collation, \
           CAST(DATABASEPROPERTYEX(DB_NAME(), 'IsOptimizedLockingOn') AS int) AS OptimizedLocking, \
           CAST(SUSER_SNAME() AS nvarchar(128)) AS LoginName, \
           CAST(HAS_PERMS_BY_NAME(N'fence_admin.ForceRelease', N'OBJECT', N'EXECUTE') AS int) AS MayForceRelease, \
           CAST(HAS_PERMS_BY_NAME(N'fence_admin.ListLeases', N'OBJECT', N'EXECUTE') AS int) AS MayListLeases \
    FROM sys.databases AS d WHERE d.database_id = DB_ID();";

/// Reads the engine's facts on `conn`.
pub(crate) async fn read(conn: &mut Connection) -> Result<EngineFacts, tiberius::error::Error> {
    let row = conn.simple_query(SETTINGS).await?.into_row().await?;
    let Some(row) = row else {
        return Ok(EngineFacts::default());
    };
    let text = |column: &str| row.get::<&str, _>(column).map(str::to_string);
    let int = |column: &str| row.get::<i32, _>(column);
    Ok(EngineFacts {
        version: text("Version").unwrap_or_default(),
        edition: text("Edition").unwrap_or_default(),
        engine_edition: int("EngineEdition"),
        babelfish: int("Babelfish") == Some(1),
        database: text("DatabaseName").unwrap_or_default(),
        read_committed_snapshot: int("Rcsi").map(|v| v == 1),
        allow_snapshot_isolation: int("SnapshotState").map(|v| v == 1),
        optimized_locking: int("OptimizedLocking").map(|v| v == 1),
        compatibility_level: int("Compatibility"),
        collation: text("Collation"),
        login: text("LoginName").unwrap_or_default(),
        may_force_release: int("MayForceRelease") == Some(1),
        may_list_leases: int("MayListLeases") == Some(1),
    })
}
