-- The operator's view of many resources at once: one row per resource whose
-- key starts with @Prefix, in key order, at most @MaxRows of them; with
-- @HeldOnly = 1 only those whose lease is held now (server clock). Like
-- Inspect, it never returns an owner: owner and generation together are what
-- a publish presents.
CREATE PROCEDURE fence_admin.ListLeases
    @Prefix   nvarchar(4000) = N'',
    @HeldOnly bit = 0,
    @MaxRows  int = 1000
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    IF @Prefix IS NULL
        THROW 50120, N'@Prefix must not be NULL (an empty prefix lists every resource).', 1;
    IF @HeldOnly IS NULL
        THROW 50121, N'@HeldOnly must be 0 (every resource) or 1 (held leases only).', 1;
    IF @MaxRows IS NULL OR @MaxRows NOT BETWEEN 1 AND 100000
        THROW 50122, N'@MaxRows must be 1 to 100000.', 1;

    DECLARE @Now datetime2(7) = SYSUTCDATETIME();
    -- LEN ignores trailing spaces; the "." keeps them counted.
    DECLARE @PrefixLength int = LEN(@Prefix + N'.') - 1;

    -- COLLATE names the key column's own collation: Babelfish cannot choose one
    -- for a comparison inside an expression.
    SELECT TOP (@MaxRows)
           CAST(N'Found' AS nvarchar(32)) AS Outcome,
           r.ResourceKey,
           r.Generation,
           CAST(CASE WHEN r.Owner IS NOT NULL AND r.LeaseUntilUtc > @Now THEN 1 ELSE 0 END AS bit) AS IsHeld,
           r.LeaseUntilUtc,
           r.PublishedGeneration,
           @Now AS ServerUtc
      FROM fence.Resource AS r
     WHERE SUBSTRING(r.ResourceKey, 1, @PrefixLength) = @Prefix COLLATE Latin1_General_100_BIN2
       AND (@HeldOnly = 0 OR (r.Owner IS NOT NULL AND r.LeaseUntilUtc > @Now))
     ORDER BY r.ResourceKey;
END;
