//! The end of a run: its rows deleted from the fence tables, all or none,
//! within a bound, and the report told what happened.

use std::time::Duration;

use crate::Connection;
use crate::bench::keys::RunKeys;

/// The longest the clean-up may take. A DELETE blocked behind someone
/// else's lock must not hang the run; when it is given up the connection
/// is dropped, and the server rolls the transaction back.
const CLEANUP_BOUND: Duration = Duration::from_secs(30);

/// All four tables in one transaction, so a refusal or an error on one
/// leaves none of the run's rows half-deleted.
const DELETE: &str = "SET XACT_ABORT ON; \
     BEGIN TRANSACTION; \
     DELETE FROM fence.OperatorOperation WHERE ResourceKey LIKE @P1; \
     DELETE FROM fence.PublishedOperation WHERE ResourceKey LIKE @P1; \
     DELETE FROM fence.Tenure WHERE ResourceKey LIKE @P1; \
     DELETE FROM fence.Resource WHERE ResourceKey LIKE @P1; \
     COMMIT TRANSACTION;";

/// What a run left behind: "deleted at the end of the run", or why not.
/// `admin` is not used after this: on a timeout it is left mid-call.
pub(crate) async fn delete_run_rows(admin: &mut Connection, keys: &RunKeys) -> String {
    let pattern = keys.like_pattern();
    let outcome = tokio::time::timeout(CLEANUP_BOUND, async {
        let result = admin.execute(DELETE, &[&pattern]).await.map(drop);
        if result.is_err() {
            // XACT_ABORT rolled back on the server; this clears an error that did not.
            let _ = admin.simple_query("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;").await;
        }
        result
    })
    .await;
    const LEFT: &str = "left in the fence tables (none deleted)";
    const HELD: &str = "a lease a failed check still holds ends within 30 s";
    match outcome {
        Ok(Ok(())) => "deleted at the end of the run".to_string(),
        Ok(Err(e)) => format!("{LEFT}: the delete failed: {e}; {HELD}; a deploy login may delete them"),
        Err(_) => format!(
            "{LEFT}: the delete did not finish within {} s (another session's lock?) and was rolled back; {HELD}",
            CLEANUP_BOUND.as_secs()
        ),
    }
}
