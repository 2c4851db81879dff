-- Creates the fence row for a resource. Idempotent: an existing row, and
-- above all its generation, is never touched. A key created after a recovery
-- starts at the highest floor a recovery raised the fence to, so a key the
-- restored backup did not hold cannot hand out a generation issued before;
-- and at the highest generation a retired key reached (fence.Retirement,
-- contract v1.6), so a key retired and provisioned again never goes back.
CREATE PROCEDURE fence_api.Provision
    @ResourceKey nvarchar(4000) -- wider than a key may be, so an over-long key is refused, not truncated
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

    -- An existing key's row is never changed here, so finding it needs no
    -- lock beyond the read. The recovery lock below is only for a first
    -- provision: taken for an existing key inside a caller's transaction
    -- that already holds a fence row, it would queue behind a recovery that
    -- waits for that row, a deadlock.
    IF EXISTS (SELECT 1 FROM fence.Resource WHERE ResourceKey = @ResourceKey)
    BEGIN
        SELECT CAST(N'Exists' AS nvarchar(32)) AS Outcome;
        RETURN;
    END;

    DECLARE @Created int, @Lock int, @RecoverLock nvarchar(255) = N'fencepost:recover:' + DB_NAME();

    BEGIN TRANSACTION;

    -- Shared with every other Provision, exclusive with Recover and Retire: a key is
    -- created either before a recovery, which raises it, or after it, at its
    -- floor (fence.Recovery). Either way no generation issued before a
    -- restore is issued again for it.
    EXEC @Lock = sp_getapplock @Resource = @RecoverLock, @LockMode = N'Shared', @LockOwner = N'Transaction';
    IF @Lock < 0
        THROW 50127, N'Provision could not take the recovery lock (sp_getapplock answered a timeout or deadlock).', 1;

    -- UPDLOCK + HOLDLOCK serialise two first provisions of one key on SQL Server.
    INSERT INTO fence.Resource (ResourceKey, Generation, ProvisionedAtUtc)
    SELECT @ResourceKey,
           (SELECT MAX(Mark)
              FROM (SELECT ISNULL(MAX(GenerationFloor), 0) AS Mark FROM fence.Recovery
                    UNION ALL
                    SELECT HighestGeneration FROM fence.Retirement) AS Floors),
           SYSUTCDATETIME()
     WHERE NOT EXISTS (SELECT 1
                         FROM fence.Resource WITH (UPDLOCK, HOLDLOCK)
                        WHERE ResourceKey = @ResourceKey);
    SET @Created = @@ROWCOUNT;

    COMMIT TRANSACTION;

    SELECT CAST(CASE WHEN @Created = 1 THEN N'Created' ELSE N'Exists' END AS nvarchar(32)) AS Outcome;
END;
