-- Sets a resource's source version, the watermark below which Publish and
-- AssertHolder refuse a source (contract v1.4), lowering or clearing it: a
-- source whose versions restarted (a rebuilt feed, a restored replica) would
-- otherwise lock the resource for good. Only an operator may, since a lower
-- watermark readmits older sources. Leases and publications stay as they are.
CREATE PROCEDURE fence_admin.ResetSourceVersion
    @ResourceKey   nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    @SourceVersion bigint = NULL -- NULL clears it: no freshness floor until a versioned write commits
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

    DECLARE @Found int, @Previous bigint;

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

    SELECT @Previous = SourceVersion FROM fence.Resource WHERE ResourceKey = @ResourceKey;
    UPDATE fence.Resource SET SourceVersion = @SourceVersion WHERE ResourceKey = @ResourceKey;

    COMMIT TRANSACTION;

    IF @Found = 1
        SELECT CAST(N'Reset' AS nvarchar(32)) AS Outcome, @Previous AS PreviousSourceVersion;
    ELSE
        SELECT CAST(N'NotProvisioned' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS PreviousSourceVersion;
END;
