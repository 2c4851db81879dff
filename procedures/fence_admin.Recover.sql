-- After a restore from backup or a failover that lost recent writes, the
-- database may have forgotten generations it already handed out. Recover
-- raises every resource's generation to the start of a new epoch: a multiple
-- of 2^40 above both the highest generation the database holds and @Floor (the
-- highest generation the operator knows was issued anywhere, e.g. stored by a
-- downstream system). The next acquisition of every resource therefore gets a
-- generation above any issued before. Every open lease is voided, so its
-- holder's publish answers Superseded and its renew Lost.
--
-- Idempotent per @RecoveryId: repeating a recovery answers AlreadyRecovered
-- and changes nothing. @DatabaseIdentity, when given, is recorded as the
-- database identity this recovery answers, which `check` and `status` compare.
CREATE PROCEDURE fence_admin.Recover
    @RecoveryId       uniqueidentifier,
    @Floor            bigint = NULL,
    @DatabaseIdentity uniqueidentifier = NULL
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

    IF @RecoveryId IS NULL OR @RecoveryId = '00000000-0000-0000-0000-000000000000'
        THROW 50124, N'@RecoveryId must be a non-nil uniqueidentifier, reused only to repeat the same recovery.', 1;
    -- Below 2^62, so that the epoch above it still fits a bigint.
    IF @Floor < 0 OR @Floor > 4611686018427387903
        THROW 50125, N'@Floor must be NULL or 0 to 4611686018427387903 (the highest generation known to be issued).', 1;
    IF @DatabaseIdentity = '00000000-0000-0000-0000-000000000000'
        THROW 50126, N'@DatabaseIdentity must be NULL or the database''s recovery fork guid.', 1;

    -- Generations per epoch: a resource can be acquired 2^40 times within one
    -- epoch, and 2^22 recoveries fit below 2^62.
    DECLARE @EpochSize bigint = 1099511627776;
    DECLARE @Now datetime2(7), @Highest bigint, @NewFloor bigint, @Voided int;

    DECLARE @Lock int, @RecoverLock nvarchar(255) = N'fencepost:recover:' + DB_NAME(),
            @DeployLock nvarchar(255) = N'fencepost:deploy:' + DB_NAME(), @Rows bigint, @Locked bit = 0,
            @GiveUpAt datetime2(7) = DATEADD(second, 5, SYSUTCDATETIME()), @Wait int,
            @CallerTransaction bit = CASE WHEN @@TRANCOUNT > 0 THEN 1 ELSE 0 END;

    WHILE @Locked = 0
    BEGIN
        -- What is left of the 5 seconds, for the application locks.
        SET @Wait = DATEDIFF(millisecond, SYSUTCDATETIME(), @GiveUpAt);
        IF @Wait < 0
            SET @Wait = 0;
        BEGIN TRANSACTION;

        -- One recovery at a time, also on an empty table (two runs of one
        -- @RecoveryId: the second answers AlreadyRecovered, never a duplicate
        -- key), and none while a first Provision is under way: Provision holds
        -- this lock shared while it reads the floor and inserts, so a key
        -- created during a recovery starts at or above its floor. Application
        -- locks are database-scoped on SQL Server and server-wide on Babelfish,
        -- hence the database name. The deploy lock keeps a deploy from
        -- recording the database identity in the middle of a recovery that
        -- records it too. Both waits share the 5 seconds below.
        EXEC @Lock = sp_getapplock @Resource = @RecoverLock, @LockMode = N'Exclusive', @LockOwner = N'Transaction',
                                   @LockTimeout = @Wait;
        IF @Lock < 0
            THROW 50127, N'Recover could not take the recovery lock within 5 seconds: another recovery, or a first Provision inside a transaction that stays open, holds it.', 1;
        EXEC @Lock = sp_getapplock @Resource = @DeployLock, @LockMode = N'Exclusive', @LockOwner = N'Transaction',
                                   @LockTimeout = @Wait;
        IF @Lock < 0
            THROW 50127, N'Recover could not take the deploy lock within 5 seconds: a deploy of this database is running.', 1;

        -- Then the whole table, in one lock taken up front: it waits for every
        -- transaction that holds a fence row instead of deadlocking with one
        -- that asks for a second row after Recover locked it, no key can be
        -- inserted under it, and no row locks accumulate towards escalation.
        -- "TABLOCK ... The lock is held until the end of the statement.
        -- However, if you also specify HOLDLOCK, the lock is held until the end
        -- of the transaction" (Table hints); optimized locking "has no effect on
        -- other kinds of database and object locks" (Optimized locking).
        --
        -- The wait is bounded, and made in short tries: a waiting request for
        -- the table's X lock queues every new fence call on any key behind it,
        -- so one try waits 250 ms, and the calls queued behind it are granted
        -- when it gives up, before the next try queues, until 5 seconds have
        -- passed. Behind a transaction that stays open the
        -- operator gets 50129 instead of every key stalling for as long as it
        -- stays open; `fencepost lease recover` names the blocking sessions.
        -- Inside a caller's transaction a failed try cannot be rolled back
        -- alone, so there one try waits the whole 5 seconds.
        --
        -- Babelfish ignores table hints, so there every row is locked by an
        -- update that changes it (see Acquire), and the application lock above
        -- keeps Provision out; its lock time-out is an error no procedure can
        -- catch, which ends the call.
        IF SERVERPROPERTY(N'Babelfish') IS NOT NULL
        BEGIN
            SET LOCK_TIMEOUT 5000;
            UPDATE fence.Resource SET LockCount = LockCount + 1;
            SET @Locked = 1;
        END;
        ELSE
        BEGIN TRY
            IF @CallerTransaction = 1
                SET LOCK_TIMEOUT 5000;
            ELSE
                SET LOCK_TIMEOUT 250;
            SELECT @Rows = COUNT_BIG(*) FROM fence.Resource WITH (TABLOCKX, HOLDLOCK);
            SET @Locked = 1;
        END TRY
        BEGIN CATCH
            -- A lock time-out, or a deadlock with a caller that waits for the
            -- recovery lock while holding a fence row (a first Provision in
            -- its transaction), ends this try; anything else is an error.
            IF ERROR_NUMBER() NOT IN (1222, 1205) OR (@CallerTransaction = 1 AND ERROR_NUMBER() = 1205)
                THROW;
            -- XACT_ABORT doomed the transaction (a deadlock victim's is gone
            -- already): this try is over.
            IF @CallerTransaction = 0 AND XACT_STATE() <> 0
                ROLLBACK TRANSACTION;
            IF @CallerTransaction = 1 OR SYSUTCDATETIME() >= @GiveUpAt
                THROW 50129, N'Recover waited 5 seconds for the fence table: open transactions hold fence rows. End them (fencepost lease recover names their sessions) and run the same recovery again.', 1;
        END CATCH;
    END;
    SET LOCK_TIMEOUT -1;
    SET @Now = SYSUTCDATETIME();

    IF EXISTS (SELECT 1 FROM fence.Recovery WHERE RecoveryId = @RecoveryId)
    BEGIN
        COMMIT TRANSACTION;
        SELECT CAST(N'AlreadyRecovered' AS nvarchar(32)) AS Outcome, GenerationFloor, LeasesVoided, RecoveredAtUtc
          FROM fence.Recovery
         WHERE RecoveryId = @RecoveryId;
        RETURN;
    END;

    SELECT @Highest = MAX(Generation) FROM fence.Resource;
    IF @Highest IS NULL OR @Highest < @Floor
        SET @Highest = ISNULL(@Floor, 0);
    SET @NewFloor = (@Highest / @EpochSize + 1) * @EpochSize;

    SELECT @Voided = COUNT(*) FROM fence.Resource WHERE Owner IS NOT NULL AND LeaseUntilUtc > @Now;

    -- Every open tenure ends: Superseded while live, Expired when it had run out.
    INSERT INTO fence.Tenure (ResourceKey, Generation, OwnerHash, AcquiredAtUtc, EndedAtUtc, Ending, Published,
                              SourceVersion)
    SELECT ResourceKey, Generation,
           HASHBYTES('SHA2_256', CAST(UPPER(CAST(Owner AS char(36))) AS varchar(36))),
           AcquiredAtUtc,
           CASE WHEN LeaseUntilUtc > @Now THEN @Now ELSE LeaseUntilUtc END,
           CASE WHEN LeaseUntilUtc > @Now THEN N'Superseded' ELSE N'Expired' END,
           CASE WHEN PublishedGeneration = Generation THEN 1 ELSE 0 END,
           CASE WHEN PublishedGeneration = Generation THEN PublishedSourceVersion END
      FROM fence.Resource
     WHERE Owner IS NOT NULL;

    UPDATE fence.Resource
       SET Generation    = @NewFloor,
           Owner         = NULL,
           LeaseUntilUtc = NULL,
           AcquiredAtUtc = NULL;

    INSERT INTO fence.Recovery (RecoveryId, RecoveredAtUtc, GenerationFloor, LeasesVoided, DatabaseIdentity)
    VALUES (@RecoveryId, @Now, @NewFloor, @Voided, @DatabaseIdentity);

    IF @DatabaseIdentity IS NOT NULL
    BEGIN
        UPDATE fence.DatabaseIdentity
           SET RecoveryForkGuid = @DatabaseIdentity, RecordedAtUtc = @Now, RecordedBy = N'recover'
         WHERE Singleton = 1;
        IF @@ROWCOUNT = 0
            INSERT INTO fence.DatabaseIdentity (Singleton, RecoveryForkGuid, RecordedAtUtc, RecordedBy)
            VALUES (1, @DatabaseIdentity, @Now, N'recover');
    END;

    COMMIT TRANSACTION;

    SELECT CAST(N'Recovered' AS nvarchar(32)) AS Outcome, @NewFloor AS GenerationFloor, @Voided AS LeasesVoided,
           @Now AS RecoveredAtUtc;
END;
