//! `fencepost script --uninstall`: a sqlcmd script that removes everything a
//! deploy created: the fence tables (the deploy journal and the migration
//! history among them), the procedures, the schemas `fence`, `fence_api` and
//! `fence_admin`, and the fence roles with their memberships. It runs as one
//! transaction under the deploy lock and refuses, changing nothing, while a
//! lease is held, while a deploy runs, or when the schemas hold objects a
//! deploy did not create.

use std::fmt::Write;

use crate::schema::{DEPLOY_LOCK, FENCE_ROLES, HISTORY_TABLE, PROCEDURE_SCHEMAS};
use crate::source::Sources;
use crate::tsql::literal;

/// The fence tables every shipped migration (and the runner) creates, in an
/// order that drops a table before the table its foreign key names.
const FENCE_TABLES: [&str; 10] = [
    "fence.PublishedOperation",
    "fence.Resource",
    "fence.Tenure",
    "fence.Deployment",
    "fence.DatabaseIdentity",
    "fence.Recovery",
    "fence.Anchor",
    "fence.OperatorOperation",
    "fence.Retirement",
    "fence.DeployedProcedure",
];

/// The schema of the fence tables and of the migration history.
const FENCE_SCHEMA: &str = "fence";

/// Error raised while a lease is held.
pub const UNINSTALL_REFUSED_HELD: u32 = 50193;

/// Renders the uninstall script for a database deployed from `sources` (or
/// by any version whose journal names its procedures).
pub fn render(sources: &Sources) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "-- fencepost {version} uninstall script: removes everything a deploy created, in one transaction:
-- the fence tables with their rows (fence.Resource, the outcome records, the history, the deploy
-- journal fence.DeployedProcedure and the migration history {HISTORY_TABLE}), every procedure of
-- {schemas}, the schemas {FENCE_SCHEMA}, {schemas}, and the roles {roles} (their members are
-- removed from them; the users stay).
-- It refuses, changing nothing, while a lease is held (error {UNINSTALL_REFUSED_HELD}: release or force-release
-- it, or wait until it expires), while a deploy runs (50194), or when those schemas hold an object
-- a deploy did not create (50195). Every publication is lost: back the database up first.
-- Run with sqlcmd (e.g. sqlcmd -S server -d database -i this-file), or in SSMS with SQLCMD mode on.
:on error exit
SET NOCOUNT ON;
SET XACT_ABORT ON;
SET IMPLICIT_TRANSACTIONS OFF;
GO
DECLARE @Lock int, @Sql nvarchar(max), @Name nvarchar(256), @Member sysname, @Message nvarchar(2048);
DECLARE @DeployLock nvarchar(255) = {deploy_lock} + DB_NAME();
DECLARE @Procedures TABLE (Name nvarchar(256) NOT NULL PRIMARY KEY);

BEGIN TRANSACTION;

-- No deploy may run meanwhile: it would create what this drops.
EXEC @Lock = sp_getapplock @Resource = @DeployLock, @LockMode = N'Exclusive', @LockOwner = N'Transaction',
                           @LockTimeout = 5000;
IF @Lock < 0
    THROW 50194, N'Uninstall could not take the deploy lock within 5 seconds: a deploy of this database is running.', 1;

-- Refused while a lease is held. The whole table is locked first (SQL
-- Server: TABLOCKX with HOLDLOCK, to the end of the transaction; Babelfish,
-- which ignores table hints: every row, by an update that changes it), so no
-- lease can be taken between the check and the drop. The wait is bounded:
-- behind an open fence transaction the script fails instead of hanging.
SET LOCK_TIMEOUT 5000;
IF OBJECT_ID(N'fence.Resource', N'U') IS NOT NULL
BEGIN
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL
        EXEC (N'UPDATE fence.Resource SET Generation = Generation;');
    EXEC (N'IF EXISTS (SELECT 1 FROM fence.Resource WITH (TABLOCKX, HOLDLOCK)
                       WHERE Owner IS NOT NULL AND LeaseUntilUtc > SYSUTCDATETIME())
              THROW 50193, N''Uninstall refused: a lease is held (fencepost lease list --held names it). Release or force-release it, or wait until it expires, then run the script again.'', 1;');
END;

-- The procedures: every one the deploy journal names (an older deploy's
-- too) and every one this version ships. Only in {schemas}, which a deploy
-- owns: a journal row naming any other schema (or database) is not a
-- deploy's, and the script drops nothing it did not create.
IF OBJECT_ID(N'fence.DeployedProcedure', N'U') IS NOT NULL
    INSERT INTO @Procedures (Name) SELECT ProcedureName FROM fence.DeployedProcedure
     WHERE PARSENAME(ProcedureName, 2) IN ({schema_list}) AND PARSENAME(ProcedureName, 3) IS NULL;
{shipped}
SET @Name = (SELECT MIN(Name) FROM @Procedures);
WHILE @Name IS NOT NULL
BEGIN
    IF OBJECT_ID(@Name, N'P') IS NOT NULL
    BEGIN
        SET @Sql = N'DROP PROCEDURE ' + QUOTENAME(PARSENAME(@Name, 2)) + N'.' + QUOTENAME(PARSENAME(@Name, 1)) + N';';
        EXEC (@Sql);
    END;
    SET @Name = (SELECT MIN(Name) FROM @Procedures WHERE Name > @Name);
END;

-- The tables, the migration history last.
",
        version = env!("CARGO_PKG_VERSION"),
        schemas = PROCEDURE_SCHEMAS.join(", "),
        schema_list = PROCEDURE_SCHEMAS.map(|s| format!("N'{s}'")).join(", "),
        roles = FENCE_ROLES.join(", "),
        deploy_lock = literal(DEPLOY_LOCK),
        shipped = shipped_procedures(sources),
    );
    for table in FENCE_TABLES.iter().chain([&HISTORY_TABLE]) {
        let _ = writeln!(
            out,
            "IF OBJECT_ID({name}, N'U') IS NOT NULL\n    EXEC (N'DROP TABLE {table};');",
            name = literal(table)
        );
    }
    let _ = write!(
        out,
        "
-- Anything left in the schemas was not created by a deploy: refuse rather
-- than drop it.
SET @Name = (SELECT MIN(s.name + N'.' + o.name)
               FROM sys.objects AS o
               JOIN sys.schemas AS s ON s.schema_id = o.schema_id
              WHERE s.name IN ({schema_names}) AND o.parent_object_id = 0);
IF @Name IS NOT NULL
BEGIN
    SET @Message = N'Uninstall refused: ' + @Name + N' is not an object a deploy created. Move or drop it, then run the script again.';
    THROW 50195, @Message, 1;
END;
",
        schema_names = std::iter::once(FENCE_SCHEMA)
            .chain(PROCEDURE_SCHEMAS)
            .map(literal)
            .collect::<Vec<_>>()
            .join(", "),
    );
    for schema in PROCEDURE_SCHEMAS.iter().chain([&FENCE_SCHEMA]) {
        let _ = writeln!(
            out,
            "IF SCHEMA_ID({name}) IS NOT NULL\n    EXEC (N'DROP SCHEMA {schema};');",
            name = literal(schema)
        );
    }
    out.push_str("\n-- The roles, after their members leave them.\n");
    for role in FENCE_ROLES {
        let _ = write!(
            out,
            "IF DATABASE_PRINCIPAL_ID({name}) IS NOT NULL
BEGIN
    SET @Member = (SELECT MIN(m.name)
                     FROM sys.database_role_members AS rm
                     JOIN sys.database_principals AS m ON m.principal_id = rm.member_principal_id
                    WHERE rm.role_principal_id = DATABASE_PRINCIPAL_ID({name}));
    WHILE @Member IS NOT NULL
    BEGIN
        SET @Sql = N'ALTER ROLE {role} DROP MEMBER ' + QUOTENAME(@Member) + N';';
        EXEC (@Sql);
        SET @Member = (SELECT MIN(m.name)
                         FROM sys.database_role_members AS rm
                         JOIN sys.database_principals AS m ON m.principal_id = rm.member_principal_id
                        WHERE rm.role_principal_id = DATABASE_PRINCIPAL_ID({name}) AND m.name > @Member);
    END;
    EXEC (N'DROP ROLE {role};');
END;
",
            name = literal(role)
        );
    }
    out.push_str(
        "\nCOMMIT TRANSACTION;\nSET LOCK_TIMEOUT -1;\nPRINT N'fencepost is uninstalled from this database.';\nGO\n",
    );
    out
}

/// The statement that adds this version's procedure names to `@Procedures`.
fn shipped_procedures(sources: &Sources) -> String {
    let names: Vec<String> = sources
        .procedures()
        .iter()
        .map(|p| format!("({})", literal(&p.qualified_name())))
        .collect();
    if names.is_empty() {
        return String::new();
    }
    format!(
        "INSERT INTO @Procedures (Name)\nSELECT Name FROM (VALUES {}) AS Shipped (Name)\n WHERE Name NOT IN (SELECT Name FROM @Procedures);",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_drops_every_shipped_procedure_table_schema_and_role() {
        let sources = Sources::embedded().unwrap();
        let script = render(&sources);
        for procedure in sources.procedures() {
            assert!(
                script.contains(&literal(&procedure.qualified_name())),
                "{}",
                procedure.qualified_name()
            );
        }
        for table in FENCE_TABLES.iter().chain([&HISTORY_TABLE]) {
            assert!(script.contains(&format!("DROP TABLE {table};")), "{table}");
        }
        for schema in PROCEDURE_SCHEMAS.iter().chain([&FENCE_SCHEMA]) {
            assert!(script.contains(&format!("DROP SCHEMA {schema};")), "{schema}");
        }
        for role in FENCE_ROLES {
            assert!(script.contains(&format!("DROP ROLE {role};")), "{role}");
        }
        assert!(script.contains(&format!("THROW {UNINSTALL_REFUSED_HELD}")));
    }

    #[test]
    fn every_table_a_migration_creates_is_dropped() {
        let sources = Sources::embedded().unwrap();
        for migration in sources.migrations() {
            for line in migration.batches().iter().flat_map(|b| b.text.lines()) {
                let Some(rest) = line.trim_start().strip_prefix("CREATE TABLE ") else {
                    continue;
                };
                let table = rest.split_whitespace().next().unwrap_or_default();
                // V2 copies tables aside and drops the copies itself.
                if table.starts_with("fence.V2_") {
                    continue;
                }
                assert!(FENCE_TABLES.contains(&table), "{} creates {table}", migration.file());
            }
        }
    }
}
