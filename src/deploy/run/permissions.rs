//! The last request of a deploy: every batch of every permission script, then
//! the record of the deployment (when everything succeeded), then the release
//! of the deploy lock, in one round trip.
//!
//! Each batch still runs as a batch of its own (`EXEC sys.sp_executesql`, its
//! own scope and compilation), in order, each as often as its `GO n` says. A
//! batch that fails stops the rest, and the failure names its script, batch and
//! line as a batch sent alone would: a TRY…CATCH records an error the engine
//! lets it catch, and a marker row before each batch says which one ran when
//! the engine ends the whole request instead (Babelfish does, for some
//! compile errors).

use tiberius::Row;
use uuid::Uuid;

use super::lock;
use super::session::{Session, batch_failed};
use crate::deploy::error::DeployError;
use crate::deploy::sql::{RECORDED_COLUMN, release_deploy_lock};
use crate::source::ScriptSource;
use crate::tsql::{Batch, literal};

/// One run of one batch of a permission script.
struct Step<'a> {
    /// Which script, counting from 0.
    script: usize,
    /// `permissions/<file>`.
    file: String,
    /// Which batch of the script, counting from 1.
    number: usize,
    batch: &'a Batch,
}

/// What the request did.
pub(crate) struct PermissionsRun {
    /// How many scripts, in order, ran every batch.
    pub applied: usize,
    /// The recorded deployment, when the sources ship fence.Deployment and
    /// everything succeeded.
    pub recorded: Option<RecordedDeployment>,
    /// The first error, if any.
    pub error: Option<DeployError>,
}

/// What the record of a deployment returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RecordedDeployment {
    /// fence.Deployment's id.
    pub id: Option<i32>,
    /// The identity fence.DatabaseIdentity holds after the record.
    pub recorded_identity: Option<uuid::Uuid>,
    /// The identity the database shows.
    pub current_identity: Option<uuid::Uuid>,
}

/// The column of the row each batch is announced by.
const STEP_COLUMN: &str = "FencepostStep";
/// The column of the row that reports a failed batch, or none.
const FAILED_COLUMN: &str = "FencepostFailedStep";
/// The column of the release's row.
const OPEN_COLUMN: &str = "OpenTransactions";
/// The column of the row that reports a failed record of the deployment.
const RECORD_FAILED_COLUMN: &str = "FencepostRecordFailed";

/// SQL Server's and Babelfish's error when a batch run by `sp_executesql`
/// ends with more transactions open than it started with. The transaction it
/// left open is what matters, and the release reports it.
const TRANSACTION_COUNT_MISMATCH: i32 = 266;

/// Applies `scripts`, records the deployment with `record` (T-SQL from
/// [`record_deployment`](crate::deploy::sql::record_deployment)) when
/// they all succeeded, and releases the deploy lock in one request. When the
/// request ends before its release ran, the lock is released in another.
pub(crate) async fn apply_and_release(
    session: &mut Session<'_>,
    scripts: &[ScriptSource],
    record: &str,
) -> PermissionsRun {
    let steps = steps(scripts);
    let (rows, error) = session.run_until_error(&request(&steps, record)).await;
    let mut announced = None;
    let mut failed = None;
    let mut open = None;
    let mut recorded = None;
    let mut record_failed = None;
    for row in &rows {
        match row.columns().first().map(|c| c.name()) {
            Some(STEP_COLUMN) => announced = row.get::<i32, usize>(0),
            Some(FAILED_COLUMN) => failed = caught_failure(row, &steps),
            Some(OPEN_COLUMN) => open = row.get::<i32, usize>(0),
            Some(RECORDED_COLUMN) => {
                let (id, recorded_identity, current_identity) = read_recorded_row(row);
                recorded = Some(RecordedDeployment {
                    id,
                    recorded_identity,
                    current_identity,
                });
            }
            Some(RECORD_FAILED_COLUMN) => record_failed = Some(record_failure(row)),
            _ => {}
        }
    }
    let index = |step: Option<i32>| {
        step.and_then(|s| usize::try_from(s).ok())
            .and_then(|s| s.checked_sub(1))
    };

    if let Some(error) = error {
        // The request ended early: nothing after the batch announced last ran,
        // the release included.
        let _ = lock::release(session).await;
        let at = index(announced);
        let error = match at.and_then(|i| steps.get(i)) {
            Some(step) => batch_failed(&step.file, step.number, step.batch, error),
            None => DeployError::server("applying the permission scripts")(error),
        };
        return PermissionsRun {
            applied: applied_before(&steps, at.unwrap_or(0)),
            recorded: None,
            error: Some(error),
        };
    }
    if let Some((at, error)) = failed {
        return PermissionsRun {
            applied: applied_before(&steps, at),
            recorded: None,
            error: Some(error),
        };
    }
    let error = match open {
        Some(0) => None,
        // The scripts' work inside the open transaction was rolled back:
        // which of them committed in full cannot be told.
        Some(open) => {
            return PermissionsRun {
                applied: 0,
                recorded: None,
                error: Some(DeployError::TransactionLeftOpen { open }),
            };
        }
        None => Some(DeployError::unexpected(
            "releasing the deploy lock",
            "no transaction count came back",
        )),
    };
    if error.is_some() {
        return PermissionsRun {
            applied: 0,
            recorded: None,
            error,
        };
    }
    // Every script ran; only the record failed.
    PermissionsRun {
        applied: scripts.len(),
        recorded: if record_failed.is_some() { None } else { recorded },
        error: record_failed,
    }
}

/// The error the record of the deployment caught.
fn record_failure(row: &Row) -> DeployError {
    let code = row.get::<i32, usize>(1).unwrap_or_default();
    let message = row.get::<&str, usize>(2).unwrap_or_default();
    DeployError::unexpected(
        "recording the deployment in fence.Deployment",
        format_args!("error {code}: {message}"),
    )
}

/// What the recording returned: the deployment's id, the recorded identity
/// and the current one.
fn read_recorded_row(row: &tiberius::Row) -> (Option<i32>, Option<Uuid>, Option<Uuid>) {
    (
        row.get::<i32, usize>(0),
        row.get::<Uuid, usize>(1),
        row.get::<Uuid, usize>(2),
    )
}

/// Every run of every batch, in order.
fn steps(scripts: &[ScriptSource]) -> Vec<Step<'_>> {
    let mut steps = Vec::new();
    for (script, source) in scripts.iter().enumerate() {
        let file = format!("permissions/{}", source.file());
        for (index, batch) in source.batches().iter().enumerate() {
            for _ in 0..batch.repeat {
                steps.push(Step {
                    script,
                    file: file.clone(),
                    number: index + 1,
                    batch,
                });
            }
        }
    }
    steps
}

/// How many scripts ran in full before step `at` (counting from 0).
fn applied_before(steps: &[Step<'_>], at: usize) -> usize {
    match steps.get(at) {
        Some(step) => step.script,
        None => steps.last().map_or(0, |s| s.script + 1),
    }
}

/// The request: each step announced by a row and run by `sp_executesql`
/// inside one TRY, the failure the CATCH saw as one row, then `record` when
/// nothing failed and no transaction is open (its own failure as one row),
/// then the release.
fn request(steps: &[Step<'_>], record: &str) -> String {
    let mut sql = String::from(
        "DECLARE @Step int = 0, @FailedStep int, @ErrorNumber int, @ErrorMessage nvarchar(4000), @ErrorLine int;
BEGIN TRY
",
    );
    for (index, step) in steps.iter().enumerate() {
        let number = index + 1;
        sql += &format!(
            "    SET @Step = {number};\n    SELECT CAST({number} AS int) AS {STEP_COLUMN};\n    EXEC sys.sp_executesql {};\n",
            literal(&step.batch.text)
        );
    }
    sql += &format!(
        "    SET @Step = 0;
END TRY
BEGIN CATCH
    SELECT @FailedStep = @Step, @ErrorNumber = ERROR_NUMBER(), @ErrorMessage = ERROR_MESSAGE(),
           @ErrorLine = ERROR_LINE();
END CATCH;
IF @ErrorNumber = {TRANSACTION_COUNT_MISMATCH} AND @@TRANCOUNT > 0
    SET @FailedStep = NULL;
SELECT @FailedStep AS {FAILED_COLUMN}, @ErrorNumber AS ErrorNumber, @ErrorMessage AS ErrorMessage,
       @ErrorLine AS ErrorLine;
IF @ErrorNumber IS NULL AND @@TRANCOUNT = 0
BEGIN
    BEGIN TRY
{record}    END TRY
    BEGIN CATCH
        IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
        SELECT CAST(1 AS int) AS {RECORD_FAILED_COLUMN}, ERROR_NUMBER() AS ErrorNumber, ERROR_MESSAGE() AS ErrorMessage;
    END CATCH;
END;
{}",
        release_deploy_lock()
    );
    sql
}

/// The failure the CATCH recorded, as the step (counting from 0) and the
/// error a batch sent alone would have given; `None` when none failed.
fn caught_failure(row: &Row, steps: &[Step<'_>]) -> Option<(usize, DeployError)> {
    let at = usize::try_from(row.get::<i32, usize>(0)?).ok()?.checked_sub(1)?;
    let step = steps.get(at)?;
    let code = row.get::<i32, usize>(1).unwrap_or_default();
    let message = row.get::<&str, usize>(2).unwrap_or_default();
    let line = usize::try_from(row.get::<i32, usize>(3).unwrap_or(1))
        .unwrap_or(1)
        .max(1);
    Some((
        at,
        DeployError::BatchFailed {
            file: step.file.clone(),
            batch: step.number,
            line: step.batch.line + line - 1,
            message: format!("error {code}: {message}"),
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::Sources;

    fn scripts() -> Sources {
        Sources::from_files(
            vec![],
            vec![],
            vec![
                ("010_a.sql".into(), b"SELECT 1;\nGO\nSELECT 'it''s';\nGO 2\n".to_vec()),
                ("020_b.sql".into(), b"SELECT 3;\n".to_vec()),
            ],
        )
        .unwrap()
    }

    #[test]
    fn every_run_of_every_batch_is_a_step_of_its_own_in_order() {
        let sources = scripts();
        let steps = steps(sources.permissions());
        let seen: Vec<(&str, usize)> = steps.iter().map(|s| (s.file.as_str(), s.number)).collect();
        assert_eq!(
            seen,
            [
                ("permissions/010_a.sql", 1),
                ("permissions/010_a.sql", 2),
                ("permissions/010_a.sql", 2),
                ("permissions/020_b.sql", 1)
            ]
        );
    }

    #[test]
    fn each_batch_runs_as_its_own_batch_announced_before_it_and_the_lock_is_released_last() {
        let sources = scripts();
        let sql = request(&steps(sources.permissions()), "SELECT 42 AS Record;\n");
        assert_eq!(sql.matches("EXEC sys.sp_executesql").count(), 4, "{sql}");
        assert!(sql.contains("EXEC sys.sp_executesql N'SELECT ''it''''s'';"), "{sql}");
        let second = sql.find("AS FencepostStep;\n    EXEC sys.sp_executesql N'SELECT ''it");
        assert!(
            second.is_some() && sql.find("SELECT CAST(2 AS int) AS FencepostStep") < second,
            "{sql}"
        );
        let release = sql.find("sp_releaseapplock").expect("the release");
        let record =
            sql.find("IF @ErrorNumber IS NULL AND @@TRANCOUNT = 0\nBEGIN\n    BEGIN TRY\nSELECT 42 AS Record;");
        assert!(
            sql.find("AS FencepostFailedStep") < record && record < Some(release),
            "{sql}"
        );
    }

    #[test]
    fn scripts_before_a_failing_step_count_as_applied() {
        let sources = scripts();
        let steps = steps(sources.permissions());
        assert_eq!(applied_before(&steps, 0), 0);
        assert_eq!(applied_before(&steps, 2), 0);
        assert_eq!(applied_before(&steps, 3), 1);
        assert_eq!(applied_before(&steps, 4), 2);
    }
}
