-- Retires a key the application no longer uses: deletes its fence row, its
-- publish records (fence.PublishedOperation) and its history (fence.Tenure).
-- Operator records (fence.OperatorOperation) stay until PruneOutcomes deletes
-- them by age: a ForceRelease, ResetSourceVersion or earlier Retire retried by
-- its operation id after the key was provisioned again must answer its record,
-- not apply to the new key. Refused while the key is held (50131): force-release
-- it first, or wait for its lease to end.
--
-- Generations never go back: the key's generation raises the high-water mark
-- in fence.Retirement in the same transaction, and fence_api.Provision starts
-- every key created afterwards (this one again included) at that mark or
-- above. A holder of a retired generation, a replay of its publish and the
-- artefact sweep therefore never meet a generation issued twice.
--
-- With @OperationId the call is idempotent, as ForceRelease (contract v1.5):
-- what it answered is recorded in fence.OperatorOperation beside the key's
-- earlier operator records, and a replay answers that again and changes nothing, so a
-- retry after a lost reply never retires the key a second time after it was
-- provisioned again.
CREATE PROCEDURE fence_admin.Retire
    @ResourceKey nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    -- Fresh for each command, reused only to replay it. NULL: a retirement
    -- is still recorded, under a fresh id, for audit.
    @OperationId uniqueidentifier = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    -- Decide under READ COMMITTED whatever isolation level the caller chose (a
    -- SET inside a procedure reverts when it returns). Babelfish refuses this SET
    -- in any call whose level differs.
    IF SERVERPROPERTY(N'Babelfish') IS NULL
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

    -- Keys are exact identifiers: 1 to 256 UTF-16 code units (what nvarchar(256)
    -- stores; DATALENGTH counts two bytes each), compared binary, and never
    -- ending in a space, which comparisons ignore. Babelfish stores UTF-8, so
    -- there a character outside the BMP is counted twice by hand.
    DECLARE @KeyUnits int = DATALENGTH(@ResourceKey) / 2, @KeyAt int = 0;
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL
        SET @KeyUnits = LEN(@ResourceKey + N'.') - 1;
    WHILE SERVERPROPERTY(N'Babelfish') IS NOT NULL AND @KeyUnits BETWEEN 129 AND 256
          AND @KeyAt < LEN(@ResourceKey + N'.') - 1
    BEGIN
        SET @KeyAt += 1;
        IF UNICODE(SUBSTRING(@ResourceKey, @KeyAt, 1)) > 65535
            SET @KeyUnits += 1;
    END;
    IF @ResourceKey IS NULL OR @KeyUnits NOT BETWEEN 1 AND 256
        THROW 50101, N'@ResourceKey must be 1 to 256 UTF-16 code units long.', 1;
    IF UNICODE(RIGHT(@ResourceKey, 1)) = 32
        THROW 50101, N'@ResourceKey must not end with a space: keys are exact identifiers.', 1;
    IF @OperationId = '00000000-0000-0000-0000-000000000000'
        THROW 50105, N'@OperationId must be NULL or a non-nil uniqueidentifier, fresh for each command and reused only to replay it.', 1;
    -- Its deletes are one transaction that must end with the procedure.
    IF @@TRANCOUNT > 0 OR (@@OPTIONS & 2) = 2
        THROW 50128, N'Retire must run on its own, outside any transaction (and with IMPLICIT_TRANSACTIONS OFF).', 1;

    DECLARE @Now datetime2(7), @Generation bigint, @Held int, @Found int, @Lock int, @Batch int;
    DECLARE @Recorded int, @RecordedOutcome nvarchar(32), @RecordedGeneration bigint;
    DECLARE @RecoverLock nvarchar(255) = N'fencepost:recover:' + DB_NAME();

    BEGIN TRANSACTION;

    -- Exclusive with every first Provision, which holds this lock shared
    -- while it reads the floors and inserts: a key provisioned at the same
    -- time starts either before this retirement (and is not this key) or
    -- after it, at the mark it raised. Application locks are database-scoped
    -- on SQL Server and server-wide on Babelfish, hence the database name.
    EXEC @Lock = sp_getapplock @Resource = @RecoverLock, @LockMode = N'Exclusive', @LockOwner = N'Transaction',
                               @LockTimeout = 5000;
    IF @Lock < 0
        THROW 50127, N'Retire could not take the recovery lock within 5 seconds: a recovery, or a first Provision inside a transaction that stays open, holds it.', 1;

    -- The row lock, as in ForceRelease: an update that really changes the row
    -- lasts until the transaction ends, and waits for a caller's transaction
    -- that holds the row, so no fenced write of the key can commit after it.
    -- The wait is bounded (SQL Server: 50129; Babelfish: its lock-timeout
    -- error).
    SET LOCK_TIMEOUT 5000;
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL
    BEGIN
        UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
        SET @Found = @@ROWCOUNT;
    END;
    ELSE
    BEGIN TRY
        UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
        SET @Found = @@ROWCOUNT;
    END TRY
    BEGIN CATCH
        IF ERROR_NUMBER() <> 1222
            THROW;
        THROW 50129, N'Waited 5 seconds for the fence row or its table: an open transaction, a deploy or a recovery holds it.', 1;
    END CATCH;
    SET @Now = SYSUTCDATETIME();

    -- A replay answers what the first call recorded, as in ForceRelease.
    IF @OperationId IS NOT NULL
    BEGIN
        SELECT @Recorded = CASE WHEN Command = N'Retire'
                                 AND ResourceKey = @ResourceKey COLLATE Latin1_General_100_BIN2 THEN 1 ELSE 0 END,
               @RecordedOutcome = Outcome, @RecordedGeneration = Generation
          FROM fence.OperatorOperation WITH (UPDLOCK, HOLDLOCK)
         WHERE OperationId = @OperationId;
        IF @Recorded = 0
            THROW 50130, N'@OperationId was already used by another operator command or for another resource.', 1;
        IF @Recorded = 1
        BEGIN
            COMMIT TRANSACTION;
            SELECT @RecordedOutcome AS Outcome, @RecordedGeneration AS Generation;
            RETURN;
        END;
    END;

    SELECT @Generation = Generation,
           @Held = CASE WHEN Owner IS NOT NULL AND LeaseUntilUtc > @Now THEN 1 ELSE 0 END
      FROM fence.Resource
     WHERE ResourceKey = @ResourceKey;
    IF @Held = 1
        THROW 50131, N'Retire refused: the key is held by an unexpired lease. Force-release it first, or wait until its lease ends.', 1;

    IF @Found = 1
    BEGIN
        -- The mark first: from here on, no key starts below this generation.
        UPDATE fence.Retirement
           SET HighestGeneration = CASE WHEN HighestGeneration > @Generation THEN HighestGeneration
                                        ELSE @Generation END,
               KeysRetired       = KeysRetired + 1,
               LastRetiredAtUtc  = @Now
         WHERE Singleton = 1;
        IF @@ROWCOUNT <> 1
            THROW 50132, N'fence.Retirement has lost its row: the database does not hold what migration V7 created.', 1;

        -- In batches below the escalation threshold: "A single Transact-SQL
        -- statement acquires at least 5,000 locks on a single nonpartitioned
        -- table or index" escalates to a table lock (Transaction locking and
        -- row versioning guide), which would stop every publish or release
        -- of other keys until this commits. The outcome records go before
        -- the row their foreign key names.
        SET @Batch = 4000;
        WHILE @Batch = 4000
        BEGIN
            DELETE TOP (4000) FROM fence.PublishedOperation WHERE ResourceKey = @ResourceKey;
            SET @Batch = @@ROWCOUNT;
        END;
        SET @Batch = 4000;
        WHILE @Batch = 4000
        BEGIN
            DELETE TOP (4000) FROM fence.Tenure WHERE ResourceKey = @ResourceKey;
            SET @Batch = @@ROWCOUNT;
        END;
        DELETE FROM fence.Resource WHERE ResourceKey = @ResourceKey;
    END;

    -- What this call answers, for its replays; a racing call of the same id
    -- is settled as in ForceRelease. A retirement without an id is recorded
    -- too, under a fresh one that nobody replays: the key's rows are gone, and
    -- this row is what tells an auditor which key was retired, when, and at
    -- which generation (until PruneOutcomes deletes it by age). A call that
    -- found no key changed nothing and, without an id, records nothing.
    IF @OperationId IS NULL AND @Found = 1
        INSERT INTO fence.OperatorOperation (OperationId, Command, ResourceKey, Outcome, Generation, RecordedAtUtc)
        VALUES (NEWID(), N'Retire', @ResourceKey, N'Retired', @Generation, @Now);
    IF @OperationId IS NOT NULL
    BEGIN TRY
        INSERT INTO fence.OperatorOperation (OperationId, Command, ResourceKey, Outcome, Generation, RecordedAtUtc)
        VALUES (@OperationId, N'Retire', @ResourceKey,
                CASE WHEN @Found = 1 THEN N'Retired' ELSE N'NotProvisioned' END, @Generation, @Now);
    END TRY
    BEGIN CATCH
        IF ERROR_NUMBER() NOT IN (2601, 2627)
            THROW;
        ROLLBACK TRANSACTION;
        SELECT @Recorded = CASE WHEN Command = N'Retire'
                                 AND ResourceKey = @ResourceKey COLLATE Latin1_General_100_BIN2 THEN 1 ELSE 0 END,
               @RecordedOutcome = Outcome, @RecordedGeneration = Generation
          FROM fence.OperatorOperation
         WHERE OperationId = @OperationId;
        IF @Recorded = 1
        BEGIN
            SELECT @RecordedOutcome AS Outcome, @RecordedGeneration AS Generation;
            RETURN;
        END;
        THROW 50130, N'@OperationId was already used by another operator command or for another resource.', 1;
    END CATCH;

    COMMIT TRANSACTION;

    IF @Found = 1
        SELECT CAST(N'Retired' AS nvarchar(32)) AS Outcome, @Generation AS Generation;
    ELSE
        SELECT CAST(N'NotProvisioned' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS Generation;
END;
