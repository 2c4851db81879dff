-- Creates the fence row for a resource. Idempotent: an existing row, and
-- above all its generation, is never touched.
CREATE PROCEDURE fence_api.Provision
    @ResourceKey nvarchar(4000) -- wider than a key may be, so an over-long key is refused, not truncated
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    -- LEN ignores trailing spaces; the appended character makes them count.
    IF @ResourceKey IS NULL OR LEN(@ResourceKey + N'.') - 1 NOT BETWEEN 1 AND 256
        THROW 50101, N'@ResourceKey must be 1 to 256 characters long.', 1;

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
