-- Gives the lease up early. Only the exact owner and generation can release,
-- so a superseded holder can never clear its successor's lease. The ended
-- tenure is recorded in fence.Tenure in the same transaction.
CREATE PROCEDURE fence_api.Release
    @ResourceKey nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    @Owner       uniqueidentifier,
    @Generation  bigint
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
    IF @Owner IS NULL OR @Owner = '00000000-0000-0000-0000-000000000000'
        THROW 50102, N'@Owner must be a non-nil uniqueidentifier, fresh for each acquisition.', 1;
    IF @Generation IS NULL OR @Generation < 1
        THROW 50104, N'@Generation must be a generation returned by Acquire (1 or more).', 1;

    DECLARE @Now datetime2(7), @Released int;

    BEGIN TRANSACTION;

    -- Lock the row, then read the clock, then decide.
    -- The lock is an update that really changes the row (LockCount, migration
    -- V4), so it lasts until the transaction ends on every engine: "A
    -- transaction always gets an exclusive lock on any data it modifies, and
    -- holds that lock until the transaction completes, regardless of the
    -- isolation level" (SET TRANSACTION ISOLATION LEVEL); under optimized
    -- locking "Every transaction modifying a row stamps that row with its TID"
    -- and "The only lock held until the end of transaction is the single X
    -- lock on the TID resource" (Optimized locking). A column set to its own
    -- value modifies nothing, and whether that stamps the row is undocumented.
    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
    SET @Now = SYSUTCDATETIME();

    -- The tenure ends here. Releasing a lease that already ran out (nobody took
    -- over) records it as Expired, at the moment it ran out.
    INSERT INTO fence.Tenure (ResourceKey, Generation, OwnerHash, AcquiredAtUtc, EndedAtUtc, Ending, Published,
                              SourceVersion)
    SELECT ResourceKey, Generation,
           HASHBYTES('SHA2_256', CAST(UPPER(CAST(@Owner AS char(36))) AS varchar(36))),
           AcquiredAtUtc,
           CASE WHEN LeaseUntilUtc > @Now THEN @Now ELSE LeaseUntilUtc END,
           CASE WHEN LeaseUntilUtc > @Now THEN N'Released' ELSE N'Expired' END,
           CASE WHEN PublishedGeneration = Generation THEN 1 ELSE 0 END,
           CASE WHEN PublishedGeneration = Generation THEN PublishedSourceVersion END
      FROM fence.Resource
     WHERE ResourceKey = @ResourceKey
       AND Owner = @Owner
       AND Generation = @Generation;
    SET @Released = @@ROWCOUNT;

    -- The generation stays: releasing never lowers it, and the next acquisition raises it.
    IF @Released = 1
        UPDATE fence.Resource
           SET Owner = NULL,
               LeaseUntilUtc = NULL
         WHERE ResourceKey = @ResourceKey;

    COMMIT TRANSACTION;

    IF @Released = 1
        SELECT CAST(N'Released' AS nvarchar(32)) AS Outcome;
    ELSE
        SELECT CAST(N'NotHolder' AS nvarchar(32)) AS Outcome;
END;
