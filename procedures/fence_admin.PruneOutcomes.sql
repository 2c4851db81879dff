-- Keeps the outcome records bounded: deletes the accepted publishes
-- (fence.PublishedOperation) and the operator commands
-- (fence.OperatorOperation) recorded more than @OlderThanDays days ago
-- (server clock), and answers how many of each. The operator chooses the
-- window: a replay, or a GetOutcome, of an operation older than it no longer
-- finds its record. A publish replayed after its record is gone is judged as
-- a new publish of its generation, which the fence row refuses (the
-- generation is published, superseded or no longer held), so it never
-- publishes twice under one generation; GetOutcome answers Unknown. See the
-- contract's "Outcome records and the replay window".
--
-- Deletes in batches, each its own short transaction, as PruneTenure: it
-- refuses to run inside a caller's transaction (50128).
CREATE PROCEDURE fence_admin.PruneOutcomes
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
        THROW 50128, N'PruneOutcomes must run on its own, outside any transaction (and with IMPLICIT_TRANSACTIONS OFF): each batch commits by itself.', 1;

    DECLARE @Before datetime2(7) = DATEADD(DAY, -@OlderThanDays, SYSUTCDATETIME());
    -- Below the escalation threshold: "A single Transact-SQL statement acquires
    -- at least 5,000 locks on a single nonpartitioned table or index" triggers
    -- escalation to a table lock (Transaction locking and row versioning
    -- guide), which would stop every publish while the batch runs. RECOMPILE
    -- lets the plan see @Before, so it seeks the index on the time (migration
    -- V7) instead of scanning past fresh rows.
    DECLARE @Publishes int = 0, @Commands int = 0, @BatchSize int = 4000, @Batch int = 4000;

    WHILE @Batch = @BatchSize
    BEGIN
        DELETE TOP (@BatchSize) FROM fence.PublishedOperation WHERE PublishedAtUtc < @Before OPTION (RECOMPILE);
        SET @Batch = @@ROWCOUNT;
        SET @Publishes += @Batch;
    END;

    SET @Batch = @BatchSize;
    WHILE @Batch = @BatchSize
    BEGIN
        DELETE TOP (@BatchSize) FROM fence.OperatorOperation WHERE RecordedAtUtc < @Before OPTION (RECOMPILE);
        SET @Batch = @@ROWCOUNT;
        SET @Commands += @Batch;
    END;

    SELECT CAST(N'Pruned' AS nvarchar(32)) AS Outcome, @Publishes AS PublishesDeleted,
           @Commands AS CommandsDeleted, @Before AS RecordedBeforeUtc;
END;
