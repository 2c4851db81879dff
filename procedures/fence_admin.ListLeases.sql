-- The operator's view of many resources at once: one row per resource whose
-- key starts with @Prefix, in key order, at most @MaxRows of them; with
-- @HeldOnly = 1 only those whose lease is held now (server clock). Like
-- Inspect, it never returns an owner: owner and generation together are what
-- a publish presents. @After (optional) pages: only keys after it, so the
-- next page starts after the last key of this one.
CREATE PROCEDURE fence_admin.ListLeases
    @Prefix   nvarchar(4000) = N'',
    @HeldOnly bit = 0,
    @MaxRows  int = 1000,
    @After    nvarchar(4000) = NULL
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

    IF @Prefix IS NULL
        THROW 50120, N'@Prefix must not be NULL (an empty prefix lists every resource).', 1;
    IF @HeldOnly IS NULL
        THROW 50121, N'@HeldOnly must be 0 (every resource) or 1 (held leases only).', 1;
    IF @MaxRows IS NULL OR @MaxRows NOT BETWEEN 1 AND 100000
        THROW 50122, N'@MaxRows must be 1 to 100000.', 1;

    DECLARE @Now datetime2(7) = SYSUTCDATETIME();
    -- A prefix longer than any key matches none; cut to 257 characters it
    -- still matches none, and its escaped pattern stays short.
    SET @Prefix = LEFT(@Prefix, 257);
    -- The prefix matches literally: LIKE neither pads trailing spaces ("The
    -- only exception to this rule is the LIKE predicate", KB 316626) nor counts
    -- characters, and its wildcards are escaped here. REPLACE compares under
    -- its input's collation, so the prefix is escaped under the key's binary
    -- one: under a width-insensitive default a full-width ％ would be escaped
    -- as if it were %. 257 characters escape to at most 514.
    DECLARE @Pattern nvarchar(520) =
        REPLACE(REPLACE(REPLACE(REPLACE(@Prefix COLLATE Latin1_General_100_BIN2,
            N'\', N'\\'), N'%', N'\%'), N'_', N'\_'), N'[', N'\[') + N'%';

    -- Every key that starts with the prefix sorts below the prefix with its
    -- last character raised by one (binary order compares character by
    -- character). Not for a last character that is half of a surrogate pair
    -- or beyond (SQL Server's RIGHT gives the low surrogate, Babelfish's the
    -- whole character), nor for an empty prefix: then there is no bound.
    -- The empty prefix is told by its length: UNICODE of the empty string
    -- is NULL on SQL Server but 0 on Babelfish, whose bound NCHAR(1) would
    -- leave out every key.
    DECLARE @Last int = UNICODE(RIGHT(@Prefix, 1));
    DECLARE @Below nvarchar(260) =
        CASE WHEN LEN(@Prefix + N'.') > 1 AND @Last < 55295
             THEN LEFT(@Prefix, LEN(@Prefix + N'.') - 2) + NCHAR(@Last + 1) END;

    -- A range on the key, from @After to the prefix's bound: an engine
    -- cannot tell how many keys a LIKE pattern held in a variable matches,
    -- and without the bound plans a scan of every key. RECOMPILE plans each
    -- page for its own values, so a NULL @After, a missing bound or
    -- @HeldOnly = 0 drops out and the range seeks the key index: page n
    -- reads one page of rows, not n. (@After is not replaced by the empty
    -- string: SQL Server pads the shorter side with spaces when it compares,
    -- so a key that starts below a space would sort below it.)
    -- COLLATE names the key column's own collation: Babelfish cannot choose one
    -- for a comparison inside an expression.
    SELECT TOP (@MaxRows)
           CAST(N'Found' AS nvarchar(32)) AS Outcome,
           r.ResourceKey,
           r.Generation,
           CAST(CASE WHEN r.Owner IS NOT NULL AND r.LeaseUntilUtc > @Now THEN 1 ELSE 0 END AS bit) AS IsHeld,
           r.LeaseUntilUtc,
           r.PublishedGeneration,
           @Now AS ServerUtc,
           r.SourceVersion
      FROM fence.Resource AS r
     WHERE r.ResourceKey LIKE @Pattern COLLATE Latin1_General_100_BIN2 ESCAPE N'\'
       AND (@After IS NULL OR r.ResourceKey > @After COLLATE Latin1_General_100_BIN2)
       AND (@Below IS NULL OR r.ResourceKey < @Below COLLATE Latin1_General_100_BIN2)
       AND (@HeldOnly = 0 OR (r.Owner IS NOT NULL AND r.LeaseUntilUtc > @Now))
     ORDER BY r.ResourceKey
    OPTION (RECOMPILE);
END;
