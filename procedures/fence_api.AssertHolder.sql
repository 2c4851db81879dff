-- Fences the caller's own tables: called inside the caller's transaction,
-- before or after it writes, it holds the fence row until that transaction
-- ends and throws unless the caller holds the current, unexpired lease. The
-- throw (XACT_ABORT) rolls back everything the transaction wrote.
CREATE PROCEDURE fence_api.AssertHolder
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
    -- committed rows anyway.
    IF SERVERPROPERTY(N'Babelfish') IS NULL
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

    -- A check without a lock held until the caller commits proves nothing.
    IF @@TRANCOUNT = 0
        THROW 50113, N'AssertHolder must run inside the caller''s transaction (BEGIN TRANSACTION first).', 1;

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

    DECLARE @Now datetime2(7), @Found int;
    DECLARE @CurrentGeneration bigint, @CurrentOwner uniqueidentifier, @Until datetime2(7);

    -- Lock the row the same way on every engine (an update that changes
    -- nothing), in the caller's transaction: no successor can acquire until it
    -- ends. Then read the clock, then judge.
    UPDATE fence.Resource SET Generation = Generation WHERE ResourceKey = @ResourceKey;
    SET @Found = @@ROWCOUNT;
    SET @Now = SYSUTCDATETIME();

    SELECT @CurrentGeneration = Generation, @CurrentOwner = Owner, @Until = LeaseUntilUtc
      FROM fence.Resource
     WHERE ResourceKey = @ResourceKey;

    IF @Found = 0
        THROW 50112, N'@ResourceKey is not provisioned.', 1;
    IF @CurrentGeneration <> @Generation OR (@CurrentOwner IS NOT NULL AND @CurrentOwner <> @Owner)
        THROW 50110, N'The lease was superseded: another owner or a newer generation is current.', 1;
    IF @CurrentOwner IS NULL OR @Until <= @Now
        THROW 50111, N'The lease expired or was released, and nobody has taken over.', 1;

    SELECT CAST(N'Holding' AS nvarchar(32)) AS Outcome, @CurrentGeneration AS Generation, @Until AS LeaseUntilUtc;
END;
