-- Writes a result under a lease: the fence itself. The write succeeds only
-- while the caller still owns the current, unexpired generation and nothing was
-- published in it yet; the outcome record commits in the same transaction, so
-- a caller whose reply was lost can ask GetOutcome or replay safely. With
-- @Release = 1 an accepted publish also gives the lease back, in the same
-- update: a whole acquire-publish-release cycle is two calls. With
-- @SourceVersion (contract v1.4) the result must also be built from a source
-- no older than the one already published: the same conditional update
-- refuses an older one as StaleSource.
CREATE PROCEDURE fence_api.Publish
    @ResourceKey nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    @Owner       uniqueidentifier,
    @Generation  bigint,
    @OperationId uniqueidentifier,
    @Payload     nvarchar(max),
    @Release     bit = 0, -- contract v1.2; callers of v1 keep the lease after a publish
    -- Contract v1.4: the version of the source the payload was built from.
    -- NULL publishes without a freshness check and leaves the resource's
    -- source version as it is.
    @SourceVersion bigint = NULL
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    -- Decide under READ COMMITTED whatever isolation level the caller chose (a
    -- SET inside a procedure reverts when it returns). Babelfish refuses this SET
    -- in any call whose level differs, and its READ UNCOMMITTED reads only
    -- committed rows anyway. Inside a caller's transaction (explicit, or one
    -- implicit-transaction mode opens), first touch data at the caller's level,
    -- so that a SNAPSHOT transaction starts as SNAPSHOT: "A transaction starts
    -- the first time it accesses data" (see fence.Anchor, migration V4).
    DECLARE @Anchor int;
    IF SERVERPROPERTY(N'Babelfish') IS NULL AND (@@TRANCOUNT > 0 OR (@@OPTIONS & 2) = 2)
        SELECT @Anchor = COUNT(*) FROM fence.Anchor;
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
    IF @Owner IS NULL OR @Owner = '00000000-0000-0000-0000-000000000000'
        THROW 50102, N'@Owner must be a non-nil uniqueidentifier, fresh for each acquisition.', 1;
    IF @Generation IS NULL OR @Generation < 1
        THROW 50104, N'@Generation must be a generation returned by Acquire (1 or more).', 1;
    IF @OperationId IS NULL OR @OperationId = '00000000-0000-0000-0000-000000000000'
        THROW 50105, N'@OperationId must be a non-nil uniqueidentifier, fresh for each publish and reused only to replay it.', 1;
    IF @Payload IS NULL
        THROW 50106, N'@Payload must not be NULL (an empty string is allowed).', 1;
    IF @Release IS NULL
        THROW 50108, N'@Release must be 0 (keep the lease) or 1 (release it with an accepted publish).', 1;
    IF @SourceVersion < 0
        THROW 50109, N'@SourceVersion must be 0 or more, or NULL to publish without a freshness check.', 1;

    DECLARE @Now datetime2(7), @Outcome nvarchar(32), @Found int, @Replay int, @Accepted int;
    DECLARE @CurrentGeneration bigint, @CurrentOwner uniqueidentifier, @PublishedGeneration bigint;
    DECLARE @Until datetime2(7), @StoredSourceVersion bigint;

    BEGIN TRANSACTION;

    -- Lock the row before reading the clock: a call that waited for another
    -- session's lock is judged at the moment it got the row, not when it was sent.
    -- The lock also serialises replays of one operation on this key.
    -- The lock is an update that really changes the row (LockCount, migration
    -- V4), so it lasts until the transaction ends on every engine: "A
    -- transaction always gets an exclusive lock on any data it modifies, and
    -- holds that lock until the transaction completes, regardless of the
    -- isolation level" (SET TRANSACTION ISOLATION LEVEL); under optimized
    -- locking "Every transaction modifying a row stamps that row with its TID"
    -- and "The only lock held until the end of transaction is the single X
    -- lock on the TID resource" (Optimized locking). A column set to its own
    -- value modifies nothing, and whether that stamps the row is undocumented.
    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
    SET @Found = @@ROWCOUNT;
    SET @Now = SYSUTCDATETIME();

    -- Decided under the lock: an operation id already used elsewhere is an
    -- error, one used here is a replay.
    -- COLLATE names the key column's own collation: Babelfish cannot choose one
    -- for a comparison inside an expression.
    SELECT @Replay = CASE WHEN ResourceKey = @ResourceKey COLLATE Latin1_General_100_BIN2
                           AND Generation = @Generation THEN 1 ELSE 0 END
      FROM fence.PublishedOperation
     WHERE OperationId = @OperationId;
    IF @Replay = 0
        THROW 50107, N'@OperationId was already used by a publish to another resource or generation.', 1;

    IF @Replay = 1
        SET @Outcome = N'AlreadyPublished';
    ELSE
    BEGIN
        UPDATE fence.Resource
           SET PublishedGeneration = @Generation,
               Payload             = @Payload,
               PublishedAtUtc      = @Now,
               PublishedSourceVersion = @SourceVersion,
               SourceVersion       = COALESCE(@SourceVersion, SourceVersion),
               -- As Release does: the generation stays, the lease ends.
               Owner               = CASE WHEN @Release = 1 THEN NULL ELSE Owner END,
               LeaseUntilUtc       = CASE WHEN @Release = 1 THEN NULL ELSE LeaseUntilUtc END
         WHERE ResourceKey = @ResourceKey
           AND Owner = @Owner
           AND Generation = @Generation
           AND LeaseUntilUtc > @Now
           AND (PublishedGeneration IS NULL OR PublishedGeneration < @Generation)
           -- Equal is a rebuild of the same source under a newer generation.
           AND (@SourceVersion IS NULL OR SourceVersion IS NULL OR SourceVersion <= @SourceVersion);
        SET @Accepted = @@ROWCOUNT;

        IF @Accepted = 1
        BEGIN
            -- A publish of this operation id to another key can race this one
            -- past the check above; the key insert decides, and the loser is
            -- told what the contract says, not "duplicate key".
            BEGIN TRY
                INSERT INTO fence.PublishedOperation (OperationId, ResourceKey, Generation, PublishedAtUtc, SourceVersion)
                VALUES (@OperationId, @ResourceKey, @Generation, @Now, @SourceVersion);
            END TRY
            BEGIN CATCH
                IF ERROR_NUMBER() IN (2601, 2627)
                    THROW 50107, N'@OperationId was already used by a publish to another resource or generation.', 1;
                THROW;
            END CATCH;
            -- Publishing with @Release = 1 ends the tenure, published.
            IF @Release = 1
                INSERT INTO fence.Tenure (ResourceKey, Generation, OwnerHash, AcquiredAtUtc, EndedAtUtc, Ending, Published,
                                          SourceVersion)
                SELECT ResourceKey, Generation,
                       HASHBYTES('SHA2_256', CAST(UPPER(CAST(@Owner AS char(36))) AS varchar(36))),
                       AcquiredAtUtc, @Now, N'Released', 1, @SourceVersion
                  FROM fence.Resource
                 WHERE ResourceKey = @ResourceKey;
            SET @Outcome = N'Published';
        END;
        ELSE
        BEGIN
            SELECT @CurrentGeneration = Generation, @CurrentOwner = Owner,
                   @PublishedGeneration = PublishedGeneration, @Until = LeaseUntilUtc,
                   @StoredSourceVersion = SourceVersion
              FROM fence.Resource
             WHERE ResourceKey = @ResourceKey;

            SET @Outcome =
                CASE
                    WHEN @Found = 0 THEN N'NotProvisioned'
                    -- Someone acquired after the caller (or an operator fenced it),
                    -- or this owner never held this generation.
                    WHEN @CurrentGeneration <> @Generation
                      OR (@CurrentOwner IS NOT NULL AND @CurrentOwner <> @Owner) THEN N'Superseded'
                    WHEN @PublishedGeneration >= @Generation THEN N'GenerationAlreadyPublished'
                    -- The current, unexpired holder of an unpublished
                    -- generation, refused only for its source: nothing
                    -- changes, and the lease stays held (@Release = 1 too).
                    WHEN @CurrentOwner = @Owner AND @Until > @Now
                     AND @StoredSourceVersion > @SourceVersion THEN N'StaleSource'
                    -- Expired or released, and nobody has taken over yet.
                    ELSE N'Expired'
                END;
        END;
    END;

    COMMIT TRANSACTION;

    SELECT @Outcome AS Outcome;
END;
