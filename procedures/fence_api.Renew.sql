-- Extends a live lease. A lease that has expired is never revived, even when
-- nobody took over: its holder must assume a successor may exist.
CREATE PROCEDURE fence_api.Renew
    @ResourceKey  nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    @Owner        uniqueidentifier,
    @Generation   bigint,
    @LeaseSeconds int
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
    IF @LeaseSeconds IS NULL OR @LeaseSeconds NOT BETWEEN 1 AND 86400
        THROW 50103, N'@LeaseSeconds must be between 1 and 86400.', 1;

    DECLARE @Now datetime2(7), @Until datetime2(7), @Renewed int;

    BEGIN TRANSACTION;

    -- Lock the row before reading the clock: a call that waited for another
    -- session's lock is judged at the moment it got the row, not when it was sent.
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
    SET @Until = DATEADD(SECOND, @LeaseSeconds, @Now);

    UPDATE fence.Resource
       SET LeaseUntilUtc = @Until
     WHERE ResourceKey = @ResourceKey
       AND Owner = @Owner
       AND Generation = @Generation
       AND LeaseUntilUtc > @Now;
    SET @Renewed = @@ROWCOUNT;

    COMMIT TRANSACTION;

    IF @Renewed = 1
        SELECT CAST(N'Renewed' AS nvarchar(32)) AS Outcome, @Until AS LeaseUntilUtc;
    ELSE
        SELECT CAST(N'Lost' AS nvarchar(32)) AS Outcome, CAST(NULL AS datetime2(7)) AS LeaseUntilUtc;
END;
