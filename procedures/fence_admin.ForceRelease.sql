-- Operator's lever for a stuck holder: clears the lease and raises the
-- generation, so the holder's next renew or publish is refused.
--
-- With @OperationId (contract v1.5) the call is idempotent: what it answered
-- is recorded in fence.OperatorOperation in the same transaction as the
-- change, and a replay of the id answers that again and changes nothing, so a
-- retry after a lost reply never fences a holder that acquired since.
CREATE PROCEDURE fence_admin.ForceRelease
    @ResourceKey nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    -- Contract v1.5: fresh for each command, reused only to replay it. NULL
    -- records nothing, as before.
    @OperationId uniqueidentifier = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    -- Decide under READ COMMITTED whatever isolation level the caller chose (a
    -- SET inside a procedure reverts when it returns). Babelfish refuses this SET
    -- in any call whose level differs, and its READ UNCOMMITTED reads only
    -- committed rows anyway. Inside a caller's transaction (explicit, or one
    -- implicit-transaction mode opens), first touch data at the caller's level,
    -- so that a SNAPSHOT transaction starts as SNAPSHOT: "A transaction starts
    -- the first time it accesses data" (see fence.Anchor, migration V4).
    DECLARE @Anchor int;
    IF SERVERPROPERTY(N'Babelfish') IS NULL AND (@@TRANCOUNT > 0 OR (@@OPTIONS & 2) = 2)
        SELECT @Anchor = COUNT(*) FROM fence.Anchor;
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

    DECLARE @Now datetime2(7), @Generation bigint, @Fenced int;
    DECLARE @Recorded int, @RecordedOutcome nvarchar(32), @RecordedGeneration bigint;

    BEGIN TRANSACTION;

    -- The lock is an update that really changes the row (LockCount, migration
    -- V4), so it lasts until the transaction ends on every engine: "A
    -- transaction always gets an exclusive lock on any data it modifies, and
    -- holds that lock until the transaction completes, regardless of the
    -- isolation level" (SET TRANSACTION ISOLATION LEVEL); under optimized
    -- locking "Every transaction modifying a row stamps that row with its TID"
    -- and "The only lock held until the end of transaction is the single X
    -- lock on the TID resource" (Optimized locking). A column set to its own
    -- value modifies nothing, and whether that stamps the row is undocumented.
    --
    -- The wait for that lock is bounded, as in Acquire: behind a holder whose
    -- transaction stays open, the operator gets an error instead of a hang
    -- (SQL Server: 50129; Babelfish: its uncatchable "canceling statement due
    -- to lock timeout"), and `fencepost lease force-release` names the
    -- blocking session and can end it (--kill-blocker).
    SET LOCK_TIMEOUT 5000;
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL
    BEGIN
        UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
        SET @Fenced = @@ROWCOUNT;
    END;
    ELSE
    BEGIN TRY
        UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
        SET @Fenced = @@ROWCOUNT;
    END TRY
    BEGIN CATCH
        IF ERROR_NUMBER() <> 1222
            THROW;
        THROW 50129, N'Waited 5 seconds for the fence row or its table: an open transaction, a deploy or a recovery holds it.', 1;
    END CATCH;
    SET @Now = SYSUTCDATETIME();

    -- Read after the row lock, so a replay that waited for the first call's
    -- transaction sees what it recorded. UPDLOCK and HOLDLOCK lock the id's
    -- place in the key on SQL Server, so two calls of one id on a key with no
    -- fence row (no row lock to serialise them) answer one after the other
    -- too; Babelfish ignores the hints, and there the insert of the id below
    -- decides. COLLATE names the key column's own collation: Babelfish cannot
    -- choose one for a comparison inside an expression.
    IF @OperationId IS NOT NULL
    BEGIN
        SELECT @Recorded = CASE WHEN Command = N'ForceRelease'
                                 AND ResourceKey = @ResourceKey COLLATE Latin1_General_100_BIN2 THEN 1 ELSE 0 END,
               @RecordedOutcome = Outcome, @RecordedGeneration = Generation
          FROM fence.OperatorOperation WITH (UPDLOCK, HOLDLOCK)
         WHERE OperationId = @OperationId;
        IF @Recorded = 0
            THROW 50130, N'@OperationId was already used by another operator command or for another resource.', 1;
        IF @Recorded = 1
        BEGIN
            -- A replay: the answer of the first call, and nothing changed
            -- (LockCount aside, which means nothing).
            COMMIT TRANSACTION;
            SELECT @RecordedOutcome AS Outcome, @RecordedGeneration AS Generation;
            RETURN;
        END;
    END;

    -- A holder's tenure ends here: ForceReleased while it was live, Expired
    -- (at the moment it ran out) when nobody had taken over a lapsed lease.
    INSERT INTO fence.Tenure (ResourceKey, Generation, OwnerHash, AcquiredAtUtc, EndedAtUtc, Ending, Published,
                              SourceVersion)
    SELECT ResourceKey, Generation,
           HASHBYTES('SHA2_256', CAST(UPPER(CAST(Owner AS char(36))) AS varchar(36))),
           AcquiredAtUtc,
           CASE WHEN LeaseUntilUtc > @Now THEN @Now ELSE LeaseUntilUtc END,
           CASE WHEN LeaseUntilUtc > @Now THEN N'ForceReleased' ELSE N'Expired' END,
           CASE WHEN PublishedGeneration = Generation THEN 1 ELSE 0 END,
           CASE WHEN PublishedGeneration = Generation THEN PublishedSourceVersion END
      FROM fence.Resource
     WHERE ResourceKey = @ResourceKey
       AND Owner IS NOT NULL;

    -- The new generation is one nobody holds.
    UPDATE fence.Resource
       SET Generation    = Generation + 1,
           Owner         = NULL,
           LeaseUntilUtc = NULL,
           AcquiredAtUtc = NULL
     WHERE ResourceKey = @ResourceKey;

    SELECT @Generation = Generation FROM fence.Resource WHERE ResourceKey = @ResourceKey;

    -- What this call answers, for its replays. A call of the same id that
    -- this one did not wait for (on another key, or on this key while it had
    -- no fence row, where Babelfish has nothing to serialise them on) can race
    -- it past the read above; the key insert decides. Called on its own, the
    -- loser rolls back all it did and answers as a replay of the winner when
    -- that was the same command on the same key; otherwise, and inside a
    -- caller's transaction (which it may not end by itself), it is told what
    -- the contract says, not "duplicate key".
    IF @OperationId IS NOT NULL
    BEGIN TRY
        INSERT INTO fence.OperatorOperation (OperationId, Command, ResourceKey, Outcome, Generation, RecordedAtUtc)
        VALUES (@OperationId, N'ForceRelease', @ResourceKey,
                CASE WHEN @Fenced = 1 THEN N'Fenced' ELSE N'NotProvisioned' END, @Generation, @Now);
    END TRY
    BEGIN CATCH
        IF ERROR_NUMBER() NOT IN (2601, 2627)
            THROW;
        IF @@TRANCOUNT = 1 AND (@@OPTIONS & 2) = 0
        BEGIN
            ROLLBACK TRANSACTION;
            SELECT @Recorded = CASE WHEN Command = N'ForceRelease'
                                     AND ResourceKey = @ResourceKey COLLATE Latin1_General_100_BIN2 THEN 1 ELSE 0 END,
                   @RecordedOutcome = Outcome, @RecordedGeneration = Generation
              FROM fence.OperatorOperation
             WHERE OperationId = @OperationId;
            IF @Recorded = 1
            BEGIN
                SELECT @RecordedOutcome AS Outcome, @RecordedGeneration AS Generation;
                RETURN;
            END;
        END;
        THROW 50130, N'@OperationId was already used by another operator command or for another resource.', 1;
    END CATCH;

    COMMIT TRANSACTION;

    IF @Fenced = 1
        SELECT CAST(N'Fenced' AS nvarchar(32)) AS Outcome, @Generation AS Generation;
    ELSE
        SELECT CAST(N'NotProvisioned' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS Generation;
END;
