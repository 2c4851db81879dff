-- Operator's lever for a stuck holder: clears the lease and raises the
-- generation, so the holder's next renew or publish is refused.
CREATE PROCEDURE fence_admin.ForceRelease
    @ResourceKey nvarchar(4000) -- wider than a key may be, so an over-long key is refused, not truncated
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    -- LEN ignores trailing spaces; the appended character makes them count.
    IF @ResourceKey IS NULL OR LEN(@ResourceKey + N'.') - 1 NOT BETWEEN 1 AND 256
        THROW 50101, N'@ResourceKey must be 1 to 256 characters long.', 1;

    DECLARE @Generation bigint, @Fenced int;

    BEGIN TRANSACTION;

    UPDATE fence.Resource
       SET Generation    = Generation + 1,
           Owner         = NULL,
           LeaseUntilUtc = NULL
     WHERE ResourceKey = @ResourceKey;
    SET @Fenced = @@ROWCOUNT;

    SELECT @Generation = Generation FROM fence.Resource WHERE ResourceKey = @ResourceKey;

    COMMIT TRANSACTION;

    IF @Fenced = 1
        SELECT CAST(N'Fenced' AS nvarchar(32)) AS Outcome, @Generation AS Generation;
    ELSE
        SELECT CAST(N'NotProvisioned' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS Generation;
END;
