-- Gives the lease up early. Only the exact owner and generation can release,
-- so a superseded holder can never clear its successor's lease.
CREATE PROCEDURE fence_api.Release
    @ResourceKey nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    @Owner       uniqueidentifier,
    @Generation  bigint
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

    -- The generation stays: releasing never lowers it, and the next acquisition raises it.
    UPDATE fence.Resource
       SET Owner = NULL,
           LeaseUntilUtc = NULL
     WHERE ResourceKey = @ResourceKey
       AND Owner = @Owner
       AND Generation = @Generation;

    IF @@ROWCOUNT = 1
        SELECT CAST(N'Released' AS nvarchar(32)) AS Outcome;
    ELSE
        SELECT CAST(N'NotHolder' AS nvarchar(32)) AS Outcome;
END;
