-- Takes several leases for one owner at once (contract v1.8), all or nothing:
-- either every key is granted, each under its own new generation (or, for a
-- key this owner still holds, its generation kept and its lease extended, as
-- Acquire answers a retry), or nothing changes and each key says why. Keys
-- are locked one at a time in binary key order, so two sets that overlap
-- take their common keys in the same order and never deadlock each other,
-- and a single-key call, which holds one row, never deadlocks a set.
--
-- @ResourceKeys is a JSON array of keys: ["report:a", "report:b"]. T-SQL
-- passes no table to a procedure from most drivers, and JSON is read
-- set-wise on every engine (OPENJSON, SQL Server 2016 on, compatibility
-- level 130 on).
CREATE PROCEDURE fence_api.AcquireSet
    @ResourceKeys nvarchar(max),
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

    -- The keys, each compared binary as the fence row's key is. A value that
    -- is not a string is refused by its JSON type, before anything converts
    -- it: Babelfish raises a conversion error inside OPENJSON past any CATCH.
    DECLARE @Set TABLE
    (
        ResourceKey nvarchar(4000) COLLATE Latin1_General_100_BIN2 NULL,
        KeyUnits    int NULL,
        LockOrder   int NULL,
        Found       int NULL,
        Outcome     nvarchar(32) NULL,
        Generation  bigint NULL,
        LeaseUntil  datetime2(7) NULL
    );

    -- JSON may begin with any of its four whitespace characters.
    DECLARE @Blank nvarchar(10) = N'%[^ ' + NCHAR(9) + NCHAR(10) + NCHAR(13) + N']%';
    IF @ResourceKeys IS NULL OR ISJSON(@ResourceKeys) = 0
       OR SUBSTRING(@ResourceKeys, PATINDEX(@Blank, @ResourceKeys), 1) <> N'['
        THROW 50134, N'@ResourceKeys must be a JSON array of 1 to 1000 keys (strings).', 1;

    -- Babelfish reads JSON as PostgreSQL does, which holds no NUL character
    -- and no half of a surrogate pair: OPENJSON fails with an error of its
    -- own on \u0000 or a lone \ud800-\udfff, and no key holding one can
    -- exist there. Refused first, with this contract's error (as RenewMany
    -- refuses them). An escaped backslash (\\) never starts an escape, so
    -- those pairs are set aside before looking; an escaped pair of
    -- surrogates is read as one character.
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL AND CHARINDEX(N'\u', @ResourceKeys) > 0
    BEGIN
        -- Each escaped backslash set aside as NCHAR(1), the text case-folded
        -- (JSON's hex digits come in either case), and each escaped half of a
        -- pair marked: a high half (\ud800-\udbff) as NCHAR(2), a low half
        -- (\udc00-\udfff) as NCHAR(3), characters no JSON text holds bare. A
        -- pair is then a high mark, two hex digits and a low mark; a mark
        -- without its partner three places away is half a pair. Set-wise, so
        -- the cost follows the text's length, not the number of pairs.
        DECLARE @Escapes nvarchar(max) =
            N'   ' + REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(
                LOWER(REPLACE(@ResourceKeys, N'\\', NCHAR(1))),
                N'\ud8', NCHAR(2)), N'\ud9', NCHAR(2)), N'\uda', NCHAR(2)), N'\udb', NCHAR(2)),
                N'\udc', NCHAR(3)), N'\udd', NCHAR(3)), N'\ude', NCHAR(3)), N'\udf', NCHAR(3)) + N'   ';
        IF CHARINDEX(N'\u0000', @Escapes) > 0
            THROW 50134, N'@ResourceKeys: a key must not hold the character U+0000 (\u0000) on this engine.', 1;
        IF PATINDEX(N'%' + NCHAR(2) + N'__[^' + NCHAR(3) + N']%', @Escapes) > 0
           OR PATINDEX(N'%[^' + NCHAR(2) + N']__' + NCHAR(3) + N'%', @Escapes) > 0
            THROW 50134, N'@ResourceKeys: a key must not hold half of a surrogate pair (\ud800 to \udfff alone).', 1;
    END;
    IF EXISTS (SELECT 1 FROM OPENJSON(@ResourceKeys) WHERE [type] <> 1)
        THROW 50134, N'@ResourceKeys must be a JSON array of 1 to 1000 keys (strings).', 1;
    -- The text of each key is read through WITH: Babelfish 4.2's OPENJSON
    -- without WITH trims every quotation mark off the ends of a string's
    -- text, so a key ending in an escaped one ("k\"") loses it, where WITH
    -- keeps the text as written (its escapes decoded below).
    INSERT INTO @Set (ResourceKey)
    SELECT ResourceKey FROM OPENJSON(@ResourceKeys) WITH (ResourceKey nvarchar(4000) '$');

    -- Babelfish 4.2 reads a JSON string with its escapes still in it
    -- ("a\"b" as a\"b), where SQL Server reads it as JSON says: a key holding
    -- a quotation mark, a backslash or a control character, escaped as JSON
    -- must, is then decoded here from the escapes PostgreSQL writes (\" \\
    -- \b \f \n \r \t and \u00XX, lower case, for the other control
    -- characters), as RenewMany decodes them. Each key by itself, with
    -- REPLACE: a key decoded one at a time and then matched by its text
    -- could meet another key's escaped text ("k\\\"" decodes to k\", the
    -- escaped text of k") and be decoded twice. Each escaped backslash first
    -- becomes a backslash followed by NCHAR(1), which PostgreSQL never writes
    -- bare, so that every backslash left before a letter or a quotation mark
    -- begins an escape; then each escape, a fixed text, becomes its
    -- character; then the backslash and NCHAR(1) become one backslash again.
    -- No escape's character is a backslash, so none can form that pair with
    -- what follows it. An engine that reads JSON right is left alone, so a
    -- key's own backslashes are never touched there.
    IF JSON_VALUE(N'{"k":"\\"}', N'$.k') <> N'\'
       AND EXISTS (SELECT 1 FROM @Set WHERE CHARINDEX(N'\', ResourceKey) > 0)
    BEGIN
        UPDATE @Set
           SET ResourceKey = REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(
                                 ResourceKey, N'\\', N'\' + NCHAR(1)), N'\"', N'"'), N'\b', NCHAR(8)), N'\f', NCHAR(12)),
                                 N'\n', NCHAR(10)), N'\r', NCHAR(13)), N'\t', NCHAR(9))
         WHERE CHARINDEX(N'\', ResourceKey) > 0;
        DECLARE @Code int = 1, @Escape nchar(6);
        WHILE @Code < 32 AND EXISTS (SELECT 1 FROM @Set WHERE CHARINDEX(N'\u00', ResourceKey) > 0)
        BEGIN
            SET @Escape = N'\u00' + SUBSTRING(N'0123456789abcdef', @Code / 16 + 1, 1)
                                  + SUBSTRING(N'0123456789abcdef', @Code % 16 + 1, 1);
            UPDATE @Set
               SET ResourceKey = REPLACE(ResourceKey, @Escape, NCHAR(@Code))
             WHERE CHARINDEX(@Escape, ResourceKey) > 0;
            SET @Code += 1;
        END;
        UPDATE @Set
           SET ResourceKey = REPLACE(ResourceKey, N'\' + NCHAR(1), N'\')
         WHERE CHARINDEX(N'\' + NCHAR(1), ResourceKey) > 0;
    END;

    -- Keys are exact identifiers: 1 to 256 UTF-16 code units (what nvarchar(256)
    -- stores; DATALENGTH counts two bytes each), compared binary, and never
    -- ending in a space, which comparisons ignore. Babelfish stores UTF-8, so
    -- there a character outside the BMP is counted twice by hand, for the keys
    -- long enough for it to matter.
    UPDATE @Set
       SET KeyUnits = CASE WHEN SERVERPROPERTY(N'Babelfish') IS NULL THEN DATALENGTH(ResourceKey) / 2
                           ELSE LEN(ResourceKey + N'.') - 1 END;
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL
       AND EXISTS (SELECT 1 FROM @Set WHERE KeyUnits BETWEEN 129 AND 256)
    BEGIN
        -- Each such key's characters outside the BMP counted set-wise: every
        -- position of every key at once (LEN counts characters there, at most 256
        -- for these keys), so the cost is one query, not a round per character.
        UPDATE k
           SET KeyUnits = k.KeyUnits + a.Astral
          FROM @Set AS k
          JOIN (SELECT Long.ResourceKey, COUNT(*) AS Astral
                  FROM (SELECT DISTINCT ResourceKey FROM @Set WHERE KeyUnits BETWEEN 129 AND 256) AS Long
                  JOIN (SELECT Sixteens.n * 16 + Ones.n + 1 AS At
                          FROM (VALUES (0), (1), (2), (3), (4), (5), (6), (7),
                                       (8), (9), (10), (11), (12), (13), (14), (15)) AS Sixteens(n)
                          CROSS JOIN (VALUES (0), (1), (2), (3), (4), (5), (6), (7),
                                             (8), (9), (10), (11), (12), (13), (14), (15)) AS Ones(n)) AS Position
                    ON Position.At <= LEN(Long.ResourceKey + N'.') - 1
                 WHERE UNICODE(SUBSTRING(Long.ResourceKey, Position.At, 1)) > 65535
                 GROUP BY Long.ResourceKey) AS a
            ON a.ResourceKey = k.ResourceKey;
    END;

    DECLARE @Count int = (SELECT COUNT(*) FROM @Set);
    IF @Count NOT BETWEEN 1 AND 1000
        THROW 50134, N'@ResourceKeys must be a JSON array of 1 to 1000 keys (strings).', 1;
    IF EXISTS (SELECT 1 FROM @Set WHERE ResourceKey IS NULL OR KeyUnits NOT BETWEEN 1 AND 256)
        THROW 50134, N'@ResourceKeys: each key must be 1 to 256 UTF-16 code units long.', 1;
    IF EXISTS (SELECT 1 FROM @Set WHERE UNICODE(RIGHT(ResourceKey, 1)) = 32)
        THROW 50134, N'@ResourceKeys: a key must not end with a space: keys are exact identifiers.', 1;
    IF EXISTS (SELECT 1 FROM @Set GROUP BY ResourceKey HAVING COUNT(*) > 1)
        THROW 50134, N'@ResourceKeys: each key may appear once.', 1;
    IF @Owner IS NULL OR @Owner = '00000000-0000-0000-0000-000000000000'
        THROW 50102, N'@Owner must be a non-nil uniqueidentifier, fresh for each acquisition.', 1;
    IF @LeaseSeconds IS NULL OR @LeaseSeconds NOT BETWEEN 1 AND 86400
        THROW 50103, N'@LeaseSeconds must be between 1 and 86400.', 1;

    -- The canonical lock order: binary, as the key column compares.
    UPDATE s
       SET LockOrder = o.LockOrder
      FROM @Set AS s
      JOIN (SELECT ResourceKey, ROW_NUMBER() OVER (ORDER BY ResourceKey) AS LockOrder FROM @Set) AS o
        ON o.ResourceKey = s.ResourceKey;

    DECLARE @Now datetime2(7), @Until datetime2(7), @Key nvarchar(4000), @Locked int = 0, @Found int, @Refused int;

    -- A set one of whose keys a live owner other than this one holds cannot
    -- be granted: it is answered Busy from the committed rows, before any
    -- row is locked, so that a set that cannot succeed never holds a row of
    -- another owner's (who renews, publishes or releases it) while it waits
    -- for a later key's row. Holding nothing, this read may wait: SQL
    -- Server's READ COMMITTED waits for a row another transaction is
    -- changing, bounded as the locks below are; Babelfish reads the last
    -- committed row. A set that passes is judged again under every lock.
    SET LOCK_TIMEOUT 5000;
    SET @Now = SYSUTCDATETIME();
    BEGIN TRY
        UPDATE s
           SET Outcome = CASE
                             WHEN r.ResourceKey IS NULL THEN N'NotProvisioned'
                             WHEN r.Owner <> @Owner AND r.LeaseUntilUtc > @Now THEN N'Busy'
                             ELSE N'Withheld'
                         END,
               LeaseUntil = CASE WHEN r.Owner <> @Owner AND r.LeaseUntilUtc > @Now THEN r.LeaseUntilUtc END
          FROM @Set AS s
          LEFT JOIN fence.Resource AS r ON r.ResourceKey = s.ResourceKey;
    END TRY
    BEGIN CATCH
        IF ERROR_NUMBER() <> 1222
            THROW;
        THROW 50129, N'Waited 5 seconds for a fence row or its table: an open transaction, a deploy or a recovery holds it.', 1;
    END CATCH;
    IF EXISTS (SELECT 1 FROM @Set WHERE Outcome = N'Busy')
    BEGIN
        SELECT CAST(Outcome AS nvarchar(32)) AS Outcome,
               CAST(ResourceKey AS nvarchar(256)) AS ResourceKey,
               CAST(NULL AS bigint) AS Generation,
               LeaseUntil AS LeaseUntilUtc,
               @Now AS ServerUtc
          FROM @Set
         ORDER BY LockOrder;
        RETURN;
    END;
    UPDATE @Set SET Outcome = NULL, LeaseUntil = NULL;

    BEGIN TRANSACTION;

    -- Lock every row, one at a time in key order, before reading the clock: a
    -- call that waited for another session's lock is judged at the moment it
    -- held every row. One statement over all the keys would lock them in
    -- whatever order its plan reads them, and two overlapping sets could then
    -- deadlock. The lock is an update that really changes the row (LockCount,
    -- migration V4), so it lasts until the transaction ends on every engine
    -- (see Acquire). Each row's wait is bounded as Acquire's is; behind a row
    -- another transaction holds, the call grants nothing and raises an error
    -- (SQL Server: 50129; Babelfish: its uncatchable "canceling statement due
    -- to lock timeout"). While it waits, it holds the rows of the keys before
    -- that one, none of them held by a live owner other than this one when
    -- it read them above.
    WHILE @Locked < @Count
    BEGIN
        SET @Locked += 1;
        SELECT @Key = ResourceKey FROM @Set WHERE LockOrder = @Locked;
        -- The row count is taken right after the update, in each branch, as
        -- Acquire takes it: after END CATCH, @@ROWCOUNT is not the update's.
        IF SERVERPROPERTY(N'Babelfish') IS NOT NULL
        BEGIN
            UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @Key;
            SET @Found = @@ROWCOUNT;
        END;
        ELSE
        BEGIN TRY
            UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @Key;
            SET @Found = @@ROWCOUNT;
        END TRY
        BEGIN CATCH
            IF ERROR_NUMBER() <> 1222
                THROW;
            THROW 50129, N'Waited 5 seconds for a fence row or its table: an open transaction, a deploy or a recovery holds it.', 1;
        END CATCH;
        UPDATE @Set SET Found = @Found WHERE LockOrder = @Locked;
    END;
    SET @Now = SYSUTCDATETIME();
    SET @Until = DATEADD(SECOND, @LeaseSeconds, @Now);

    -- Judged under every lock, each key as Acquire judges it.
    UPDATE s
       SET Outcome = CASE
                         WHEN s.Found = 0 THEN N'NotProvisioned'
                         WHEN r.Owner IS NULL OR r.LeaseUntilUtc <= @Now OR r.Owner = @Owner THEN N'Acquired'
                         ELSE N'Busy'
                     END
      FROM @Set AS s
      LEFT JOIN fence.Resource AS r ON r.ResourceKey = s.ResourceKey;
    SET @Refused = (SELECT COUNT(*) FROM @Set WHERE Outcome <> N'Acquired');

    IF @Refused = 0
    BEGIN
        -- A lease that ran out ends its tenure here, when the next one begins.
        INSERT INTO fence.Tenure (ResourceKey, Generation, OwnerHash, AcquiredAtUtc, EndedAtUtc, Ending, Published,
                                  SourceVersion)
        SELECT r.ResourceKey, r.Generation,
               HASHBYTES('SHA2_256', CAST(UPPER(CAST(r.Owner AS char(36))) AS varchar(36))),
               r.AcquiredAtUtc, r.LeaseUntilUtc, N'Expired',
               CASE WHEN r.PublishedGeneration = r.Generation THEN 1 ELSE 0 END,
               CASE WHEN r.PublishedGeneration = r.Generation THEN r.PublishedSourceVersion END
          FROM fence.Resource AS r
          JOIN @Set AS s ON s.ResourceKey = r.ResourceKey
         WHERE r.Owner IS NOT NULL AND r.LeaseUntilUtc <= @Now;

        -- The holder's retry: same generation, a longer lease.
        UPDATE r
           SET LeaseUntilUtc = @Until
          FROM fence.Resource AS r
          JOIN @Set AS s ON s.ResourceKey = r.ResourceKey
         WHERE r.Owner = @Owner AND r.LeaseUntilUtc > @Now;

        UPDATE r
           SET Generation    = r.Generation + 1,
               Owner         = @Owner,
               LeaseUntilUtc = @Until,
               AcquiredAtUtc = @Now
          FROM fence.Resource AS r
          JOIN @Set AS s ON s.ResourceKey = r.ResourceKey
         WHERE r.Owner IS NULL OR r.LeaseUntilUtc <= @Now;
    END;
    ELSE
        UPDATE @Set SET Outcome = N'Withheld' WHERE Outcome = N'Acquired';

    -- Read back under the same locks: exact on every engine, unlike OUTPUT
    -- under concurrent updates.
    UPDATE s
       SET Generation = CASE WHEN s.Outcome = N'Acquired' THEN r.Generation END,
           LeaseUntil = CASE WHEN s.Outcome = N'Acquired' THEN @Until
                             WHEN s.Outcome = N'Busy' THEN r.LeaseUntilUtc END
      FROM @Set AS s
      JOIN fence.Resource AS r ON r.ResourceKey = s.ResourceKey;

    COMMIT TRANSACTION;

    SELECT CAST(Outcome AS nvarchar(32)) AS Outcome,
           CAST(ResourceKey AS nvarchar(256)) AS ResourceKey,
           Generation,
           LeaseUntil AS LeaseUntilUtc,
           @Now AS ServerUtc
      FROM @Set
     ORDER BY LockOrder;
END;
