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

    -- LEN ignores trailing spaces; the appended character makes them count.
    IF @ResourceKey IS NULL OR LEN(@ResourceKey + N'.') - 1 NOT BETWEEN 1 AND 256
        THROW 50101, N'@ResourceKey must be 1 to 256 characters long.', 1;
    IF @Owner IS NULL OR @Owner = '00000000-0000-0000-0000-000000000000'
        THROW 50102, N'@Owner must be a non-nil uniqueidentifier, fresh for each acquisition.', 1;
    IF @Generation IS NULL OR @Generation < 1
        THROW 50104, N'@Generation must be a generation returned by Acquire (1 or more).', 1;
    IF @LeaseSeconds IS NULL OR @LeaseSeconds NOT BETWEEN 1 AND 86400
        THROW 50103, N'@LeaseSeconds must be between 1 and 86400.', 1;

    DECLARE @Now datetime2(7) = SYSUTCDATETIME();
    DECLARE @Until datetime2(7) = DATEADD(SECOND, @LeaseSeconds, @Now);

    UPDATE fence.Resource
       SET LeaseUntilUtc = @Until
     WHERE ResourceKey = @ResourceKey
       AND Owner = @Owner
       AND Generation = @Generation
       AND LeaseUntilUtc > @Now;

    IF @@ROWCOUNT = 1
        SELECT CAST(N'Renewed' AS nvarchar(32)) AS Outcome, @Until AS LeaseUntilUtc;
    ELSE
        SELECT CAST(N'Lost' AS nvarchar(32)) AS Outcome, CAST(NULL AS datetime2(7)) AS LeaseUntilUtc;
END;
