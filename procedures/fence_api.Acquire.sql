-- Takes the lease when it is free or expired, raising the generation: every
-- acquisition fences out all earlier holders. A retry by the owner that still
-- holds the unexpired lease keeps its generation and extends the lease. Taking
-- over a lease that ran out records its tenure in fence.Tenure.
CREATE PROCEDURE fence_api.Acquire
    @ResourceKey  nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    @Owner        uniqueidentifier,
    @LeaseSeconds int
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
    IF @LeaseSeconds IS NULL OR @LeaseSeconds NOT BETWEEN 1 AND 86400
        THROW 50103, N'@LeaseSeconds must be between 1 and 86400.', 1;

    DECLARE @Now datetime2(7), @Until datetime2(7), @Found int, @Taken int = 0;
    DECLARE @Generation bigint, @Holder uniqueidentifier, @HolderUntil datetime2(7),
            @HolderAcquiredAt datetime2(7), @PublishedGeneration bigint,
            @PublishedSourceVersion bigint;

    BEGIN TRANSACTION;

    -- Lock the row before reading the clock: a call that waited for another
    -- session's lock is judged at the moment it got the row, not when it was sent.
    -- The lock is an update that really changes the row (LockCount, migration
    -- V4), so it lasts until the transaction ends on every engine: "A
    -- transaction always gets an exclusive lock on any data it modifies, and
    -- holds that lock until the transaction completes, regardless of the
    -- isolation level" (SET TRANSACTION ISOLATION LEVEL); under optimized
    -- locking "Every transaction modifying a row stamps that row with its TID"
    -- and "The only lock held until the end of transaction is the single X
    -- lock on the TID resource" (Optimized locking). A column set to its own
    -- value modifies nothing, and whether that stamps the row is undocumented.
    --
    -- The wait for that lock is bounded: a holder's transaction left open (a
    -- frozen process, a client that never commits) must not stall its
    -- successor past the lease's end without an answer. SET LOCK_TIMEOUT set
    -- here reverts when the procedure returns ("If a SET statement runs in a
    -- stored procedure or trigger, the value of the SET option is restored
    -- after control is returned", SET statements). On SQL Server the timeout
    -- (error 1222) is answered from the committed row when the call runs on
    -- its own (below), and becomes 50129 inside a caller's transaction,
    -- which that error has doomed. Babelfish's lock timeout ("canceling
    -- statement due to lock timeout") cannot be caught by TRY...CATCH, so
    -- there it reaches the caller as that error, after the same bound.
    SET LOCK_TIMEOUT 5000;
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL
    BEGIN
        UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
        SET @Found = @@ROWCOUNT;
    END;
    ELSE
    BEGIN TRY
        UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
        SET @Found = @@ROWCOUNT;
    END TRY
    BEGIN CATCH
        IF ERROR_NUMBER() <> 1222
            THROW;
        -- What holds the row or its table may be an open transaction, a
        -- deploy's schema lock or a recovery's table lock: the message
        -- names no culprit it cannot know.
        IF @@TRANCOUNT > 1 OR (@@OPTIONS & 2) = 2
            THROW 50129, N'Waited 5 seconds for the fence row or its table: an open transaction, a deploy or a recovery holds it.', 1;
        ROLLBACK TRANSACTION;
        -- Nothing was granted, and contention is an answer, not an error.
        -- The committed row answers when it can be read without waiting
        -- again: under READ_COMMITTED_SNAPSHOT (Azure SQL Database's
        -- default) "the Database Engine uses row versioning to present each
        -- statement with a transactionally consistent snapshot of the data
        -- as it existed at the start of the statement" (SET TRANSACTION
        -- ISOLATION LEVEL). No committed row is NotProvisioned, and a live
        -- committed holder is Busy until its expiry. A committed row with no
        -- live holder is being decided by the open transaction, whose end is
        -- unknown; so is a row that cannot be read without waiting (with
        -- READ_COMMITTED_SNAPSHOT off, SQL Server's default, "The shared
        -- locks also block the statement from reading rows modified by other
        -- transactions until the other transaction is completed"). Both are
        -- Busy until now: the caller asks again.
        SET LOCK_TIMEOUT 0;
        BEGIN TRY
            SELECT @Holder = Owner, @HolderUntil = LeaseUntilUtc FROM fence.Resource WHERE ResourceKey = @ResourceKey;
            SET @Found = @@ROWCOUNT;
        END TRY
        BEGIN CATCH
            IF ERROR_NUMBER() <> 1222
                THROW;
        END CATCH;
        SET @Now = SYSUTCDATETIME();
        IF @Found = 0
            SELECT CAST(N'NotProvisioned' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS Generation,
                   CAST(NULL AS datetime2(7)) AS LeaseUntilUtc, @Now AS ServerUtc;
        ELSE
            SELECT CAST(N'Busy' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS Generation,
                   CASE WHEN @Holder IS NOT NULL AND @HolderUntil > @Now THEN @HolderUntil ELSE @Now END
                       AS LeaseUntilUtc,
                   @Now AS ServerUtc;
        RETURN;
    END CATCH;
    SET @Now = SYSUTCDATETIME();
    SET @Until = DATEADD(SECOND, @LeaseSeconds, @Now);

    -- Read under the lock: exact on every engine, unlike OUTPUT under
    -- concurrent updates.
    SELECT @Generation = Generation, @Holder = Owner, @HolderUntil = LeaseUntilUtc,
           @HolderAcquiredAt = AcquiredAtUtc, @PublishedGeneration = PublishedGeneration,
           @PublishedSourceVersion = PublishedSourceVersion
      FROM fence.Resource
     WHERE ResourceKey = @ResourceKey;

    IF @Found = 1 AND @Holder = @Owner AND @HolderUntil > @Now
    BEGIN
        -- The holder's retry: same generation, a longer lease.
        UPDATE fence.Resource SET LeaseUntilUtc = @Until WHERE ResourceKey = @ResourceKey;
        SET @Taken = 1;
    END;
    ELSE IF @Found = 1 AND (@Holder IS NULL OR @HolderUntil <= @Now)
    BEGIN
        -- A lease that ran out ends its tenure here, when the next one begins.
        IF @Holder IS NOT NULL
            INSERT INTO fence.Tenure (ResourceKey, Generation, OwnerHash, AcquiredAtUtc, EndedAtUtc, Ending, Published,
                                      SourceVersion)
            VALUES (@ResourceKey, @Generation,
                    HASHBYTES('SHA2_256', CAST(UPPER(CAST(@Holder AS char(36))) AS varchar(36))),
                    @HolderAcquiredAt, @HolderUntil, N'Expired',
                    CASE WHEN @PublishedGeneration = @Generation THEN 1 ELSE 0 END,
                    CASE WHEN @PublishedGeneration = @Generation THEN @PublishedSourceVersion END);

        SET @Generation += 1;
        UPDATE fence.Resource
           SET Generation    = @Generation,
               Owner         = @Owner,
               LeaseUntilUtc = @Until,
               AcquiredAtUtc = @Now
         WHERE ResourceKey = @ResourceKey;
        SET @Taken = 1;
    END;

    COMMIT TRANSACTION;

    -- ServerUtc (contract v1.2) is the clock reading the lease was judged by:
    -- a waiter times its pause as LeaseUntilUtc - ServerUtc on its own clock,
    -- so a server clock set apart from the caller's changes nothing.
    IF @Taken = 1
        SELECT CAST(N'Acquired' AS nvarchar(32)) AS Outcome, @Generation AS Generation, @Until AS LeaseUntilUtc,
               @Now AS ServerUtc;
    ELSE IF @Found = 1
        SELECT CAST(N'Busy' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS Generation,
               @HolderUntil AS LeaseUntilUtc, @Now AS ServerUtc;
    ELSE
        SELECT CAST(N'NotProvisioned' AS nvarchar(32)) AS Outcome, CAST(NULL AS bigint) AS Generation,
               CAST(NULL AS datetime2(7)) AS LeaseUntilUtc, @Now AS ServerUtc;
END;
