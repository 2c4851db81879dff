//! The deploy history: one fence.Deployment row per successful deploy (who,
//! when, which fencepost, what it applied, on which database identity), and
//! the first record of the database identity.
//!
//! The same T-SQL ends `migrate`'s last request and the offline script, so a
//! reviewed script records its deployment as a connected deploy does.

use serde::Serialize;
use uuid::Uuid;

use crate::connection::Connection;

use super::error::DeployError;
use super::identity::CURRENT_IDENTITY_SQL;
use crate::tsql::literal;

/// The column of the row the recording returns.
pub(super) const RECORDED_COLUMN: &str = "FencepostDeploymentId";

/// One recorded deployment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Deployment {
    /// Its number, rising.
    pub id: i32,
    /// When it finished (RFC 3339, UTC, from the server's clock).
    pub deployed_at_utc: String,
    /// The login that ran it (`SUSER_SNAME()`).
    pub login: String,
    /// The version of fencepost that ran it.
    pub fencepost_version: String,
    /// How many migrations it applied.
    pub migrations_applied: i32,
    /// How many procedures it created or altered.
    pub procedures_applied: i32,
    /// The database identity when it ran, where the engine shows one.
    pub database_identity: Option<Uuid>,
}

/// The most recent deployments and how many are recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeployHistory {
    /// How many deployments are recorded.
    pub recorded: i32,
    /// The most recent first.
    pub recent: Vec<Deployment>,
}

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
pub fn record_deployment(migrations: &str, procedures: &str) -> String {
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

/// What the recording returned: the deployment's id, the recorded identity
/// and the current one.
pub(super) fn read_recorded_row(row: &tiberius::Row) -> (Option<i32>, Option<Uuid>, Option<Uuid>) {
    (
        row.get::<i32, usize>(0),
        row.get::<Uuid, usize>(1),
        row.get::<Uuid, usize>(2),
    )
}

/// The last `limit` deployments, most recent first, and how many are
/// recorded; empty where fence.Deployment does not exist yet.
pub async fn read_history(conn: &mut Connection, limit: u32) -> Result<DeployHistory, DeployError> {
    const CONTEXT: &str = "reading the deploy history (fence.Deployment)";
    // Babelfish writes style 127 with a space for the `T`.
    let sql = format!(
        "IF OBJECT_ID(N'fence.Deployment', N'U') IS NOT NULL
    EXEC sys.sp_executesql N'SELECT CAST(COUNT(*) AS int) FROM fence.Deployment;
SELECT TOP ({limit}) DeploymentId, REPLACE(CONVERT(nvarchar(33), DeployedAtUtc, 127), N'' '', N''T'') + N''Z'',
       LoginName, FencepostVersion,
       MigrationsApplied, ProceduresApplied, DatabaseIdentity
  FROM fence.Deployment ORDER BY DeploymentId DESC;';"
    );
    let sets = conn
        .simple_query(sql)
        .await
        .map_err(DeployError::server(CONTEXT))?
        .into_results()
        .await
        .map_err(DeployError::server(CONTEXT))?;
    let [count, rows] = &sets[..] else {
        return Ok(DeployHistory::default());
    };
    Ok(DeployHistory {
        recorded: count.first().and_then(|r| r.get::<i32, usize>(0)).unwrap_or(0),
        recent: rows.iter().map(deployment).collect(),
    })
}

fn deployment(row: &tiberius::Row) -> Deployment {
    let text = |i: usize| row.get::<&str, usize>(i).unwrap_or_default().to_owned();
    Deployment {
        id: row.get::<i32, usize>(0).unwrap_or_default(),
        deployed_at_utc: text(1),
        login: text(2),
        fencepost_version: text(3),
        migrations_applied: row.get::<i32, usize>(4).unwrap_or_default(),
        procedures_applied: row.get::<i32, usize>(5).unwrap_or_default(),
        database_identity: row.get::<Uuid, usize>(6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
