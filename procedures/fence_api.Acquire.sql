-- Takes the lease when it is free or expired, raising the generation: every
-- acquisition fences out all earlier holders. A retry by the owner that still
-- holds the unexpired lease keeps its generation and extends the lease.
CREATE PROCEDURE fence_api.Acquire
    @ResourceKey  nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    @Owner        uniqueidentifier,
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
    IF @LeaseSeconds IS NULL OR @LeaseSeconds NOT BETWEEN 1 AND 86400
        THROW 50103, N'@LeaseSeconds must be between 1 and 86400.', 1;

    -- Lease times come from the server clock only.
    DECLARE @Now datetime2(7) = SYSUTCDATETIME();
    DECLARE @Until datetime2(7) = DATEADD(SECOND, @LeaseSeconds, @Now);
    DECLARE @Generation bigint, @HolderUntil datetime2(7), @Taken int, @Found int;

    BEGIN TRANSACTION;

    UPDATE fence.Resource
       SET Generation    = CASE WHEN Owner = @Owner AND LeaseUntilUtc > @Now
                                THEN Generation
                                ELSE Generation + 1 END,
           Owner         = @Owner,
           LeaseUntilUtc = @Until
     WHERE ResourceKey = @ResourceKey
       AND (Owner IS NULL OR LeaseUntilUtc <= @Now OR Owner = @Owner);
    SET @Taken = @@ROWCOUNT;

    -- Read back inside the transaction: the row is ours until COMMIT, and this is
    -- exact on every engine, unlike OUTPUT under concurrent updates.
    SELECT @Generation = Generation, @HolderUntil = LeaseUntilUtc
      FROM fence.Resource
     WHERE ResourceKey = @ResourceKey;
    SET @Found = @@ROWCOUNT;

    COMMIT TRANSACTION;

    IF @Taken = 1
        SELECT CAST(N'Acquired' AS nvarchar(32)) AS Outcome, @Generation AS Generation, @Until AS LeaseUntilUtc;
    -- The holder may have released between the UPDATE and the read-back:
    -- then the lease is free from now on, and a retry can take it at once.
    ELSE IF @Found = 1
        SELECT CAST(N'Busy' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS Generation,
               COALESCE(@HolderUntil, @Now) AS LeaseUntilUtc;
    ELSE
        SELECT CAST(N'NotProvisioned' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS Generation,
               CAST(NULL AS datetime2(7)) AS LeaseUntilUtc;
END;
