-- Writes a result under a lease: the fence itself. The UPDATE succeeds only
-- while the caller still owns the current, unexpired generation and nothing was
-- published in it yet; the outcome record commits in the same transaction, so
-- a caller whose reply was lost can ask GetOutcome or replay safely.
CREATE PROCEDURE fence_api.Publish
    @ResourceKey nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    @Owner       uniqueidentifier,
    @Generation  bigint,
    @OperationId uniqueidentifier,
    @Payload     nvarchar(max)
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
    IF @OperationId IS NULL OR @OperationId = '00000000-0000-0000-0000-000000000000'
        THROW 50105, N'@OperationId must be a non-nil uniqueidentifier, fresh for each publish and reused only to replay it.', 1;
    IF @Payload IS NULL
        THROW 50106, N'@Payload must not be NULL (an empty string is allowed).', 1;
    IF EXISTS (SELECT 1
                 FROM fence.PublishedOperation
                WHERE OperationId = @OperationId
                  AND (ResourceKey <> @ResourceKey OR Generation <> @Generation))
        THROW 50107, N'@OperationId was already used by a publish to another resource or generation.', 1;

    DECLARE @Now datetime2(7) = SYSUTCDATETIME();
    DECLARE @Outcome nvarchar(32);
    DECLARE @CurrentGeneration bigint, @CurrentOwner uniqueidentifier,
            @PublishedGeneration bigint, @Found int;

    BEGIN TRANSACTION;

    IF EXISTS (SELECT 1 FROM fence.PublishedOperation WHERE OperationId = @OperationId)
        SET @Outcome = N'AlreadyPublished';
    ELSE
    BEGIN
        UPDATE fence.Resource
           SET PublishedGeneration = @Generation,
               Payload             = @Payload,
               PublishedAtUtc      = @Now
         WHERE ResourceKey = @ResourceKey
           AND Owner = @Owner
           AND Generation = @Generation
           AND LeaseUntilUtc > @Now
           AND (PublishedGeneration IS NULL OR PublishedGeneration < @Generation);

        IF @@ROWCOUNT = 1
        BEGIN
            INSERT INTO fence.PublishedOperation (OperationId, ResourceKey, Generation, PublishedAtUtc)
            VALUES (@OperationId, @ResourceKey, @Generation, @Now);
            SET @Outcome = N'Published';
        END;
        -- Refused. A concurrent replay of this operation may have committed while
        -- this UPDATE waited for the row: that is a replay, not a refusal.
        ELSE IF EXISTS (SELECT 1 FROM fence.PublishedOperation WHERE OperationId = @OperationId)
            SET @Outcome = N'AlreadyPublished';
        ELSE
        BEGIN
            SELECT @CurrentGeneration = Generation, @CurrentOwner = Owner,
                   @PublishedGeneration = PublishedGeneration
              FROM fence.Resource
             WHERE ResourceKey = @ResourceKey;
            SET @Found = @@ROWCOUNT;

            SET @Outcome =
                CASE
                    WHEN @Found = 0 THEN N'NotProvisioned'
                    -- Someone acquired after the caller (or an operator fenced it),
                    -- or this owner never held this generation.
                    WHEN @CurrentGeneration <> @Generation
                      OR (@CurrentOwner IS NOT NULL AND @CurrentOwner <> @Owner) THEN N'Superseded'
                    WHEN @PublishedGeneration >= @Generation THEN N'GenerationAlreadyPublished'
                    -- Expired or released, and nobody has taken over yet.
                    ELSE N'Expired'
                END;
        END;
    END;

    COMMIT TRANSACTION;

    SELECT @Outcome AS Outcome;
END;
