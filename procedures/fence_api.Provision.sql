-- Creates the fence row for a resource. Idempotent: an existing row, and
-- above all its generation, is never touched.
CREATE PROCEDURE fence_api.Provision
    @ResourceKey nvarchar(4000) -- wider than a key may be, so an over-long key is refused, not truncated
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

    DECLARE @Created int;

    BEGIN TRANSACTION;

    -- UPDLOCK + HOLDLOCK serialise two first provisions of one key on SQL Server.
    INSERT INTO fence.Resource (ResourceKey, Generation, ProvisionedAtUtc)
    SELECT @ResourceKey, 0, SYSUTCDATETIME()
     WHERE NOT EXISTS (SELECT 1
                         FROM fence.Resource WITH (UPDLOCK, HOLDLOCK)
                        WHERE ResourceKey = @ResourceKey);
    SET @Created = @@ROWCOUNT;

    COMMIT TRANSACTION;

    SELECT CAST(CASE WHEN @Created = 1 THEN N'Created' ELSE N'Exists' END AS nvarchar(32)) AS Outcome;
END;
