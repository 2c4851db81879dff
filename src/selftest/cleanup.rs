//! The end of a run: the rows of the keys its checks touched deleted from
//! the fence tables, all or none, within a bound, when the login may; kept
//! for the next run (which reuses the same keys) when it may not.

use std::time::Duration;

use super::keys::{Keys, MAX_KEYS, RUN_MARKER};
use crate::Connection;

/// The longest the clean-up may take. A DELETE blocked behind someone
/// else's lock must not hang the run; when it is given up the connection
/// is dropped, and the server rolls the transaction back.
pub(crate) const CLEANUP_BOUND: Duration = Duration::from_secs(30);

/// The longest the clean-up may take once the run was stopped: together
/// with the scratch database's drop, within the 7.5 s a cancelled CI job
/// leaves between SIGTERM and SIGKILL.
pub(crate) const STOPPED_CLEANUP_BOUND: Duration = Duration::from_secs(2);

/// Whether the login may delete from every fence table the run writes. A
/// `fence_operator` that is not the database's owner is denied it on schema
/// `fence` (SQL Server), and a service login was never granted it.
const MAY_DELETE: &str = "SELECT CAST(CASE WHEN \
       HAS_PERMS_BY_NAME(N'fence.OperatorOperation', N'OBJECT', N'DELETE') = 1 \
   AND HAS_PERMS_BY_NAME(N'fence.PublishedOperation', N'OBJECT', N'DELETE') = 1 \
   AND HAS_PERMS_BY_NAME(N'fence.Tenure', N'OBJECT', N'DELETE') = 1 \
   AND HAS_PERMS_BY_NAME(N'fence.Resource', N'OBJECT', N'DELETE') = 1 THEN 1 ELSE 0 END AS int);";

/// What the end of a run did with its rows.
pub(crate) struct Cleanup {
    /// For the report's header.
    pub(crate) said: String,
    /// The run meant to delete rows and some are still there.
    pub(crate) left: bool,
}

/// Deletes the rows of the keys in `keys` (each key exactly: an index seek
/// per key, never a scan by prefix). `admin` is not used after this: on a
/// timeout it is left mid-call.
pub(crate) async fn delete_run_rows(admin: &mut Connection, keys: &Keys, bound: Duration) -> Cleanup {
    let used = keys.used();
    if used.is_empty() {
        return Cleanup {
            said: "no key touched".to_string(),
            left: false,
        };
    }
    let may = match admin.simple_query(MAY_DELETE).await {
        Ok(stream) => stream.into_row().await.ok().flatten().and_then(|r| r.get::<i32, _>(0)),
        Err(_) => None,
    };
    if may == Some(0) {
        return Cleanup {
            said: format!(
                "kept: the {} keys under {} stay, unheld, with their history (fence.Tenure, fence.PublishedOperation, \
                 fence.OperatorOperation), as this login may not delete from the fence tables; the next run reuses \
                 the same keys, so it adds no fence row (their history grows until `lease prune` and \
                 `lease prune-outcomes` delete it by age); the database's owner (dbo) may delete them",
                used.len(),
                keys.prefix()
            ),
            left: false,
        };
    }
    let (sent, over) = used.split_at(used.len().min(MAX_KEYS));
    let outcome = tokio::time::timeout(bound, async {
        let list = (1..=sent.len())
            .map(|i| format!("@P{i}"))
            .collect::<Vec<_>>()
            .join(", ");
        // Only a key whose publication a selftest wrote, or that has none,
        // is the run's to delete: one that holds anything else is someone
        // else's and stays (the run never used it either).
        let marker = sent.len() + 1;
        let ours = format!(
            "SELECT ResourceKey FROM fence.Resource WHERE ResourceKey IN ({list}) \
               AND (Payload IS NULL OR CHARINDEX(@P{marker}, Payload) > 0)"
        );
        let sql = format!(
            "SET XACT_ABORT ON; BEGIN TRANSACTION; \
             DELETE FROM fence.OperatorOperation WHERE ResourceKey IN ({ours}); \
             DELETE FROM fence.PublishedOperation WHERE ResourceKey IN ({ours}); \
             DELETE FROM fence.Tenure WHERE ResourceKey IN ({ours}); \
             DELETE FROM fence.Resource WHERE ResourceKey IN ({ours}); \
             COMMIT TRANSACTION; \
             SELECT ResourceKey FROM fence.Resource WHERE ResourceKey IN ({list});"
        );
        let mut args: Vec<&dyn tiberius::ToSql> = sent.iter().map(|k| k as &dyn tiberius::ToSql).collect();
        args.push(&RUN_MARKER);
        let result = match admin.query(sql, &args).await {
            Ok(stream) => stream.into_first_result().await.map(|rows| {
                rows.iter()
                    .filter_map(|r| r.get::<&str, _>(0).map(str::to_string))
                    .collect::<Vec<_>>()
            }),
            Err(e) => Err(e),
        };
        if result.is_err() {
            // XACT_ABORT rolled back on the server; this clears an error that did not.
            let _ = admin.simple_query("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;").await;
        }
        result
    })
    .await;
    let left = format!(
        "LEFT BEHIND: the rows of {} keys under {} (none deleted)",
        used.len(),
        keys.prefix()
    );
    const HELD: &str = "a lease a failed check still holds ends within 30 s; the next run reuses the keys";
    match outcome {
        Ok(Ok(kept)) if !kept.is_empty() => Cleanup {
            said: format!(
                "deleted at the end of the run, but for {} key(s) that hold a publication no selftest wrote, kept \
                 untouched as not the run's: {}",
                kept.len(),
                kept.join(", ")
            ),
            left: false,
        },
        Ok(Ok(_)) if over.is_empty() => Cleanup {
            said: "deleted at the end of the run".to_string(),
            left: false,
        },
        Ok(Ok(_)) => Cleanup {
            said: format!(
                "LEFT BEHIND: the rows of {} keys past the {MAX_KEYS} a run deletes: {}",
                over.len(),
                over.join(", ")
            ),
            left: true,
        },
        Ok(Err(e)) => Cleanup {
            said: format!("{left}: the delete failed: {e}; {HELD}"),
            left: true,
        },
        Err(_) => Cleanup {
            said: format!(
                "{left}: the delete did not finish within {} s (another session's lock?) and was rolled back; {HELD}",
                bound.as_secs()
            ),
            left: true,
        },
    }
}
