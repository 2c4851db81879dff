-- Reads the last accepted result of a resource (NULLs until the first publish).
CREATE PROCEDURE fence_api.ReadPublication
    @ResourceKey nvarchar(4000) -- wider than a key may be, so an over-long key is refused, not truncated
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    -- LEN ignores trailing spaces; the appended character makes them count.
    IF @ResourceKey IS NULL OR LEN(@ResourceKey + N'.') - 1 NOT BETWEEN 1 AND 256
        THROW 50101, N'@ResourceKey must be 1 to 256 characters long.', 1;

    IF EXISTS (SELECT 1 FROM fence.Resource WHERE ResourceKey = @ResourceKey)
        SELECT CAST(N'Found' AS nvarchar(32)) AS Outcome, PublishedGeneration, Payload, PublishedAtUtc
          FROM fence.Resource
         WHERE ResourceKey = @ResourceKey;
    ELSE
        SELECT CAST(N'NotProvisioned' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS PublishedGeneration,
               CAST(NULL AS nvarchar(max)) AS Payload, CAST(NULL AS datetime2(7)) AS PublishedAtUtc;
END;
