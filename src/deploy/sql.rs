//! The runner's own T-SQL, shared by `migrate` and `script` so that a
//! scripted deploy does exactly what a connected one does: the deploy lock,
//! the session options, the migration and procedure transactions with their
//! records, and the record of the deployment.

use std::time::Duration;

use super::upgrade::create_schema_unless_there;
use crate::identity::CURRENT_IDENTITY_SQL;
use crate::schema::{DEPLOY_LOCK, HISTORY_TABLE};
use crate::source::ProcedureSource;
use crate::tsql::{after_applock, definition_hash_sql, literal, quote_qualified};

fn deploy_lock_resource() -> String {
    format!("{} + DB_NAME()", literal(DEPLOY_LOCK))
}

/// The session options every deploy runs under, set by the runner when it
/// takes the deploy lock and again before each migration and procedure (a
/// migration's `SET` at batch level outlives its batch), and by the first
/// batch of the script. A procedure keeps the QUOTED_IDENTIFIER and
/// ANSI_NULLS of the session that created it, and a migration's columns
/// take their nullability from ANSI_NULL_DFLT_ON: spelled out, they are the
/// same whichever client runs the deploy (tiberius and sqlcmd differ).
pub(super) const SESSION_OPTIONS: &str = "SET ANSI_NULLS, ANSI_PADDING, ANSI_WARNINGS, ANSI_NULL_DFLT_ON, ARITHABORT, \
CONCAT_NULL_YIELDS_NULL, QUOTED_IDENTIFIER ON;
SET NUMERIC_ROUNDABORT, IMPLICIT_TRANSACTIONS OFF;
SET XACT_ABORT ON;";

/// Creates schema `fence` and the migration history when missing, and
/// refuses (50198) a `fence` another principal owns: its owner could write
/// the tables, and on SQL Server the procedures (owned by dbo) would no
/// longer reach them by ownership chaining. Both go through EXEC because
/// CREATE SCHEMA must start a batch and the table's schema may not exist
/// when the batch compiles.
pub(super) fn bootstrap() -> String {
    format!(
        "{}IF OBJECT_ID(N'{HISTORY_TABLE}', N'U') IS NULL
    EXEC (N'CREATE TABLE {HISTORY_TABLE} (
        version    int           NOT NULL CONSTRAINT PK_SchemaHistory PRIMARY KEY,
        name       nvarchar(255) NOT NULL,
        applied_on nvarchar(255) NOT NULL,
        checksum   nvarchar(255) NOT NULL);');",
        create_schema_unless_there("fence")
    )
}

/// Takes the session-scoped deploy lock and returns sp_getapplock's status
/// as one row (0 or 1: granted; -1: timed out). On Babelfish a refusal also
/// clears the session's error stack ([`after_applock`]), which a caller
/// retrying a deploy on one connection would otherwise fill.
pub(super) fn take_deploy_lock(timeout: Duration) -> String {
    let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    format!(
        "{SESSION_OPTIONS}
DECLARE @Status int, @Resource nvarchar(255) = {lock};
EXEC @Status = sp_getapplock @Resource = @Resource, @LockMode = N'Exclusive',
                             @LockOwner = N'Session', @LockTimeout = {millis};
{clear}
SELECT @Status AS Status;",
        lock = deploy_lock_resource(),
        clear = after_applock!("@Status")
    )
}

/// The session that holds the deploy lock of this database, as one row:
/// session id, login, host, program. Application locks show their resource
/// name in `resource_description` (cut after 32 characters, so the match is
/// on the name's prefix).
pub(super) const DEPLOY_LOCK_HOLDER: &str =
    "SELECT TOP (1) CAST(s.session_id AS int), s.login_name, s.host_name, s.program_name
  FROM sys.dm_tran_locks AS l
  JOIN sys.dm_exec_sessions AS s ON s.session_id = l.request_session_id
 WHERE l.resource_type = N'APPLICATION' AND l.resource_database_id = DB_ID()
   AND l.request_status = N'GRANT' AND l.request_session_id <> @@SPID
   AND l.resource_description LIKE N'%fencepost:deploy:%';";

/// Releases the deploy lock (closing the session would too) and returns, as
/// one row, how many transactions were still open. Everything the runner
/// starts it also ends, so an open one is a script's: its work after that
/// point never committed, and is rolled back here rather than by a disconnect.
pub(super) fn release_deploy_lock() -> String {
    format!(
        "DECLARE @OpenTransactions int = @@TRANCOUNT;
IF @OpenTransactions > 0 ROLLBACK TRANSACTION;
DECLARE @Resource nvarchar(255) = {};
EXEC sp_releaseapplock @Resource = @Resource, @LockOwner = N'Session';
SELECT @OpenTransactions AS OpenTransactions;",
        deploy_lock_resource()
    )
}

/// The session's transaction state as one row of ints: `@@TRANCOUNT`,
/// `XACT_STATE()`, whether IMPLICIT_TRANSACTIONS is on (2) or off (0), and
/// whether the [`MIGRATION_MARKER`] exists (1) or not (0). None of it reads a
/// table, so it opens no implicit transaction ([IMPL]: "SELECT statements
/// that do not select from a table do not start implicit transactions").
pub(super) const TRANSACTION_STATE: &str = "SELECT CAST(@@TRANCOUNT AS int), CAST(XACT_STATE() AS int), \
CAST(@@OPTIONS & 2 AS int), CASE WHEN OBJECT_ID(N'tempdb..#FencepostMigration') IS NULL THEN 0 ELSE 1 END;";

/// A temporary table the runner creates inside each migration's
/// transaction. A rollback removes it, a commit keeps it: when a batch has
/// ended the runner's transaction, it says which of the two ended it.
pub(super) const MIGRATION_MARKER: &str = "#FencepostMigration";

/// How deep the runner nests a migration's transaction: a batch (or a
/// procedure it calls) that runs a COMMIT of its own only lowers the count.
/// [COMMIT] "When used in nested transactions, commits of the inner
/// transactions don't free resources or make their modifications permanent.
/// The data modifications are made permanent and resources freed only when
/// the outer transaction is committed. Each COMMIT TRANSACTION issued when
/// @@TRANCOUNT is greater than one simply decrements @@TRANCOUNT by 1."
pub(super) const MIGRATION_DEPTH: i32 = 2;

/// Opens a migration's transaction, `MIGRATION_DEPTH` levels deep, then
/// turns IMPLICIT_TRANSACTIONS on, so that whatever a batch runs after a
/// ROLLBACK of its own opens a transaction the runner then rolls back
/// instead of autocommitting. [IMPL] "When ON, the system is in implicit
/// transaction mode. This means that if @@TRANCOUNT = 0, any of the
/// following Transact-SQL statements begins a new transaction" (ALTER TABLE,
/// CREATE, DROP, INSERT, UPDATE, DELETE, GRANT, ... among them). The option
/// is turned on after the BEGINs: with it on, "an explicit BEGIN TRANSACTION
/// will start two nested transactions" (the SQL Server 2012 page), which
/// would make the depth depend on the order. Each statement of the
/// migration waits at most `lock_timeout_ms` for a lock (SET LOCK_TIMEOUT:
/// "When a wait for a lock exceeds the timeout value, an error is returned",
/// error 1222), so a caller's long transaction on a fence table fails the
/// deploy instead of queueing every call behind the migration's Sch-M wait.
pub(super) fn begin_migration(lock_timeout_ms: i64) -> String {
    format!(
        "{SESSION_OPTIONS}
BEGIN TRANSACTION;
BEGIN TRANSACTION;
SET IMPLICIT_TRANSACTIONS ON;
SET LOCK_TIMEOUT {lock_timeout_ms};"
    )
}

/// Throws unless the session is inside the migration's transaction as
/// [`begin_migration`] left it: `MIGRATION_DEPTH` levels, committable,
/// IMPLICIT_TRANSACTIONS on. It follows every batch of a migration in the
/// script, and opens the batch that records the migration.
pub(crate) fn in_migration_transaction(what: &str) -> String {
    let message = literal(&format!(
        "not recording {what}: a batch of it ended the transaction the deploy opened for it (a COMMIT or \
         ROLLBACK of its own), left it unable to commit, or turned IMPLICIT_TRANSACTIONS off"
    ));
    format!(
        "IF @@TRANCOUNT <> {MIGRATION_DEPTH} OR XACT_STATE() <> 1 OR (@@OPTIONS & 2) = 0\n    THROW 50190, {message}, 1;\n"
    )
}

/// Ends a migration's transaction: IMPLICIT_TRANSACTIONS off, one COMMIT
/// per level, and no lock timeout for what the deploy runs next.
const END_MIGRATION: &str = "SET IMPLICIT_TRANSACTIONS OFF;
COMMIT TRANSACTION;
COMMIT TRANSACTION;
SET LOCK_TIMEOUT -1;";

/// Throws unless the session is inside exactly one transaction, the one the
/// runner opened, that can still commit, with IMPLICIT_TRANSACTIONS off. It
/// opens every batch that records work as done: a script that committed or
/// rolled back on its own (a ROLLBACK in a CATCH that does not rethrow) would
/// otherwise have the record autocommit without the work, and one that left a
/// transaction open would have the COMMIT only lower the count.
pub(crate) fn in_runner_transaction(what: &str) -> String {
    let message = literal(&format!(
        "not recording {what}: the session is not inside the one committable transaction the deploy opened for it"
    ));
    format!("IF @@TRANCOUNT <> 1 OR XACT_STATE() <> 1 OR (@@OPTIONS & 2) <> 0\n    THROW 50190, {message}, 1;\n")
}

/// Throws unless the session is in no transaction with IMPLICIT_TRANSACTIONS
/// off: what each batch of a migration that runs without a transaction must
/// leave behind.
pub(crate) fn outside_any_transaction(what: &str) -> String {
    let message = literal(&format!(
        "not recording {what}: a batch of it left a transaction open or turned IMPLICIT_TRANSACTIONS on"
    ));
    format!("IF @@TRANCOUNT <> 0 OR (@@OPTIONS & 2) <> 0\n    THROW 50190, {message}, 1;\n")
}

/// Records `procedure` in the journal and commits its deploy, if and only if
/// the deploy's transaction is intact.
pub(super) fn commit_procedure(procedure: &ProcedureSource) -> String {
    format!(
        "{}{}\nCOMMIT TRANSACTION;",
        in_runner_transaction(&format!("procedure {}", procedure.qualified_name())),
        record_procedure(procedure)
    )
}

/// Records a migration in the history and commits it, if and only if the
/// migration's transaction is intact (see [`begin_migration`]). `before`
/// runs after the check, inside the transaction.
pub(super) fn commit_migration(version: i32, name: &str, applied_on_sql: &str, checksum: u64, before: &str) -> String {
    format!(
        "{}{before}{}\n{END_MIGRATION}",
        in_migration_transaction(&format!("migration V{version}__{name}")),
        record_migration(version, name, applied_on_sql, checksum)
    )
}

/// What a migration run without a transaction records itself with: one
/// transaction of its own, checked, around the history row.
pub(super) fn commit_migration_alone(version: i32, name: &str, applied_on_sql: &str, checksum: u64) -> String {
    format!(
        "BEGIN TRANSACTION;\n{}{}\nCOMMIT TRANSACTION;",
        in_runner_transaction(&format!("migration V{version}__{name}")),
        record_migration(version, name, applied_on_sql, checksum)
    )
}

/// Records in the journal that `procedure` was deployed from its shipped
/// text, with the fingerprint of the definition the server now holds.
pub(super) fn record_procedure(procedure: &ProcedureSource) -> String {
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
pub(super) fn begin_procedure_deploy(procedure: &ProcedureSource) -> String {
    format!(
        "{SESSION_OPTIONS}\nBEGIN TRANSACTION;\nIF OBJECT_ID({}, N'P') IS NULL\n    EXEC ({});",
        literal(&procedure.qualified_name()),
        literal(&procedure.stub_text())
    )
}

/// Drops a procedure fencepost deployed and no longer ships, with its journal
/// row, in one transaction. `name` is `schema.name` as the server reports it.
pub(super) fn drop_retired_procedure(name: &str) -> String {
    let (schema, procedure) = name.split_once('.').unwrap_or(("", name));
    let quoted = quote_qualified(schema, procedure);
    let name = literal(name);
    format!(
        "SET XACT_ABORT ON;
BEGIN TRANSACTION;
IF OBJECT_ID({quoted_literal}, N'P') IS NOT NULL
    DROP PROCEDURE {quoted};
DELETE FROM fence.DeployedProcedure WHERE ProcedureName = {name};
COMMIT TRANSACTION;",
        quoted_literal = literal(&quoted)
    )
}

/// The row refinery's history keeps for an applied migration, stamped by
/// the SQL expression `applied_on_sql` (RFC 3339 text, as refinery writes it).
pub(super) fn record_migration(version: i32, name: &str, applied_on_sql: &str, checksum: u64) -> String {
    format!(
        "INSERT INTO {HISTORY_TABLE} (version, name, applied_on, checksum) \
         VALUES ({version}, {}, {applied_on_sql}, N'{checksum}');",
        literal(name)
    )
}

/// The definition hash of one procedure, as a SQL expression. Read from
/// `sys.sql_modules`: Babelfish's `OBJECT_DEFINITION` is `nvarchar(4000)` and
/// fails on a longer definition.
pub(crate) fn definition_hash_of(object_name_literal: &str) -> String {
    format!(
        "(SELECT {} FROM sys.sql_modules AS m WHERE m.object_id = OBJECT_ID({object_name_literal}))",
        definition_hash_sql("m.definition")
    )
}

/// The column of the row the recording returns.
pub(crate) const RECORDED_COLUMN: &str = "FencepostDeploymentId";

/// The T-SQL that records a deployment: the database identity when none is
/// recorded and the engine shows one (a deploy never changes a recorded
/// one: only `fencepost lease recover` may), then the deployment row, in one
/// transaction. `migrations` and `procedures` are T-SQL int expressions. It
/// returns one row: the deployment's id, the recorded identity and the
/// current one.
///
/// The caller runs it only after everything else of the deploy succeeded,
/// outside any transaction. Where fence.Deployment does not exist (sources
/// that do not ship it) it records nothing and returns no row.
pub(crate) fn record_deployment(migrations: &str, procedures: &str) -> String {
    let version = literal(env!("CARGO_PKG_VERSION"));
    // Dynamic, so that a batch naming tables created by this same deploy
    // compiles before they exist.
    let record = format!(
        "SET XACT_ABORT ON;
DECLARE @CurrentIdentity uniqueidentifier, @RecordedIdentity uniqueidentifier, @DeploymentId int;
SELECT @CurrentIdentity = recovery_fork_guid FROM ({CURRENT_IDENTITY_SQL}) AS f;
BEGIN TRANSACTION;
IF @CurrentIdentity IS NOT NULL AND NOT EXISTS (SELECT 1 FROM fence.DatabaseIdentity WHERE Singleton = 1)
    INSERT INTO fence.DatabaseIdentity (Singleton, RecoveryForkGuid, RecordedAtUtc, RecordedBy)
    VALUES (1, @CurrentIdentity, SYSUTCDATETIME(), N'deploy');
SELECT @RecordedIdentity = RecoveryForkGuid FROM fence.DatabaseIdentity WHERE Singleton = 1;
INSERT INTO fence.Deployment (DeployedAtUtc, LoginName, FencepostVersion, MigrationsApplied, ProceduresApplied,
                              DatabaseIdentity)
VALUES (SYSUTCDATETIME(), SUSER_SNAME(), {version}, @Migrations, @Procedures, @CurrentIdentity);
SET @DeploymentId = CAST(SCOPE_IDENTITY() AS int);
COMMIT TRANSACTION;
SELECT @DeploymentId AS {RECORDED_COLUMN}, @RecordedIdentity AS RecordedIdentity, @CurrentIdentity AS CurrentIdentity;"
    );
    format!(
        "IF OBJECT_ID(N'fence.Deployment', N'U') IS NOT NULL
BEGIN
    DECLARE @MigrationsApplied int = {migrations}, @ProceduresApplied int = {procedures};
    EXEC sys.sp_executesql {record}, N'@Migrations int, @Procedures int',
         @Migrations = @MigrationsApplied, @Procedures = @ProceduresApplied;
END;
",
        record = literal(&record)
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
    fn the_bootstrap_refuses_a_fence_schema_another_principal_owns() {
        let sql = bootstrap();
        let owner_check =
            "ELSE IF (SELECT principal_id FROM sys.schemas WHERE name = N'fence') <> USER_ID(N'dbo')\n    THROW 50198";
        assert!(sql.contains(owner_check), "{sql}");
        assert!(
            sql.find(owner_check).unwrap() < sql.find("CREATE TABLE").unwrap(),
            "{sql}"
        );
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
    fn a_migration_is_recorded_only_after_its_transaction_is_checked() {
        let commit = commit_migration(2, "b", "N'now'", 7, "");
        let guard = commit.find("IF @@TRANCOUNT <> 2 OR XACT_STATE() <> 1 OR (@@OPTIONS & 2) = 0\n    THROW 50190");
        let insert = commit.find("INSERT INTO fence.SchemaHistory");
        let implicit_off = commit.find("SET IMPLICIT_TRANSACTIONS OFF;");
        let commit_at = commit.find("COMMIT TRANSACTION;");
        assert!(
            guard.is_some() && guard < insert && insert < implicit_off && implicit_off < commit_at,
            "{commit}"
        );
        assert_eq!(commit.matches("COMMIT TRANSACTION;").count(), 2, "{commit}");
        assert!(commit.contains("not recording migration V2__b"), "{commit}");
    }

    #[test]
    fn a_migration_transaction_is_two_levels_deep_before_implicit_transactions_go_on() {
        let begin = begin_migration(5000);
        let first = begin.find("BEGIN TRANSACTION;").unwrap();
        let second = begin[first + 1..].find("BEGIN TRANSACTION;").map(|i| i + first + 1);
        let implicit = begin.find("SET IMPLICIT_TRANSACTIONS ON;");
        assert!(second.is_some() && second < implicit, "{begin}");
        assert!(begin.starts_with(SESSION_OPTIONS), "{begin}");
        assert!(begin.ends_with("SET LOCK_TIMEOUT 5000;"), "{begin}");
    }

    #[test]
    fn a_procedure_is_journaled_only_after_its_transaction_is_checked() {
        let p = ProcedureSource::parse("fence_api.P.sql", "CREATE PROCEDURE fence_api.P AS SELECT 1;").unwrap();
        let commit = commit_procedure(&p);
        let guard = commit.find("IF @@TRANCOUNT <> 1 OR XACT_STATE() <> 1");
        let journal = commit.find("UPDATE fence.DeployedProcedure");
        assert!(guard.is_some() && guard < journal, "{commit}");
        assert!(commit.trim_end().ends_with("COMMIT TRANSACTION;"), "{commit}");
    }

    #[test]
    fn a_retired_procedure_is_dropped_by_its_quoted_name_with_its_journal_row() {
        let drop = drop_retired_procedure("fence_api.Old]x");
        assert!(drop.contains("DROP PROCEDURE [fence_api].[Old]]x];"), "{drop}");
        assert!(
            drop.contains("DELETE FROM fence.DeployedProcedure WHERE ProcedureName = N'fence_api.Old]x';"),
            "{drop}"
        );
    }

    #[test]
    fn the_lock_timeout_is_in_milliseconds() {
        assert!(take_deploy_lock(Duration::from_secs(2)).contains("@LockTimeout = 2000"));
    }

    #[test]
    fn the_record_is_guarded_by_the_table_and_runs_as_a_batch_of_its_own() {
        let sql = record_deployment("3", "@P");
        assert!(
            sql.starts_with("IF OBJECT_ID(N'fence.Deployment', N'U') IS NOT NULL"),
            "{sql}"
        );
        assert!(
            sql.contains("DECLARE @MigrationsApplied int = 3, @ProceduresApplied int = @P;"),
            "{sql}"
        );
        assert!(sql.contains("EXEC sys.sp_executesql N'SET XACT_ABORT ON;"), "{sql}");
    }

    #[test]
    fn the_record_stamps_the_login_and_version_on_the_server_and_never_replaces_an_identity() {
        let sql = record_deployment("0", "0");
        assert!(sql.contains("SYSUTCDATETIME(), SUSER_SNAME(), N''"), "{sql}");
        assert!(sql.contains(env!("CARGO_PKG_VERSION")), "{sql}");
        assert!(
            sql.contains("IF @CurrentIdentity IS NOT NULL AND NOT EXISTS (SELECT 1 FROM fence.DatabaseIdentity"),
            "{sql}"
        );
        assert!(!sql.contains("UPDATE fence.DatabaseIdentity"), "{sql}");
        assert!(sql.contains("N''deploy''"), "{sql}");
    }
}
