//! The runner's own T-SQL, shared by `migrate` and `script` so that a
//! scripted deploy does exactly what a connected one does.

use std::time::Duration;

use super::procedure::ProcedureSource;
use super::state::{HISTORY_TABLE, definition_hash_of};

/// The name of the deploy lock (`sp_getapplock` resource), followed by the
/// database name. SQL Server scopes application locks to a database already;
/// engines whose locks are server-wide (Babelfish) need the name to keep
/// deploys of different databases independent.
pub const DEPLOY_LOCK: &str = "fencepost:deploy:";

fn deploy_lock_resource() -> String {
    format!("{} + DB_NAME()", literal(DEPLOY_LOCK))
}

/// A T-SQL string literal: `N'...'` with quotes doubled.
pub fn literal(text: &str) -> String {
    format!("N'{}'", text.replace('\'', "''"))
}

/// Creates schema `fence` and the migration history when missing. Both go
/// through EXEC because CREATE SCHEMA must start a batch and the table's
/// schema may not exist when the batch compiles.
pub fn bootstrap() -> String {
    format!(
        "IF SCHEMA_ID(N'fence') IS NULL
    EXEC (N'CREATE SCHEMA fence AUTHORIZATION dbo;');
IF OBJECT_ID(N'{HISTORY_TABLE}', N'U') IS NULL
    EXEC (N'CREATE TABLE {HISTORY_TABLE} (
        version    int           NOT NULL CONSTRAINT PK_SchemaHistory PRIMARY KEY,
        name       nvarchar(255) NOT NULL,
        applied_on nvarchar(255) NOT NULL,
        checksum   nvarchar(255) NOT NULL);');"
    )
}

/// Takes the session-scoped deploy lock and returns sp_getapplock's status
/// as one row (0 or 1: granted; -1: timed out).
pub fn take_deploy_lock(timeout: Duration) -> String {
    let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    format!(
        "DECLARE @Status int, @Resource nvarchar(255) = {lock};
EXEC @Status = sp_getapplock @Resource = @Resource, @LockMode = N'Exclusive',
                             @LockOwner = N'Session', @LockTimeout = {millis};
SELECT @Status AS Status;",
        lock = deploy_lock_resource()
    )
}

/// Releases the deploy lock (closing the session would too).
pub fn release_deploy_lock() -> String {
    format!(
        "DECLARE @Resource nvarchar(255) = {};\nEXEC sp_releaseapplock @Resource = @Resource, @LockOwner = N'Session';",
        deploy_lock_resource()
    )
}

/// Records in the journal that `procedure` was deployed from its shipped
/// text, with the fingerprint of the definition the server now holds.
pub fn record_procedure(procedure: &ProcedureSource) -> String {
    let name = literal(&procedure.qualified_name());
    let checksum = literal(procedure.checksum());
    let hash = definition_hash_of(&name);
    format!(
        "UPDATE fence.DeployedProcedure
   SET SourceChecksum = {checksum}, DefinitionHash = {hash}, DeployedAtUtc = SYSUTCDATETIME()
 WHERE ProcedureName = {name};
IF @@ROWCOUNT = 0
    INSERT INTO fence.DeployedProcedure (ProcedureName, SourceChecksum, DefinitionHash, DeployedAtUtc)
    VALUES ({name}, {checksum}, {hash}, SYSUTCDATETIME());"
    )
}

/// Opens the transaction that deploys `procedure`, and creates a placeholder
/// for the `ALTER` that follows only when `OBJECT_ID` finds no procedure. The
/// server decides, not the plan: a procedure whose definition the deploy login
/// cannot read (encrypted, or no VIEW DEFINITION) still exists, and creating
/// it again would fail.
pub fn begin_procedure_deploy(procedure: &ProcedureSource) -> String {
    format!(
        "SET XACT_ABORT ON;\nBEGIN TRANSACTION;\nIF OBJECT_ID({}, N'P') IS NULL\n    EXEC ({});",
        literal(&procedure.qualified_name()),
        literal(&procedure.stub_text())
    )
}

/// The row refinery's history keeps for an applied migration, stamped by
/// the SQL expression `applied_on_sql` (RFC 3339 text, as refinery writes it).
pub fn record_migration(version: i32, name: &str, applied_on_sql: &str, checksum: u64) -> String {
    format!(
        "INSERT INTO {HISTORY_TABLE} (version, name, applied_on, checksum) \
         VALUES ({version}, {}, {applied_on_sql}, N'{checksum}');",
        literal(name)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_double_their_quotes() {
        assert_eq!(literal("it's"), "N'it''s'");
    }

    #[test]
    fn a_procedure_deploy_creates_its_stub_only_where_object_id_finds_none() {
        let p = ProcedureSource::parse("fence_api.P.sql", "CREATE PROCEDURE fence_api.P AS SELECT 1;").unwrap();
        let begin = begin_procedure_deploy(&p);
        let guard = "IF OBJECT_ID(N'fence_api.P', N'P') IS NULL\n    EXEC (N'CREATE PROCEDURE [fence_api].[P]";
        assert!(begin.contains(guard), "{begin}");
        assert_eq!(begin.matches("CREATE PROCEDURE").count(), 1, "{begin}");
    }

    #[test]
    fn the_lock_timeout_is_in_milliseconds() {
        assert!(take_deploy_lock(Duration::from_secs(2)).contains("@LockTimeout = 2000"));
    }
}
