//! Which sessions a waiting session waits for, as the engine shows it: the
//! one lookup a watched force-release names its blocker with, and the
//! selftest shows its calls queued behind a held fence row with.

use crate::Connection;

/// The sessions `spid` waits for, if this login may see them; empty when it
/// waits for none (or may not see it). SQL Server and Azure SQL show one in
/// sys.dm_exec_requests. Babelfish's sys.dm_exec_requests has no blocking
/// column, and the `blocked` column of its sys.sysprocesses names any
/// session holding any lock on an object `spid` has locked, granted or not,
/// conflicting or not: a session that merely read the fence table in an open
/// transaction. PostgreSQL's own pg_blocking_pids names only the sessions
/// whose locks conflict with the one `spid` waits for, or that queue for it
/// ahead of `spid`.
pub(crate) async fn blockers_of(
    conn: &mut Connection,
    spid: i32,
    babelfish: bool,
) -> Result<Vec<i32>, tiberius::error::Error> {
    // Only a real other session: SQL Server reports negative ids (-2 to -5)
    // for orphaned distributed transactions and latches, and the session
    // asking is never one to end.
    let sql = if babelfish {
        "SELECT CAST(b.pid AS int) \
         FROM pg_catalog.unnest(pg_catalog.pg_blocking_pids(@P1)) AS b (pid) \
         WHERE b.pid > 0 AND b.pid <> @@SPID"
    } else {
        "SELECT CAST(blocking_session_id AS int) FROM sys.dm_exec_requests \
         WHERE session_id = @P1 AND blocking_session_id > 0 AND blocking_session_id <> @@SPID"
    };
    let rows = conn.query(sql, &[&spid]).await?.into_first_result().await?;
    Ok(rows.iter().filter_map(|row| row.get::<i32, _>(0)).collect())
}
