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
        Ok(n) => Verdict::judge(false, format!("{} rows with a recovery fork", n.unwrap_or(0))),
        Err(e) => Verdict::skipped(format!("this login may not read sys.database_recovery_status: {e:#}")),
    })
}
