//! One selftest at a time per key prefix and database: the keys are reused
//! run after run, so two runs at once would meet on them and fail each
//! other's checks. The run holds an application lock on its session for
//! as long as it runs; a second run waits a bounded time for it, then says
//! another selftest is running.

use std::time::Duration;

use super::error::SelftestError;
use crate::Connection;

/// How long a run waits for another to end before it gives up.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// Takes the run's application lock on `conn`'s session (released when the
/// session closes). The database's id and `prefix` are part of its name:
/// runs under different prefixes use different keys and may run at once.
pub(crate) async fn take(conn: &mut Connection, prefix: &str) -> Result<(), SelftestError> {
    let resource = format!("{RESOURCE}<database id> {prefix}");
    let wait_ms = i32::try_from(WAIT.as_millis()).unwrap_or(i32::MAX);
    let answer = async {
        conn.query(
            "DECLARE @Answer int, @Resource nvarchar(255) = CONCAT(@P1, DB_ID(), N' ', @P3); \
             EXEC @Answer = sp_getapplock @Resource = @Resource, @LockMode = N'Exclusive', \
                  @LockOwner = N'Session', @LockTimeout = @P2; \
             SELECT CAST(@Answer AS int), @Resource;",
            &[&RESOURCE, &wait_ms, &prefix],
        )
        .await?
        .into_row()
        .await
    }
    .await
    .map_err(|source| SelftestError::RunLock {
        resource: resource.clone(),
        source,
    })?;
    let named = answer
        .as_ref()
        .and_then(|row| row.get::<&str, _>(1))
        .map(str::to_string);
    match answer.as_ref().and_then(|row| row.get::<i32, _>(0)) {
        // Granted at once, or once the other run ended.
        Some(0 | 1) => Ok(()),
        // Timed out: another run holds it.
        Some(-1) => Err(SelftestError::AnotherRun {
            resource: named.unwrap_or(resource),
            waited_s: WAIT.as_secs(),
            answered: Some(-1),
        }),
        answered => Err(SelftestError::RunLockRefused {
            resource: named.unwrap_or(resource),
            answered,
        }),
    }
}

/// The start of the application lock's name; the database's id and the
/// prefix follow (at most 255 characters, which a prefix of at most 128
/// keeps it within). SQL Server scopes an application lock to its database
/// already; Babelfish keeps every T-SQL database in one PostgreSQL database,
/// whose advisory locks it uses, so there the id keeps two databases apart.
const RESOURCE: &str = "fencepost selftest ";
