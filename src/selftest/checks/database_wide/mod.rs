//! The behaviours whose schedule acts on every key of a database (Recover,
//! PruneTenure). The selftest never runs them on the user's database: they
//! run in a scratch database of the run's own (`--scratch-database`), and
//! are otherwise reported as not run, saying why.

mod provision_beside;
mod prune_escalation;
mod recover_behind;

use std::time::Duration;

use crate::selftest::check::Check;
use crate::selftest::session::Answer;

pub(crate) use provision_beside::CHECK as PROVISION_BESIDE_RECOVER;
pub(crate) use prune_escalation::CHECK as PRUNE_BELOW_ESCALATION;
pub(crate) use recover_behind::CHECK as RECOVER_BEHIND_OPEN_TRANSACTION;

/// Why these checks did not run in a run not given a scratch database.
pub(crate) const NOT_ASKED: &str = "Recover and PruneTenure act on every key of the database: the selftest never \
                                    runs them on your data; pass --scratch-database to run them in a database of \
                                    the selftest's own, created and dropped by the run";

const RECOVER: &str = "EXEC fence_admin.Recover @RecoveryId = @P1";

/// Recover's bound on its waits (5 s in all), and the slack a busy engine
/// gets on either side of it: a wait past `LATEST` is let go by the check.
const EARLIEST: Duration = Duration::from_secs(4);
const LATEST: Duration = Duration::from_secs(10);

/// Whether `check` runs in the scratch database.
pub(crate) fn is_database_wide(check: &Check) -> bool {
    [
        RECOVER_BEHIND_OPEN_TRANSACTION.name,
        PROVISION_BESIDE_RECOVER.name,
        PRUNE_BELOW_ESCALATION.name,
    ]
    .contains(&check.name)
}

/// A recovery that gave up waiting, as the procedure ends the wait (50129,
/// or 50127 for its application locks, those of `numbers` the schedule
/// allows) or, on Babelfish, the engine does: its lock-timeout error,
/// which no procedure can catch there.
fn gave_up(answer: &Answer, babelfish: bool, numbers: &[u32]) -> bool {
    match answer {
        Answer::Error { number, message } => {
            numbers.contains(number) || (babelfish && message.contains("lock timeout"))
        }
        Answer::Row(_) => false,
    }
}

/// A call the engine chose as a deadlock victim: 1205 on SQL Server;
/// Babelfish passes PostgreSQL's "deadlock detected" through.
fn deadlock_victim(answer: &Answer) -> bool {
    matches!(answer, Answer::Error { number: 1205, .. })
        || matches!(answer, Answer::Error { message, .. } if message.contains("deadlock detected"))
}
