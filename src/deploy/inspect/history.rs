//! The deploy history as `status` reads it: one fence.Deployment row per
//! successful deploy (who, when, which fencepost, what it applied, on which
//! database identity). The T-SQL that writes a row is
//! [`record_deployment`](crate::deploy::sql::record_deployment).

use serde::Serialize;
use uuid::Uuid;

use crate::connection::Connection;
use crate::deploy::error::DeployError;
use crate::deploy::run::Session;

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
    let sets = Session::new(conn)
        .run(&sql)
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
