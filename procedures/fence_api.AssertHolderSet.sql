-- Fences the caller's own tables by a whole lease set (contract v1.8):
-- AssertHolder for every key, in the caller's transaction. Every fence row
-- is locked, one at a time in key order (see AcquireSet), until that
-- transaction ends, and then each lease is judged on the server clock; the
-- first key (in key order) the owner does not hold throws 50110, 50111 or
-- 50112 naming it, which (XACT_ABORT) rolls back everything the transaction
-- wrote.
--
-- @Leases is a JSON array of objects, one per key of the set:
--   [{"ResourceKey": "report:a", "Generation": 7}, ...]
-- read as RenewMany reads its leases.
CREATE PROCEDURE fence_api.AssertHolderSet
    @Leases nvarchar(max),
    @Owner  uniqueidentifier
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

    -- A check without a lock held until the caller commits proves nothing
    -- (see AssertHolder): in implicit-transaction mode the first UPDATE below
    -- opens the transaction that holds the locks until the caller commits.
    IF @@TRANCOUNT = 0 AND (@@OPTIONS & 2) = 0
        THROW 50113, N'AssertHolderSet must run inside the caller''s transaction (BEGIN TRANSACTION first).', 1;

    -- The leases, each key compared binary as the fence row's key is. Each
    -- value is read as text and checked before it is converted: a value of
    -- the wrong type must be refused with this contract's error on every
    -- engine, and Babelfish raises a conversion error inside OPENJSON past
    -- any CATCH.
    DECLARE @Set TABLE
    (
        ResourceKey    nvarchar(4000) COLLATE Latin1_General_100_BIN2 NULL,
        GenerationText nvarchar(100) NULL,
        Generation     bigint NULL,
        KeyUnits       int NULL,
        LockOrder      int NULL,
        Found          int NULL,
        Outcome        nvarchar(32) NULL,
        LeaseUntil     datetime2(7) NULL
    );

    -- JSON may begin with any of its four whitespace characters.
    DECLARE @Blank nvarchar(10) = N'%[^ ' + NCHAR(9) + NCHAR(10) + NCHAR(13) + N']%';
    DECLARE @Shape nvarchar(200) = N'@Leases must be a JSON array of 1 to 1000 objects {"ResourceKey", "Generation"}.';
    IF @Leases IS NULL OR ISJSON(@Leases) = 0 OR SUBSTRING(@Leases, PATINDEX(@Blank, @Leases), 1) <> N'['
        THROW 50135, @Shape, 1;

    -- Babelfish reads JSON as PostgreSQL does, which holds no NUL character
    -- and no half of a surrogate pair: OPENJSON fails with an error of its
    -- own on \u0000 or a lone \ud800-\udfff, and no key holding one can
    -- exist there. Refused first, with this contract's error (as RenewMany
    -- refuses them). An escaped backslash (\\) never starts an escape, so
    -- those pairs are set aside before looking; an escaped pair of
    -- surrogates is read as one character.
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL AND CHARINDEX(N'\u', @Leases) > 0
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
                LOWER(REPLACE(@Leases, N'\\', NCHAR(1))),
                N'\ud8', NCHAR(2)), N'\ud9', NCHAR(2)), N'\uda', NCHAR(2)), N'\udb', NCHAR(2)),
                N'\udc', NCHAR(3)), N'\udd', NCHAR(3)), N'\ude', NCHAR(3)), N'\udf', NCHAR(3)) + N'   ';
        IF CHARINDEX(N'\u0000', @Escapes) > 0
            THROW 50135, N'@Leases: a ResourceKey must not hold the character U+0000 (\u0000) on this engine.', 1;
        IF PATINDEX(N'%' + NCHAR(2) + N'__[^' + NCHAR(3) + N']%', @Escapes) > 0
           OR PATINDEX(N'%[^' + NCHAR(2) + N']__' + NCHAR(3) + N'%', @Escapes) > 0
            THROW 50135, N'@Leases: a ResourceKey must not hold half of a surrogate pair (\ud800 to \udfff alone).', 1;
    END;

    -- Babelfish reads a JSON number into its value, so 1e1 arrives as 10,
    -- which SQL Server reads as written and refuses below. A number with an
    -- exponent is found in the text itself, as RenewMany finds it: outside
    -- the strings, where the text between two quotation marks holds only
    -- JSON's punctuation, whitespace, and a number's characters. (\\ and \"
    -- are taken out first, so every quotation mark left begins or ends a
    -- string.) Text inside a string made of those characters alone,
    -- beginning with a colon and holding such a number, cannot be told from
    -- it: such a key or payload is refused too.
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL AND PATINDEX(N'%[0-9][eE][-+0-9]%', @Leases) > 0
       AND EXISTS (SELECT 1
                     FROM STRING_SPLIT(REPLACE(REPLACE(@Leases, N'\\', N''), N'\"', N''), N'"')
                    WHERE value LIKE N'%:%[0-9][eE][-+0-9]%'
                      -- PATINDEX, not NOT LIKE: Babelfish 4.2 answers this
                      -- negated class wrongly in NOT LIKE.
                      AND PATINDEX(N'%[^ ' + NCHAR(9) + NCHAR(10) + NCHAR(13) + N':,{}0-9.eE+-]%',
                                   REPLACE(REPLACE(value, N'[', N''), N']', N'')) = 0)
        THROW 50135, N'@Leases: each Generation must be a generation returned by Acquire (1 or more).', 1;

    -- Each item an object, and each value of the JSON type it must be, by
    -- OPENJSON's own type column, before anything reads a value as text:
    -- read as text, 5, true and 12.50 would pass for strings, and Babelfish
    -- would read an array of arrays as their items. (Each item is known to
    -- be an object before its fields are opened.)
    IF EXISTS (SELECT 1 FROM OPENJSON(@Leases) WHERE [type] <> 5)
        THROW 50135, @Shape, 1;
    IF EXISTS (SELECT 1
                 FROM OPENJSON(@Leases) AS item
                CROSS APPLY OPENJSON(item.[value]) AS field
                WHERE (field.[key] IN (N'ResourceKey') AND field.[type] <> 1)
                   OR (field.[key] = N'Generation' AND field.[type] NOT IN (1, 2)))
        THROW 50135, N'@Leases: each ResourceKey must be a JSON string, and each Generation a JSON number or a string of digits.', 1;
    INSERT INTO @Set (ResourceKey, GenerationText)
    SELECT ResourceKey, Generation
      FROM OPENJSON(@Leases)
           WITH (ResourceKey nvarchar(4000) '$.ResourceKey',
                 Generation  nvarchar(100)  '$.Generation');

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
        THROW 50135, N'@Leases must be a JSON array of 1 to 1000 objects {"ResourceKey", "Generation"}.', 1;
    IF EXISTS (SELECT 1 FROM @Set WHERE ResourceKey IS NULL OR KeyUnits NOT BETWEEN 1 AND 256)
        THROW 50135, N'@Leases: each ResourceKey must be 1 to 256 UTF-16 code units long.', 1;
    IF EXISTS (SELECT 1 FROM @Set WHERE UNICODE(RIGHT(ResourceKey, 1)) = 32)
        THROW 50135, N'@Leases: a ResourceKey must not end with a space: keys are exact identifiers.', 1;
    IF EXISTS (SELECT 1 FROM @Set GROUP BY ResourceKey HAVING COUNT(*) > 1)
        THROW 50135, N'@Leases: each ResourceKey may appear once.', 1;
    IF EXISTS (SELECT 1 FROM @Set WHERE GenerationText IS NULL OR GenerationText LIKE N'%[^0-9]%'
                                     OR LEN(GenerationText) NOT BETWEEN 1 AND 19 OR GenerationText NOT LIKE N'%[1-9]%'
                                     -- 19 digits up to bigint's largest: Recover's floor reaches 2^62.
                                     OR (LEN(GenerationText) = 19 AND GenerationText COLLATE Latin1_General_100_BIN2 > N'9223372036854775807'))
        THROW 50135, N'@Leases: each Generation must be a generation returned by Acquire (1 or more).', 1;
    IF @Owner IS NULL OR @Owner = '00000000-0000-0000-0000-000000000000'
        THROW 50102, N'@Owner must be a non-nil uniqueidentifier, fresh for each acquisition.', 1;
    -- Converted only once every value is known to be digits: nothing
    -- promises the checks above are evaluated before a conversion beside them.
    UPDATE @Set SET Generation = CAST(GenerationText AS bigint);

    -- The canonical lock order: binary, as the key column compares.
    UPDATE s
       SET LockOrder = o.LockOrder
      FROM @Set AS s
      JOIN (SELECT ResourceKey, ROW_NUMBER() OVER (ORDER BY ResourceKey) AS LockOrder FROM @Set) AS o
        ON o.ResourceKey = s.ResourceKey;

    DECLARE @Now datetime2(7), @Key nvarchar(4000), @Locked int = 0, @Refusal int, @Message nvarchar(2048);

    -- Lock every row, one at a time in key order, before reading the clock: a
    -- call that waited for another session's lock is judged at the moment it
    -- held every row, and two set calls that overlap take their common keys
    -- in the same order, so they never deadlock (see AcquireSet). The lock is
    -- an update that really changes the row (LockCount, migration V4), so it
    -- lasts until the transaction ends on every engine (see Renew).
    WHILE @Locked < @Count
    BEGIN
        SET @Locked += 1;
        SELECT @Key = ResourceKey FROM @Set WHERE LockOrder = @Locked;
        UPDATE fence.Resource SET LockCount = LockCount + 1 WHERE ResourceKey = @Key;
        UPDATE @Set SET Found = @@ROWCOUNT WHERE LockOrder = @Locked;
    END;
    SET @Now = SYSUTCDATETIME();

    UPDATE s
       SET Outcome = CASE
                         WHEN s.Found = 0 THEN N'NotProvisioned'
                         WHEN r.Generation <> s.Generation OR (r.Owner IS NOT NULL AND r.Owner <> @Owner)
                             THEN N'Superseded'
                         WHEN r.Owner IS NULL OR r.LeaseUntilUtc <= @Now THEN N'Expired'
                         ELSE N'Holding'
                     END,
           LeaseUntil = r.LeaseUntilUtc
      FROM @Set AS s
      LEFT JOIN fence.Resource AS r ON r.ResourceKey = s.ResourceKey;
    UPDATE @Set SET Outcome = N'NotProvisioned' WHERE Outcome IS NULL;

    SELECT TOP (1) @Key = ResourceKey,
                   @Refusal = CASE Outcome WHEN N'NotProvisioned' THEN 50112 WHEN N'Superseded' THEN 50110
                                           ELSE 50111 END
      FROM @Set
     WHERE Outcome <> N'Holding'
     ORDER BY LockOrder;
    IF @Refusal = 50112
    BEGIN
        SET @Message = CONCAT(N'@Leases: the key "', @Key, N'" is not provisioned.');
        THROW 50112, @Message, 1;
    END;
    IF @Refusal = 50110
    BEGIN
        SET @Message = CONCAT(N'@Leases: the lease on "', @Key,
                              N'" was superseded: another owner or a newer generation is current.');
        THROW 50110, @Message, 1;
    END;
    IF @Refusal = 50111
    BEGIN
        SET @Message = CONCAT(N'@Leases: the lease on "', @Key,
                              N'" expired or was released, and nobody has taken over.');
        THROW 50111, @Message, 1;
    END;

    SELECT CAST(Outcome AS nvarchar(32)) AS Outcome,
           CAST(ResourceKey AS nvarchar(256)) AS ResourceKey,
           Generation,
           LeaseUntil AS LeaseUntilUtc
      FROM @Set
     ORDER BY LockOrder;
END;
