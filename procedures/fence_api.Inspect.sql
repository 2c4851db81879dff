-- Shows a resource's lease state. Never returns the owner: owner and
-- generation together are what a publish presents, so the owner stays secret.
CREATE PROCEDURE fence_api.Inspect
    @ResourceKey nvarchar(4000) -- wider than a key may be, so an over-long key is refused, not truncated
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    -- LEN ignores trailing spaces; the appended character makes them count.
    IF @ResourceKey IS NULL OR LEN(@ResourceKey + N'.') - 1 NOT BETWEEN 1 AND 256
        THROW 50101, N'@ResourceKey must be 1 to 256 characters long.', 1;

    DECLARE @Now datetime2(7) = SYSUTCDATETIME();

    IF EXISTS (SELECT 1 FROM fence.Resource WHERE ResourceKey = @ResourceKey)
        SELECT CAST(N'Found' AS nvarchar(32)) AS Outcome,
               Generation,
               CAST(CASE WHEN Owner IS NOT NULL AND LeaseUntilUtc > @Now THEN 1 ELSE 0 END AS bit) AS IsHeld,
               LeaseUntilUtc,
               PublishedGeneration,
               @Now AS ServerUtc
          FROM fence.Resource
         WHERE ResourceKey = @ResourceKey;
    ELSE
        SELECT CAST(N'NotProvisioned' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS Generation,
               CAST(NULL AS bit) AS IsHeld, CAST(NULL AS datetime2(7)) AS LeaseUntilUtc,
               CAST(NULL AS bigint) AS PublishedGeneration, @Now AS ServerUtc;
END;
