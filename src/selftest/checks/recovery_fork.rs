//! The recovery fork `fencepost status`, `check` (FP019) and `lease recover`
//! read to notice a restore or a failover.

use anyhow::Result;

use crate::selftest::check::{Check, Verdict};
use crate::selftest::context::Context;

pub(crate) const CHECK: Check = Check {
    name: "recovery_fork_visible",
    behaviour: "the database's recovery fork can be read",
    document: "engines.md recovery-fork row; B19 (sys.database_recovery_status)",
    expected: "one row for this database with a recovery_fork_guid (a restore or failover changes it; the \
               selftest does not restore)",
    run: |ctx| Box::pin(run(ctx)),
};

/// Whether the login may see this database's row of
/// sys.database_recovery_status: its owner always; anyone else needs VIEW
/// ANY DATABASE, ALTER ANY DATABASE or CREATE DATABASE in master.
const MAY_SEE: &str = "SELECT CAST(CASE WHEN (SELECT owner_sid FROM sys.databases WHERE database_id = DB_ID()) \
       = SUSER_SID() OR HAS_PERMS_BY_NAME(NULL, NULL, N'VIEW ANY DATABASE') = 1 \
       OR HAS_PERMS_BY_NAME(NULL, NULL, N'ALTER ANY DATABASE') = 1 \
       OR HAS_PERMS_BY_NAME(NULL, NULL, N'CREATE ANY DATABASE') = 1 THEN 1 ELSE 0 END AS int);";

async fn run(ctx: &Context) -> Result<Verdict> {
    let mut session = ctx.session().await?;
    let read = session
        .int(
            "SELECT CAST(COUNT(recovery_fork_guid) AS int) FROM sys.database_recovery_status \
             WHERE database_id = DB_ID();",
        )
        .await;
    Ok(match read {
        Ok(Some(1)) => Verdict::judge(true, "one recovery fork for this database"),
        Ok(n) if ctx.engine.babelfish => Verdict::skipped(format!(
            "the engine shows no recovery fork ({} rows in sys.database_recovery_status), so a restore cannot be \
             told from here",
            n.unwrap_or(0)
        )),
        Ok(n) => {
            // No row and no error: the view hides rows the login may not
            // see. That is a gap in this login's rights, not the engine's.
            if session.int(MAY_SEE).await.ok().flatten() == Some(0) {
                Verdict::skipped(
                    "this login does not see this database's row of sys.database_recovery_status: it needs VIEW ANY \
                     DATABASE (or ALTER ANY DATABASE, CREATE DATABASE in master, or to own the database)",
                )
            } else {
                Verdict::judge(
                    false,
                    format!(
                        "{} rows with a recovery fork, though this login may see the view's row",
                        n.unwrap_or(0)
                    ),
                )
            }
        }
        Err(e) => Verdict::judge(false, format!("reading sys.database_recovery_status failed: {e:#}")),
    })
}
