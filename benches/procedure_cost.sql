-- What one lease call costs inside the engine, statement by statement.
--
-- Run it with any T-SQL client against a scratch database that
-- `fencepost migrate` deployed, as a login that may create procedures there:
--
--     sqlcmd -S tcp:127.0.0.1,1433 -U deploy -P ... -d scratch -i benches/procedure_cost.sql
--     tsql -H 127.0.0.1 -p 1433 -U deploy -P ... < benches/procedure_cost.sql   (USE scratch first)
--
-- One session calls each probe @Rounds times, interleaved, and prints the mean
-- server time of each call in microseconds: the engine's work for that call
-- without the network, the driver or the client library. The probes are
-- procedures shaped like the lease procedures (Publish's parameters, SET
-- NOCOUNT and XACT_ABORT, a transaction of their own) that do one thing more
-- each, and the shipped procedures themselves on a key of the script's own.
-- Every call is preceded by the same empty call, so each one is measured in
-- the same position: on Babelfish the first call after a write runs slower.
-- The script drops what it creates and deletes its key's rows.
SET NOCOUNT ON;
GO
CREATE SCHEMA fence_probe;
GO
CREATE PROCEDURE fence_probe.Empty
    @ResourceKey nvarchar(4000), @Owner uniqueidentifier, @Generation bigint,
    @OperationId uniqueidentifier, @Payload nvarchar(max)
AS
BEGIN
    SET NOCOUNT ON;
    SELECT CAST(N'Published' AS nvarchar(32)) AS Outcome;
END;
GO
CREATE PROCEDURE fence_probe.EmptyTransaction
    @ResourceKey nvarchar(4000), @Owner uniqueidentifier, @Generation bigint,
    @OperationId uniqueidentifier, @Payload nvarchar(max)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    BEGIN TRANSACTION;
    COMMIT TRANSACTION;
    SELECT CAST(N'Published' AS nvarchar(32)) AS Outcome;
END;
GO
CREATE PROCEDURE fence_probe.OneUpdate
    @ResourceKey nvarchar(4000), @Owner uniqueidentifier, @Generation bigint,
    @OperationId uniqueidentifier, @Payload nvarchar(max)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    BEGIN TRANSACTION;
    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
    COMMIT TRANSACTION;
    SELECT CAST(N'Published' AS nvarchar(32)) AS Outcome;
END;
GO
CREATE PROCEDURE fence_probe.TwoUpdates
    @ResourceKey nvarchar(4000), @Owner uniqueidentifier, @Generation bigint,
    @OperationId uniqueidentifier, @Payload nvarchar(max)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    BEGIN TRANSACTION;
    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
    COMMIT TRANSACTION;
    SELECT CAST(N'Published' AS nvarchar(32)) AS Outcome;
END;
GO
CREATE PROCEDURE fence_probe.UpdateAndRead
    @ResourceKey nvarchar(4000), @Owner uniqueidentifier, @Generation bigint,
    @OperationId uniqueidentifier, @Payload nvarchar(max)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @Read bigint;
    BEGIN TRANSACTION;
    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
    SELECT @Read = Generation FROM fence.Resource WHERE ResourceKey = @ResourceKey;
    COMMIT TRANSACTION;
    SELECT CAST(N'Published' AS nvarchar(32)) AS Outcome;
END;
GO
-- The outcome record Publish writes: the row is deleted again at the end.
CREATE PROCEDURE fence_probe.UpdateAndRecord
    @ResourceKey nvarchar(4000), @Owner uniqueidentifier, @Generation bigint,
    @OperationId uniqueidentifier, @Payload nvarchar(max)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    BEGIN TRANSACTION;
    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
    INSERT INTO fence.PublishedOperation (OperationId, ResourceKey, Generation, PublishedAtUtc, SourceVersion)
    VALUES (@OperationId, @ResourceKey, @Generation, SYSUTCDATETIME(), NULL);
    COMMIT TRANSACTION;
    SELECT CAST(N'Published' AS nvarchar(32)) AS Outcome;
END;
GO
-- The same record inside TRY...CATCH, as Publish catches a duplicate key.
CREATE PROCEDURE fence_probe.RecordInTry
    @ResourceKey nvarchar(4000), @Owner uniqueidentifier, @Generation bigint,
    @OperationId uniqueidentifier, @Payload nvarchar(max)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    BEGIN TRANSACTION;
    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
    BEGIN TRY
        INSERT INTO fence.PublishedOperation (OperationId, ResourceKey, Generation, PublishedAtUtc, SourceVersion)
        VALUES (@OperationId, @ResourceKey, @Generation, SYSUTCDATETIME(), NULL);
    END TRY
    BEGIN CATCH
        THROW;
    END CATCH;
    COMMIT TRANSACTION;
    SELECT CAST(N'Published' AS nvarchar(32)) AS Outcome;
END;
GO
-- One update after SET LOCK_TIMEOUT, as Acquire bounds its wait for the row.
CREATE PROCEDURE fence_probe.UpdateWithLockTimeout
    @ResourceKey nvarchar(4000), @Owner uniqueidentifier, @Generation bigint,
    @OperationId uniqueidentifier, @Payload nvarchar(max)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    SET LOCK_TIMEOUT 5000;
    BEGIN TRANSACTION;
    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
    COMMIT TRANSACTION;
    SELECT CAST(N'Published' AS nvarchar(32)) AS Outcome;
END;
GO
-- One update and the owner's hash, as the tenure history records it.
CREATE PROCEDURE fence_probe.UpdateAndHash
    @ResourceKey nvarchar(4000), @Owner uniqueidentifier, @Generation bigint,
    @OperationId uniqueidentifier, @Payload nvarchar(max)
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;
    DECLARE @Hash varbinary(32);
    BEGIN TRANSACTION;
    UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @ResourceKey;
    SET @Hash = HASHBYTES('SHA2_256', CAST(UPPER(CAST(@Owner AS char(36))) AS varchar(36)));
    COMMIT TRANSACTION;
    SELECT CAST(N'Published' AS nvarchar(32)) AS Outcome;
END;
GO
EXEC fence_api.Provision @ResourceKey = N'fence-probe:cycle';
EXEC fence_api.Provision @ResourceKey = N'fence-probe:row';
GO
DECLARE @Rounds int = 500, @Round int = -3; -- three unmeasured rounds compile every probe first
DECLARE @Started datetime2(7), @Owner uniqueidentifier, @Operation uniqueidentifier, @Generation bigint;
DECLARE @Empty bigint = 0, @EmptyTransaction bigint = 0, @OneUpdate bigint = 0, @TwoUpdates bigint = 0,
        @UpdateAndRead bigint = 0, @UpdateAndRecord bigint = 0, @RecordInTry bigint = 0,
        @UpdateWithLockTimeout bigint = 0, @UpdateAndHash bigint = 0, @Acquire bigint = 0, @Publish bigint = 0,
        @Release bigint = 0, @PublishAndRelease bigint = 0, @Elapsed bigint;
DECLARE @Cycle nvarchar(256) = N'fence-probe:cycle', @Row nvarchar(256) = N'fence-probe:row';
WHILE @Round < @Rounds
BEGIN
    IF @Round = 0
        SELECT @Empty = 0, @EmptyTransaction = 0, @OneUpdate = 0, @TwoUpdates = 0, @UpdateAndRead = 0,
               @UpdateAndRecord = 0, @RecordInTry = 0, @UpdateWithLockTimeout = 0, @UpdateAndHash = 0, @Acquire = 0, @Publish = 0, @Release = 0, @PublishAndRelease = 0;
    SET @Owner = NEWID();
    SET @Operation = NEWID();

    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Empty += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_probe.EmptyTransaction @Row, @Owner, 1, @Operation, N'x';
    SET @EmptyTransaction += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_probe.OneUpdate @Row, @Owner, 1, @Operation, N'x';
    SET @OneUpdate += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_probe.TwoUpdates @Row, @Owner, 1, @Operation, N'x';
    SET @TwoUpdates += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_probe.UpdateAndRead @Row, @Owner, 1, @Operation, N'x';
    SET @UpdateAndRead += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    -- A generation of its own per round: the record's key is unique.
    SET @Generation = 1000000 + @Round;
    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_probe.UpdateAndRecord @Row, @Owner, @Generation, @Operation, N'x';
    SET @UpdateAndRecord += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    SET @Generation = 2000000 + @Round;
    SET @Operation = NEWID();
    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_probe.RecordInTry @Row, @Owner, @Generation, @Operation, N'x';
    SET @RecordInTry += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_probe.UpdateWithLockTimeout @Row, @Owner, 1, @Operation, N'x';
    SET @UpdateWithLockTimeout += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_probe.UpdateAndHash @Row, @Owner, 1, @Operation, N'x';
    SET @UpdateAndHash += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    -- The shipped procedures: acquire, publish, release, then acquire and a
    -- publish that releases, as the bench's cycle does.
    SET @Operation = NEWID();
    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_api.Acquire @ResourceKey = @Cycle, @Owner = @Owner, @LeaseSeconds = 60;
    SET @Acquire += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());
    SELECT @Generation = Generation FROM fence.Resource WHERE ResourceKey = @Cycle;

    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_api.Publish @ResourceKey = @Cycle, @Owner = @Owner, @Generation = @Generation,
                           @OperationId = @Operation, @Payload = N'x';
    SET @Publish += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_api.Release @ResourceKey = @Cycle, @Owner = @Owner, @Generation = @Generation;
    SET @Release += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    SET @Owner = NEWID();
    SET @Operation = NEWID();
    EXEC fence_api.Acquire @ResourceKey = @Cycle, @Owner = @Owner, @LeaseSeconds = 60;
    SELECT @Generation = Generation FROM fence.Resource WHERE ResourceKey = @Cycle;
    EXEC fence_probe.Empty @Row, @Owner, 1, @Operation, N'x';
    SET @Started = SYSUTCDATETIME();
    EXEC fence_api.Publish @ResourceKey = @Cycle, @Owner = @Owner, @Generation = @Generation,
                           @OperationId = @Operation, @Payload = N'x', @Release = 1;
    SET @PublishAndRelease += DATEDIFF_BIG(MICROSECOND, @Started, SYSUTCDATETIME());

    SET @Round += 1;
END;
SELECT N'empty procedure' AS probe, @Empty / @Rounds AS server_us
UNION ALL SELECT N'+ BEGIN and COMMIT, nothing written', @EmptyTransaction / @Rounds
UNION ALL SELECT N'+ one UPDATE of the fence row', @OneUpdate / @Rounds
UNION ALL SELECT N'+ a second UPDATE of the row', @TwoUpdates / @Rounds
UNION ALL SELECT N'+ a read of the locked row', @UpdateAndRead / @Rounds
UNION ALL SELECT N'+ the outcome record (INSERT)', @UpdateAndRecord / @Rounds
UNION ALL SELECT N'  the record inside TRY...CATCH', @RecordInTry / @Rounds
UNION ALL SELECT N'one UPDATE after SET LOCK_TIMEOUT', @UpdateWithLockTimeout / @Rounds
UNION ALL SELECT N'one UPDATE and HASHBYTES of the owner', @UpdateAndHash / @Rounds
UNION ALL SELECT N'fence_api.Acquire', @Acquire / @Rounds
UNION ALL SELECT N'fence_api.Publish', @Publish / @Rounds
UNION ALL SELECT N'fence_api.Release', @Release / @Rounds
UNION ALL SELECT N'fence_api.Publish @Release = 1', @PublishAndRelease / @Rounds;
GO
DELETE FROM fence.PublishedOperation WHERE ResourceKey IN (N'fence-probe:cycle', N'fence-probe:row');
DELETE FROM fence.Tenure WHERE ResourceKey IN (N'fence-probe:cycle', N'fence-probe:row');
DELETE FROM fence.Resource WHERE ResourceKey IN (N'fence-probe:cycle', N'fence-probe:row');
DROP PROCEDURE fence_probe.Empty;
DROP PROCEDURE fence_probe.EmptyTransaction;
DROP PROCEDURE fence_probe.OneUpdate;
DROP PROCEDURE fence_probe.TwoUpdates;
DROP PROCEDURE fence_probe.UpdateAndRead;
DROP PROCEDURE fence_probe.UpdateAndRecord;
DROP PROCEDURE fence_probe.RecordInTry;
DROP PROCEDURE fence_probe.UpdateWithLockTimeout;
DROP PROCEDURE fence_probe.UpdateAndHash;
DROP SCHEMA fence_probe;
GO
