-- Keeps the tenure history bounded: deletes the tenures that ended more than
-- @OlderThanDays days ago (server clock) and answers how many. Deletes in
-- batches, each its own short transaction, so a large prune never holds one
-- long transaction nor a table lock: it refuses to run inside a caller's
-- transaction (50128), where every batch would be held to the caller's end.
CREATE PROCEDURE fence_admin.PruneTenure
    @OlderThanDays int
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    -- Decide under READ COMMITTED whatever isolation level the caller chose (a
    -- SET inside a procedure reverts when it returns). Babelfish refuses this SET
    -- in any call whose level differs.
    IF SERVERPROPERTY(N'Babelfish') IS NULL
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

    IF @OlderThanDays IS NULL OR @OlderThanDays NOT BETWEEN 1 AND 36500
        THROW 50123, N'@OlderThanDays must be 1 to 36500.', 1;
    -- In implicit-transaction mode the first DELETE would open a transaction
    -- that every later batch joins.
    IF @@TRANCOUNT > 0 OR (@@OPTIONS & 2) = 2
        THROW 50128, N'PruneTenure must run on its own, outside any transaction (and with IMPLICIT_TRANSACTIONS OFF): each batch commits by itself.', 1;

    DECLARE @Before datetime2(7) = DATEADD(DAY, -@OlderThanDays, SYSUTCDATETIME());
    -- Below the escalation threshold: "A single Transact-SQL statement acquires
    -- at least 5,000 locks on a single nonpartitioned table or index" triggers
    -- escalation to a table lock (Transaction locking and row versioning
    -- guide), which would stop every Release and expired Acquire that writes a
    -- tenure while the batch runs. RECOMPILE lets the plan see @Before, so it
    -- seeks IX_Tenure_EndedAtUtc instead of scanning past fresh rows.
    DECLARE @Deleted int = 0, @BatchSize int = 4000, @Batch int = 4000;

    WHILE @Batch = @BatchSize
    BEGIN
        DELETE TOP (@BatchSize) FROM fence.Tenure WHERE EndedAtUtc < @Before OPTION (RECOMPILE);
        SET @Batch = @@ROWCOUNT;
        SET @Deleted += @Batch;
    END;

    SELECT CAST(N'Pruned' AS nvarchar(32)) AS Outcome, @Deleted AS Deleted, @Before AS EndedBeforeUtc;
END;
