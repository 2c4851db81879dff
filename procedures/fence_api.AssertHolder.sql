-- Fences the caller's own tables: called inside the caller's transaction,
-- before or after it writes, it holds the fence row until that transaction
-- ends and throws unless the caller holds the current, unexpired lease. The
-- throw (XACT_ABORT) rolls back everything the transaction wrote. With
-- @SourceVersion (contract v1.4) the transaction's writes are fenced by source
-- freshness as a publish is: 50114 when a newer source was already committed,
-- otherwise the resource's source version rises to it inside the caller's
-- transaction, so a rollback undoes it.
CREATE PROCEDURE fence_api.AssertHolder
    @ResourceKey nvarchar(4000), -- wider than a key may be, so an over-long key is refused, not truncated
    @Owner       uniqueidentifier,
    @Generation  bigint,
    @SourceVersion bigint = NULL -- contract v1.4; NULL: no freshness check
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

    -- A check without a lock held until the caller commits proves nothing.
    -- In implicit-transaction mode (SET IMPLICIT_TRANSACTIONS ON, which ODBC
    -- and JDBC manual-commit and SET ANSI_DEFAULTS ON use) @@TRANCOUNT is 0
    -- until a statement opens the transaction: "if @@TRANCOUNT = 0, any of the
    -- following Transact-SQL statements begins a new transaction" (SET
    -- IMPLICIT_TRANSACTIONS), among them the UPDATE below, which then holds
    -- the lock until the caller commits.
    IF @@TRANCOUNT = 0 AND (@@OPTIONS & 2) = 0
        THROW 50113, N'AssertHolder must run inside the caller''s transaction (BEGIN TRANSACTION first).', 1;

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
    IF @SourceVersion < 0
        THROW 50109, N'@SourceVersion must be 0 or more, or NULL to assert without a freshness check.', 1;

    DECLARE @Now datetime2(7), @Found int;
    DECLARE @CurrentGeneration bigint, @CurrentOwner uniqueidentifier, @Until datetime2(7);
    DECLARE @StoredSourceVersion bigint;

    -- Lock the row the same way on every engine, in the caller's transaction:
    -- no successor can acquire until it ends. Then read the clock, then judge.
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

    SELECT @CurrentGeneration = Generation, @CurrentOwner = Owner, @Until = LeaseUntilUtc,
           @StoredSourceVersion = SourceVersion
      FROM fence.Resource
     WHERE ResourceKey = @ResourceKey;

    IF @Found = 0
        THROW 50112, N'@ResourceKey is not provisioned.', 1;
    IF @CurrentGeneration <> @Generation OR (@CurrentOwner IS NOT NULL AND @CurrentOwner <> @Owner)
        THROW 50110, N'The lease was superseded: another owner or a newer generation is current.', 1;
    IF @CurrentOwner IS NULL OR @Until <= @Now
        THROW 50111, N'The lease expired or was released, and nobody has taken over.', 1;

    -- Ownership first: the source is judged only for the current holder.
    IF @StoredSourceVersion > @SourceVersion
        THROW 50114, N'@SourceVersion is older than the source version already committed for this resource.', 1;
    IF @SourceVersion IS NOT NULL AND (@StoredSourceVersion IS NULL OR @StoredSourceVersion < @SourceVersion)
        UPDATE fence.Resource SET SourceVersion = @SourceVersion WHERE ResourceKey = @ResourceKey;

    SELECT CAST(N'Holding' AS nvarchar(32)) AS Outcome, @CurrentGeneration AS Generation, @Until AS LeaseUntilUtc;
END;
