-- Sets a resource's source version, the watermark below which Publish and
-- AssertHolder refuse a source (contract v1.4), lowering or clearing it: a
-- source whose versions restarted (a rebuilt feed, a restored replica) would
-- otherwise lock the resource for good. Only an operator may, since a lower
-- watermark readmits older sources. Leases and publications stay as they are.
--
-- With @OperationId (contract v1.5) the call is idempotent: what it answered
-- is recorded in fence.OperatorOperation in the same transaction as the
-- change, and a replay of the id answers that again and changes nothing, so a
-- retry after a lost reply never lowers a source version that a publish has
-- raised since.
CREATE PROCEDURE fence_admin.ResetSourceVersion
    @ResourceKey   nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    @SourceVersion bigint = NULL, -- NULL clears it: no freshness floor until a versioned write commits
    -- Contract v1.5: fresh for each command, reused only to replay it (with
    -- the same @SourceVersion). NULL records nothing, as before.
    @OperationId   uniqueidentifier = NULL
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

    IF @SourceVersion < 0
        THROW 50109, N'@SourceVersion must be 0 or more, or NULL to clear the source version.', 1;
    IF @OperationId = '00000000-0000-0000-0000-000000000000'
        THROW 50105, N'@OperationId must be NULL or a non-nil uniqueidentifier, fresh for each command and reused only to replay it.', 1;

    DECLARE @Found int, @Previous bigint, @Now datetime2(7);
    DECLARE @Recorded int, @RecordedOutcome nvarchar(32), @RecordedPrevious bigint;

    BEGIN TRANSACTION;

    -- Locked first, as every fence procedure does (see ForceRelease), and for
    -- at most 5 seconds behind a holder's open transaction.
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

    -- Read after the row lock, as in ForceRelease, which says why the hints
    -- and the COLLATE. A replay must name the same source version: the same
    -- id asking for another one is another command.
    IF @OperationId IS NOT NULL
    BEGIN
        SELECT @Recorded = CASE WHEN Command = N'ResetSourceVersion'
                                 AND ResourceKey = @ResourceKey COLLATE Latin1_General_100_BIN2
                                 AND (SourceVersion = @SourceVersion
                                      OR (SourceVersion IS NULL AND @SourceVersion IS NULL)) THEN 1 ELSE 0 END,
               @RecordedOutcome = Outcome, @RecordedPrevious = PreviousSourceVersion
          FROM fence.OperatorOperation WITH (UPDLOCK, HOLDLOCK)
         WHERE OperationId = @OperationId;
        IF @Recorded = 0
            THROW 50130, N'@OperationId was already used by another operator command, for another resource or with another @SourceVersion.', 1;
        IF @Recorded = 1
        BEGIN
            -- A replay: the answer of the first call, and nothing changed
            -- (LockCount aside, which means nothing).
            COMMIT TRANSACTION;
            SELECT @RecordedOutcome AS Outcome, @RecordedPrevious AS PreviousSourceVersion;
            RETURN;
        END;
    END;

    SELECT @Previous = SourceVersion FROM fence.Resource WHERE ResourceKey = @ResourceKey;
    UPDATE fence.Resource SET SourceVersion = @SourceVersion WHERE ResourceKey = @ResourceKey;

    -- What this call answers, for its replays. A racing call of the same id
    -- that this one did not wait for loses at the key insert, and answers as
    -- a replay or is refused, as in ForceRelease.
    IF @OperationId IS NOT NULL
    BEGIN TRY
        INSERT INTO fence.OperatorOperation (OperationId, Command, ResourceKey, Outcome, SourceVersion,
                                             PreviousSourceVersion, RecordedAtUtc)
        VALUES (@OperationId, N'ResetSourceVersion', @ResourceKey,
                CASE WHEN @Found = 1 THEN N'Reset' ELSE N'NotProvisioned' END, @SourceVersion, @Previous, @Now);
    END TRY
    BEGIN CATCH
        IF ERROR_NUMBER() NOT IN (2601, 2627)
            THROW;
        IF @@TRANCOUNT = 1 AND (@@OPTIONS & 2) = 0
        BEGIN
            ROLLBACK TRANSACTION;
            SELECT @Recorded = CASE WHEN Command = N'ResetSourceVersion'
                                     AND ResourceKey = @ResourceKey COLLATE Latin1_General_100_BIN2
                                     AND (SourceVersion = @SourceVersion
                                          OR (SourceVersion IS NULL AND @SourceVersion IS NULL)) THEN 1 ELSE 0 END,
                   @RecordedOutcome = Outcome, @RecordedPrevious = PreviousSourceVersion
              FROM fence.OperatorOperation
             WHERE OperationId = @OperationId;
            IF @Recorded = 1
            BEGIN
                SELECT @RecordedOutcome AS Outcome, @RecordedPrevious AS PreviousSourceVersion;
                RETURN;
            END;
        END;
        THROW 50130, N'@OperationId was already used by another operator command, for another resource or with another @SourceVersion.', 1;
    END CATCH;

    COMMIT TRANSACTION;

    IF @Found = 1
        SELECT CAST(N'Reset' AS nvarchar(32)) AS Outcome, @Previous AS PreviousSourceVersion;
    ELSE
        SELECT CAST(N'NotProvisioned' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS PreviousSourceVersion;
END;
