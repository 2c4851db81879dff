//! The T-SQL a fenced transaction sends around the work's own statements.
//!
//! The fence row's lock alone does not fence a transaction whose SQL can end
//! it: a COMMIT (or a procedure that commits and opens a new transaction)
//! releases the lock, and so does a rollback to a savepoint taken before the
//! fence call ("A ROLLBACK TRANSACTION statement specifying a savepoint_name
//! releases any locks that are acquired beyond the savepoint", ROLLBACK
//! TRANSACTION). So the lease is asserted once more where the writes become
//! durable, in the batch that commits, and every statement checks that the
//! transaction it runs in is still the one the lease was asserted in.
//!
//! The lease and the transaction's identity are kept in the session's
//! context (`sp_set_session_context`), so these batches carry no parameters
//! and keep one text each: the commit cannot be parameterized, since a
//! COMMIT inside `sp_executesql` leaves it with another transaction count
//! than it began with (error 266).

/// Where the transaction runs: the engines name a transaction differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Engine {
    /// SQL Server 2016 or later, or Azure SQL: `CURRENT_TRANSACTION_ID()`.
    SqlServer,
    /// Babelfish, where a T-SQL transaction is a PostgreSQL one:
    /// `pg_catalog.txid_current()`, the top-level transaction's id, which a
    /// savepoint does not change.
    Babelfish,
}

/// Opens the transaction; the lease is asserted in the next request.
pub(super) const BEGIN: &str = "SET XACT_ABORT ON; BEGIN TRANSACTION;";

/// Keeps the transaction's id in the session's context for the batches
/// below; sent after the assert, in the request that asserts the lease.
/// SQL Server compiles the whole batch, so the Babelfish function is named
/// only in a string it never runs.
const RECORD_TRANSACTION: &str = "
DECLARE @Transaction bigint;
IF SERVERPROPERTY(N'Babelfish') IS NULL
    SET @Transaction = CURRENT_TRANSACTION_ID();
ELSE
    EXEC sp_executesql N'SET @Id = pg_catalog.txid_current();', N'@Id bigint OUTPUT', @Id = @Transaction OUTPUT;
EXEC sp_set_session_context N'fencepost.transaction', @Transaction;";

/// Keeps a single lease (`AssertHolder`'s parameters `@P1` to `@P4`) in the
/// session's context, for the commit to assert it again.
const RECORD_LEASE: &str = "
EXEC sp_set_session_context N'fencepost.key', @P1;
EXEC sp_set_session_context N'fencepost.owner', @P2;
EXEC sp_set_session_context N'fencepost.generation', @P3;
EXEC sp_set_session_context N'fencepost.source_version', @P4;";

/// Answers the transaction's id and the engine.
const RECORD_ANSWER: &str = "
SELECT @Transaction AS TransactionId,
       CAST(CASE WHEN SERVERPROPERTY(N'Babelfish') IS NULL THEN 0 ELSE 1 END AS int) AS Babelfish;";

/// Sent after `AssertHolder` in the request that asserts the lease (so with
/// its parameters `@P1` to `@P4`): keeps the lease and the transaction's id
/// in the session's context, and answers the id and the engine.
pub(super) fn record_lease() -> String {
    format!("{RECORD_TRANSACTION}{RECORD_LEASE}{RECORD_ANSWER}")
}

/// Sent after `AssertHolderSet`: keeps the transaction's id alone, since the
/// commit names the set in its own text (see [`assert_set`]).
pub(super) fn record_set() -> String {
    format!("{RECORD_TRANSACTION}{RECORD_ANSWER}")
}

/// The transaction the lease was asserted in, as a condition that is true
/// when the session now runs another (or none): a missing record counts as
/// another.
fn swapped(engine: Engine) -> &'static str {
    match engine {
        Engine::SqlServer => {
            "(@@TRANCOUNT = 0 OR CURRENT_TRANSACTION_ID() \
             <> ISNULL(CAST(SESSION_CONTEXT(N'fencepost.transaction') AS bigint), -1))"
        }
        Engine::Babelfish => {
            "(@@TRANCOUNT = 0 OR pg_catalog.txid_current() \
             <> ISNULL(CAST(SESSION_CONTEXT(N'fencepost.transaction') AS bigint), -1))"
        }
    }
}

const SWAPPED_MESSAGE: &str = "N'the fenced transaction has ended or was replaced: the work''s own SQL committed or \
                               rolled it back (and may have opened another), so nothing more runs fenced'";

/// Sent before and after each statement of the work: a statement that finds
/// the transaction ended (the work's own COMMIT or ROLLBACK, a procedure
/// that rolled back, an error that did) or replaced by another (a COMMIT
/// followed by BEGIN TRANSACTION) would otherwise run, and commit, outside
/// the fence.
pub(super) fn still_fenced(engine: Engine) -> String {
    format!("IF {} THROW 50115, {SWAPPED_MESSAGE}, 1;", swapped(engine))
}

/// Commits only the transaction the lease was asserted in, and only while
/// the lease is held: `AssertHolder` runs again right before the COMMIT, so
/// whatever the work's SQL did to its locks (a rolled-back savepoint, a
/// COMMIT and a new transaction), nothing commits unless the caller holds
/// the current, unexpired lease at that moment, with the fence row locked
/// until the COMMIT. XACT_ABORT is set again here, whatever the work set.
///
/// Anything that fails before the COMMIT (a refusal, 50110 to 50114; a
/// replaced transaction, 50115; any other error) is caught, everything is
/// rolled back, and the batch answers the failure as a row rather than
/// throwing it again: a THROW in a CATCH block after XACT_ABORT doomed the
/// transaction re-raises the first error on Babelfish, whatever it names.
/// So an error of this batch comes from the COMMIT itself or from what no
/// CATCH sees (a lost connection), and only then is the outcome in doubt.
///
/// Answers `OpenBefore`: 1 is the client's own transaction, committed
/// unless `FailedNumber` is set; more means the work's SQL left one open
/// inside it (all is rolled back), 0 that the work's SQL ended it.
pub(super) fn commit(engine: Engine, assert: &str) -> String {
    format!(
        "SET XACT_ABORT ON;
DECLARE @OpenBefore int = @@TRANCOUNT, @FailedNumber int, @FailedMessage nvarchar(2048);
BEGIN TRY
    IF @OpenBefore = 1 AND {swapped}
        THROW 50115, {SWAPPED_MESSAGE}, 1;
    IF @OpenBefore = 1
    BEGIN
{assert}
    END
END TRY
BEGIN CATCH
    SELECT @FailedNumber = ERROR_NUMBER(), @FailedMessage = ERROR_MESSAGE();
    IF XACT_STATE() <> 0
        ROLLBACK TRANSACTION;
END CATCH;
IF @FailedNumber IS NULL AND @OpenBefore = 1
    COMMIT TRANSACTION;
ELSE IF @FailedNumber IS NULL AND @OpenBefore > 1
    ROLLBACK TRANSACTION;
SELECT @OpenBefore AS OpenBefore, @@TRANCOUNT AS OpenAfter, @FailedNumber AS FailedNumber,
       @FailedMessage AS FailedMessage;",
        swapped = swapped(engine)
    )
}

/// The assert of a single lease in the commit, from the session's context
/// (see [`record_lease`]).
pub(super) const ASSERT_LEASE: &str =
    "        DECLARE @Key nvarchar(4000) = CAST(SESSION_CONTEXT(N'fencepost.key') AS nvarchar(4000)),
                @Owner uniqueidentifier = CAST(SESSION_CONTEXT(N'fencepost.owner') AS uniqueidentifier),
                @Generation bigint = CAST(SESSION_CONTEXT(N'fencepost.generation') AS bigint),
                @SourceVersion bigint = CAST(SESSION_CONTEXT(N'fencepost.source_version') AS bigint);
        EXEC fence_api.AssertHolder @ResourceKey = @Key, @Owner = @Owner, @Generation = @Generation,
                                    @SourceVersion = @SourceVersion;";

/// The assert of a whole set in the commit: its `@Leases` written into the
/// batch as a literal, since a session context value holds 8000 bytes at
/// most and a set's leases may be longer, and the commit cannot be
/// parameterized (above). The literal is a JSON text this client wrote;
/// doubling each quote is the whole of T-SQL's escaping in a string literal.
pub(super) fn assert_set(leases_json: &str, owner: uuid::Uuid) -> String {
    format!(
        "        EXEC fence_api.AssertHolderSet @Leases = N'{}', @Owner = '{}';",
        leases_json.replace('\'', "''"),
        owner.hyphenated()
    )
}

/// Error 50115: the statement's transaction is not the fenced one.
pub(super) const ENDED: u32 = 50115;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sets_leases_are_written_into_the_commit_as_one_literal_with_each_quote_doubled() {
        let owner = uuid::Uuid::nil();
        let assert = assert_set(r#"[{"ResourceKey":"o'k"}]"#, owner);
        assert_eq!(
            assert.trim(),
            r#"EXEC fence_api.AssertHolderSet @Leases = N'[{"ResourceKey":"o''k"}]', @Owner = '00000000-0000-0000-0000-000000000000';"#
        );
        assert!(commit(Engine::Babelfish, &assert).contains(assert.trim()));
    }
}
