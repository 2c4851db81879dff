-- Takes any free slot of a resource with @Slots slots (contract v1.8), a
-- fenced semaphore: at most @Slots holders at once. Each slot is an ordinary
-- fence row, keyed '<resource>#<slot>' (slot 0 to @Slots - 1), with its own
-- generation, so a holder whose slot was taken over is refused by
-- AssertHolder and by a publish under its slot like any stale holder, and
-- renews, publishes and releases it with the single-key procedures.
--
-- The resource's own row is the semaphore's lock: every grant of a slot
-- happens under it, so AcquireSlot calls of one resource decide one at a
-- time. Under it the call reads every slot row there is, whatever its
-- number, and locks (in key order) only the rows it may take: the free and
-- expired ones and the caller's own. A row read as live is counted live
-- without its lock: nothing but a grant, which needs the resource's lock,
-- makes a slot live, and a lease never comes back once ended (Renew never
-- revives), so a row read as live is live or has ended since, and counting
-- it errs only towards Busy. A holder that fences its own transaction by
-- its slot therefore delays no other slot's grant. A slot is granted only
-- while fewer than @Slots are live, so lowering @Slots never lets more than
-- the new number in: the holders of higher slots are counted until their
-- leases end. A retry by an owner that holds a live slot extends that slot,
-- its generation kept.
CREATE PROCEDURE fence_api.AcquireSlot
    @ResourceKey  nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    @Slots        int,
    @Owner        uniqueidentifier,
    @LeaseSeconds int
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    -- Decide under READ COMMITTED whatever isolation level the caller chose
    -- (see Acquire).
    DECLARE @Anchor int;
    IF SERVERPROPERTY(N'Babelfish') IS NULL AND (@@TRANCOUNT > 0 OR (@@OPTIONS & 2) = 2)
        SELECT @Anchor = COUNT(*) FROM fence.Anchor;
    IF SERVERPROPERTY(N'Babelfish') IS NULL
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;

    -- The resource's key leaves room for '#' and a slot number of up to
    -- four digits within the 256 UTF-16 code units a key may have.
    DECLARE @KeyUnits int = DATALENGTH(@ResourceKey) / 2, @KeyAt int = 0;
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL
        SET @KeyUnits = LEN(@ResourceKey + N'.') - 1;
    WHILE SERVERPROPERTY(N'Babelfish') IS NOT NULL AND @KeyUnits BETWEEN 124 AND 251
          AND @KeyAt < LEN(@ResourceKey + N'.') - 1
    BEGIN
        SET @KeyAt += 1;
        IF UNICODE(SUBSTRING(@ResourceKey, @KeyAt, 1)) > 65535
            SET @KeyUnits += 1;
    END;
    IF @ResourceKey IS NULL OR @KeyUnits NOT BETWEEN 1 AND 251
        THROW 50101, N'@ResourceKey must be 1 to 251 UTF-16 code units long for a resource with slots (its slot keys add "#" and the slot number).', 1;
    IF UNICODE(RIGHT(@ResourceKey, 1)) = 32
        THROW 50101, N'@ResourceKey must not end with a space: keys are exact identifiers.', 1;
    IF @Slots IS NULL OR @Slots NOT BETWEEN 1 AND 1000
        THROW 50136, N'@Slots must be between 1 and 1000.', 1;
    IF @Owner IS NULL OR @Owner = '00000000-0000-0000-0000-000000000000'
        THROW 50102, N'@Owner must be a non-nil uniqueidentifier, fresh for each acquisition.', 1;
    IF @LeaseSeconds IS NULL OR @LeaseSeconds NOT BETWEEN 1 AND 86400
        THROW 50103, N'@LeaseSeconds must be between 1 and 86400.', 1;

    DECLARE @Slot TABLE
    (
        ResourceKey nvarchar(256) COLLATE Latin1_General_100_BIN2 NOT NULL PRIMARY KEY,
        SlotText    nvarchar(10) NOT NULL,
        SlotNumber  int NULL,
        Owner       uniqueidentifier NULL,
        LeaseUntil  datetime2(7) NULL,
        Takeable    bit NOT NULL DEFAULT 0,
        LockOrder   int NULL
    );
    DECLARE @Now datetime2(7), @Until datetime2(7), @Found int, @OwnLive int, @Takeable int, @Locked int = 0,
            @Key nvarchar(256), @Live int, @Chosen nvarchar(256), @ChosenNumber int, @Outcome nvarchar(32),
            @Generation bigint, @BusyUntil datetime2(7), @Prefix nvarchar(260) = @ResourceKey + N'#',
            @ReadAt datetime2(7);

    -- A resource whose slots its live holders fill, none of them this
    -- owner, is answered Busy from the committed rows before any lock is
    -- taken, so a full semaphore never queues behind a holder's open
    -- transaction. Holding nothing, this read may wait on SQL Server
    -- (READ COMMITTED without row versions waits for a row another
    -- transaction changed), bounded as the locks below are; Babelfish and
    -- READ_COMMITTED_SNAPSHOT read the last committed row.
    SET LOCK_TIMEOUT 5000;
    BEGIN TRY
        SET @ReadAt = SYSUTCDATETIME();
        SELECT @Live = COUNT(CASE WHEN Owner IS NOT NULL AND LeaseUntilUtc > @ReadAt THEN 1 END),
               @OwnLive = COUNT(CASE WHEN Owner = @Owner AND LeaseUntilUtc > @ReadAt THEN 1 END),
               @BusyUntil = MIN(CASE WHEN Owner IS NOT NULL AND LeaseUntilUtc > @ReadAt THEN LeaseUntilUtc END)
          FROM fence.Resource
         WHERE ResourceKey > @Prefix
           AND ResourceKey < @ResourceKey + N'$'
           AND LEN(ResourceKey) BETWEEN LEN(@Prefix) + 1 AND LEN(@Prefix) + 4
           AND SUBSTRING(ResourceKey, LEN(@Prefix) + 1, 10) NOT LIKE N'%[^0-9]%'
           AND (LEN(ResourceKey) = LEN(@Prefix) + 1 OR SUBSTRING(ResourceKey, LEN(@Prefix) + 1, 1) <> N'0')
           AND LEFT(ResourceKey, LEN(@Prefix)) = @Prefix COLLATE Latin1_General_100_BIN2;
    END TRY
    BEGIN CATCH
        IF ERROR_NUMBER() <> 1222
            THROW;
        THROW 50129, N'Waited 5 seconds for a fence row or its table: an open transaction, a deploy or a recovery holds it.', 1;
    END CATCH;
    IF @Live >= @Slots AND @OwnLive = 0
       AND EXISTS (SELECT 1 FROM fence.Resource WHERE ResourceKey = @ResourceKey)
    BEGIN
        SELECT CAST(N'Busy' AS nvarchar(32)) AS Outcome,
               CAST(NULL AS int) AS Slot,
               CAST(NULL AS nvarchar(256)) AS ResourceKey,
               CAST(NULL AS bigint) AS Generation,
               @BusyUntil AS LeaseUntilUtc,
               @ReadAt AS ServerUtc;
        RETURN;
    END;

    BEGIN TRANSACTION;

    -- The semaphore's lock, held until the end: AcquireSlot calls of one
    -- resource run one at a time from here. Bounded as Acquire's wait is.
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
        THROW 50129, N'Waited 5 seconds for a fence row or its table: an open transaction, a deploy or a recovery holds it.', 1;
    END CATCH;

    -- A slot row locked past the bound (an open transaction on it, read or
    -- taken since the first read) ends the call with the contract's error on
    -- SQL Server; Babelfish's lock timeout cannot be caught (see Acquire).
    IF @Found = 1
    BEGIN TRY
        -- Every slot row there is, as committed: '<resource>#' and the slot's
        -- number in digits, with no leading zero ('<resource>#01' is a key
        -- like any other), found by the key's binary range ('#' sorts just
        -- before '$').
        SET @ReadAt = SYSUTCDATETIME();
        INSERT INTO @Slot (ResourceKey, SlotText, Owner, LeaseUntil, Takeable)
        SELECT ResourceKey, SUBSTRING(ResourceKey, LEN(@Prefix) + 1, 10), Owner, LeaseUntilUtc,
               CASE WHEN Owner IS NULL OR LeaseUntilUtc <= @ReadAt OR Owner = @Owner THEN 1 ELSE 0 END
          FROM fence.Resource
         WHERE ResourceKey > @Prefix
           AND ResourceKey < @ResourceKey + N'$'
           AND LEN(ResourceKey) BETWEEN LEN(@Prefix) + 1 AND LEN(@Prefix) + 4
           AND SUBSTRING(ResourceKey, LEN(@Prefix) + 1, 10) NOT LIKE N'%[^0-9]%'
           AND (LEN(ResourceKey) = LEN(@Prefix) + 1 OR SUBSTRING(ResourceKey, LEN(@Prefix) + 1, 1) <> N'0')
           AND LEFT(ResourceKey, LEN(@Prefix)) = @Prefix COLLATE Latin1_General_100_BIN2;
        -- Converted only once every number is known to be digits.
        UPDATE @Slot SET SlotNumber = CAST(SlotText AS int);
        UPDATE s
           SET LockOrder = o.LockOrder
          FROM @Slot AS s
          JOIN (SELECT ResourceKey, ROW_NUMBER() OVER (ORDER BY ResourceKey) AS LockOrder
                  FROM @Slot WHERE Takeable = 1) AS o
            ON o.ResourceKey = s.ResourceKey;
        SET @Takeable = (SELECT COUNT(*) FROM @Slot WHERE Takeable = 1);

        -- Each row that may be taken locked in key order before the clock
        -- is read, then judged as it is now, not as it was read above.
        WHILE @Locked < @Takeable
        BEGIN
            SET @Locked += 1;
            SELECT @Key = ResourceKey FROM @Slot WHERE LockOrder = @Locked;
            UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @Key;
        END;
        UPDATE s
           SET Owner = r.Owner, LeaseUntil = r.LeaseUntilUtc
          FROM @Slot AS s
          JOIN fence.Resource AS r ON r.ResourceKey = s.ResourceKey
         WHERE s.Takeable = 1;
    END TRY
    BEGIN CATCH
        IF ERROR_NUMBER() <> 1222
            THROW;
        THROW 50129, N'Waited 5 seconds for a fence row or its table: an open transaction, a deploy or a recovery holds it.', 1;
    END CATCH;
    SET @Now = SYSUTCDATETIME();
    SET @Until = DATEADD(SECOND, @LeaseSeconds, @Now);

    IF @Found = 0
        SET @Outcome = N'NotProvisioned';
    ELSE
    BEGIN
        -- The holder's retry: the slot it holds, its generation kept.
        SELECT TOP (1) @Chosen = ResourceKey, @ChosenNumber = SlotNumber
          FROM @Slot
         WHERE Takeable = 1 AND Owner = @Owner AND LeaseUntil > @Now
         ORDER BY SlotNumber;
        IF @Chosen IS NOT NULL
        BEGIN
            UPDATE fence.Resource SET LeaseUntilUtc = @Until WHERE ResourceKey = @Chosen;
            SET @Outcome = N'Acquired';
        END;
        ELSE
        BEGIN
            -- A row read as live is counted live (see above); its expiry
            -- as read, or now if it has passed since.
            SELECT @Live = COUNT(*),
                   @BusyUntil = MIN(CASE WHEN LeaseUntil > @Now THEN LeaseUntil ELSE @Now END)
              FROM @Slot
             WHERE Takeable = 0 OR (Owner IS NOT NULL AND LeaseUntil > @Now);
            IF @Live >= @Slots
                SET @Outcome = N'Busy';
            ELSE
            BEGIN
                SELECT TOP (1) @Chosen = ResourceKey, @ChosenNumber = SlotNumber
                  FROM @Slot
                 WHERE Takeable = 1 AND SlotNumber < @Slots AND (Owner IS NULL OR LeaseUntil <= @Now)
                 ORDER BY SlotNumber;
                -- Fewer holders than slots, but every free slot below
                -- @Slots lacks its fence row: provision the slot keys.
                IF @Chosen IS NULL
                    SET @Outcome = N'NotProvisioned';
                ELSE
                BEGIN
                    -- A lease that ran out ends its tenure here, as Acquire
                    -- records it.
                    INSERT INTO fence.Tenure (ResourceKey, Generation, OwnerHash, AcquiredAtUtc, EndedAtUtc, Ending,
                                              Published, SourceVersion)
                    SELECT ResourceKey, Generation,
                           HASHBYTES('SHA2_256', CAST(UPPER(CAST(Owner AS char(36))) AS varchar(36))),
                           AcquiredAtUtc, LeaseUntilUtc, N'Expired',
                           CASE WHEN PublishedGeneration = Generation THEN 1 ELSE 0 END,
                           CASE WHEN PublishedGeneration = Generation THEN PublishedSourceVersion END
                      FROM fence.Resource
                     WHERE ResourceKey = @Chosen AND Owner IS NOT NULL;
                    UPDATE fence.Resource
                       SET Generation    = Generation + 1,
                           Owner         = @Owner,
                           LeaseUntilUtc = @Until,
                           AcquiredAtUtc = @Now
                     WHERE ResourceKey = @Chosen;
                    SET @Outcome = N'Acquired';
                END;
            END;
        END;
    END;
    IF @Outcome = N'Acquired'
        SELECT @Generation = Generation FROM fence.Resource WHERE ResourceKey = @Chosen;

    COMMIT TRANSACTION;

    SELECT CAST(@Outcome AS nvarchar(32)) AS Outcome,
           CASE WHEN @Outcome = N'Acquired' THEN @ChosenNumber END AS Slot,
           CAST(CASE WHEN @Outcome = N'Acquired' THEN @Chosen END AS nvarchar(256)) AS ResourceKey,
           @Generation AS Generation,
           CASE WHEN @Outcome = N'Acquired' THEN @Until WHEN @Outcome = N'Busy' THEN @BusyUntil END AS LeaseUntilUtc,
           @Now AS ServerUtc;
END;
