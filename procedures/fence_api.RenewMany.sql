-- Extends many live leases in one call (contract v1.7): a client holding
-- thousands of leases renews those due together instead of one call each.
-- Each lease is judged as Renew judges one: its row is locked before the
-- clock is read, a lease that has expired is never revived, even when nobody
-- took over, and each answers Renewed or Lost on its own.
--
-- @Leases is a JSON array of objects, one per lease:
--   [{"ResourceKey": "report:daily", "Owner": "6F9619FF-8B86-D011-B42D-00C04FC964FF",
--     "Generation": 7, "LeaseSeconds": 30}, ...]
-- T-SQL passes no table to a procedure from most drivers, and JSON is read
-- set-wise on every engine (OPENJSON, SQL Server 2016 on, compatibility level
-- 130 on).
CREATE PROCEDURE fence_api.RenewMany
    @Leases nvarchar(max)
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

    -- The leases, each key compared binary as the fence row's key is. Each
    -- value is read as text and checked before it is converted: a value of
    -- the wrong type must be refused with this contract's error on every
    -- engine, and Babelfish raises a conversion error inside OPENJSON past
    -- any CATCH.
    DECLARE @Lease TABLE
    (
        ResourceKey      nvarchar(4000) COLLATE Latin1_General_100_BIN2 NULL,
        OwnerText        nvarchar(100) NULL,
        GenerationText   nvarchar(100) NULL,
        LeaseSecondsText nvarchar(100) NULL,
        Owner            uniqueidentifier NULL,
        Generation       bigint NULL,
        LeaseSeconds     int NULL,
        KeyUnits         int NULL,
        Outcome          nvarchar(32) NULL,
        LeaseUntil       datetime2(7) NULL
    );

    -- JSON may begin with any of its four whitespace characters.
    DECLARE @Blank nvarchar(10) = N'%[^ ' + NCHAR(9) + NCHAR(10) + NCHAR(13) + N']%';
    IF @Leases IS NULL OR ISJSON(@Leases) = 0 OR SUBSTRING(@Leases, PATINDEX(@Blank, @Leases), 1) <> N'['
        THROW 50133, N'@Leases must be a JSON array of 1 to 1000 objects {"ResourceKey", "Owner", "Generation", "LeaseSeconds"}.', 1;

    -- Babelfish reads JSON as PostgreSQL does, which holds no NUL character
    -- and no half of a surrogate pair: OPENJSON fails with an error of its
    -- own on \u0000 or a lone \ud800-\udfff, and no key holding one can
    -- exist there. Refused first, with this contract's error. An escaped
    -- backslash (\\) never starts an escape, so those pairs are set aside
    -- before looking; an escaped pair of surrogates is read as one character.
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
            THROW 50133, N'@Leases: a ResourceKey must not hold the character U+0000 (\u0000) on this engine.', 1;
        IF PATINDEX(N'%' + NCHAR(2) + N'__[^' + NCHAR(3) + N']%', @Escapes) > 0
           OR PATINDEX(N'%[^' + NCHAR(2) + N']__' + NCHAR(3) + N'%', @Escapes) > 0
            THROW 50133, N'@Leases: a ResourceKey must not hold half of a surrogate pair (\ud800 to \udfff alone).', 1;
    END;

    -- Babelfish reads a JSON number into its value, so 1e1 arrives as 10,
    -- which SQL Server reads as written and refuses below. A number with an
    -- exponent is found in the text itself, outside the strings only, so
    -- that a key such as ":1e5" is never taken for one: with \\ and \"
    -- taken out, every quotation mark left begins or ends a string, and the
    -- text split at them alternates between outside (even pieces, counted
    -- from 0) and inside a string. The pieces are numbered by reading them
    -- as a JSON array of strings (this engine's STRING_SPLIT numbers
    -- nothing): the backslashes and the whitespace that JSON's strings
    -- cannot hold as they are taken out first. The piece before a number
    -- is the name of its property.
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL AND PATINDEX(N'%[0-9][eE][-+0-9]%', @Leases) > 0
    BEGIN
        DECLARE @Piece TABLE (Ordinal int PRIMARY KEY, Piece nvarchar(max) NULL);
        INSERT INTO @Piece (Ordinal, Piece)
        SELECT CAST([key] AS int), [value]
          FROM OPENJSON(N'["' + REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(
                   @Leases, N'\\', N''), N'\"', N''), N'\', N''), NCHAR(9), N' '), NCHAR(10), N' '), NCHAR(13), N' '),
                   N'"', N'","') + N'"]');
        DECLARE @ExponentOf nvarchar(max) =
            (SELECT TOP (1) COALESCE(Name.Piece, N'')
               FROM @Piece AS Number
               LEFT JOIN @Piece AS Name ON Name.Ordinal = Number.Ordinal - 1
              WHERE Number.Ordinal % 2 = 0 AND PATINDEX(N'%[0-9][eE][-+0-9]%', Number.Piece) > 0);
        IF @ExponentOf = N'LeaseSeconds'
            THROW 50133, N'@Leases: each LeaseSeconds must be between 1 and 86400.', 1;
        IF @ExponentOf IS NOT NULL
            THROW 50133, N'@Leases: each Generation must be a generation returned by Acquire (1 or more).', 1;
    END;

    -- Each item an object (type 5): Babelfish reads $.ResourceKey through an
    -- array that holds one ([[{...}]]), where SQL Server reads nothing.
    IF EXISTS (SELECT 1 FROM OPENJSON(@Leases) WHERE [type] <> 5)
        THROW 50133, N'@Leases must be a JSON array of 1 to 1000 objects {"ResourceKey", "Owner", "Generation", "LeaseSeconds"}.', 1;

    INSERT INTO @Lease (ResourceKey, OwnerText, GenerationText, LeaseSecondsText)
    SELECT ResourceKey, Owner, Generation, LeaseSeconds
      FROM OPENJSON(@Leases)
           WITH (ResourceKey  nvarchar(4000) '$.ResourceKey',
                 Owner        nvarchar(100)  '$.Owner',
                 Generation   nvarchar(100)  '$.Generation',
                 LeaseSeconds nvarchar(100)  '$.LeaseSeconds');

    -- Babelfish 4.2 reads a JSON string with its escapes still in it
    -- ("a\"b" as a\"b), where SQL Server reads it as JSON says: a key holding
    -- a quotation mark, a backslash or a control character, escaped as JSON
    -- must, is then decoded here from the escapes PostgreSQL writes (\" \\
    -- \b \f \n \r \t and \u00XX, lower case, for the other control
    -- characters). Set-wise, with REPLACE: each escaped backslash first
    -- becomes a backslash followed by NCHAR(1), which PostgreSQL never writes
    -- bare, so that every backslash left before a letter or a quotation mark
    -- begins an escape; then each escape, a fixed text, becomes its
    -- character; then the backslash and NCHAR(1) become one backslash again.
    -- No escape's character is a backslash, so none can form that pair with
    -- what follows it. An engine that reads JSON right is left alone, so a
    -- key's own backslashes are never touched there.
    IF JSON_VALUE(N'{"k":"\\"}', N'$.k') <> N'\'
       AND EXISTS (SELECT 1 FROM @Lease WHERE CHARINDEX(N'\', ResourceKey) > 0)
    BEGIN
        UPDATE @Lease
           SET ResourceKey = REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(
                                 ResourceKey, N'\\', N'\' + NCHAR(1)), N'\"', N'"'), N'\b', NCHAR(8)), N'\f', NCHAR(12)),
                                 N'\n', NCHAR(10)), N'\r', NCHAR(13)), N'\t', NCHAR(9))
         WHERE CHARINDEX(N'\', ResourceKey) > 0;
        DECLARE @Code int = 1, @Escape nchar(6);
        WHILE @Code < 32 AND EXISTS (SELECT 1 FROM @Lease WHERE CHARINDEX(N'\u00', ResourceKey) > 0)
        BEGIN
            SET @Escape = N'\u00' + SUBSTRING(N'0123456789abcdef', @Code / 16 + 1, 1)
                                  + SUBSTRING(N'0123456789abcdef', @Code % 16 + 1, 1);
            UPDATE @Lease
               SET ResourceKey = REPLACE(ResourceKey, @Escape, NCHAR(@Code))
             WHERE CHARINDEX(@Escape, ResourceKey) > 0;
            SET @Code += 1;
        END;
        UPDATE @Lease
           SET ResourceKey = REPLACE(ResourceKey, N'\' + NCHAR(1), N'\')
         WHERE CHARINDEX(N'\' + NCHAR(1), ResourceKey) > 0;
    END;

    -- Keys are exact identifiers: 1 to 256 UTF-16 code units (what nvarchar(256)
    -- stores; DATALENGTH counts two bytes each), compared binary, and never
    -- ending in a space, which comparisons ignore. Babelfish stores UTF-8, so
    -- there a character outside the BMP is counted twice, for the keys long
    -- enough for it to matter.
    UPDATE @Lease
       SET KeyUnits = CASE WHEN SERVERPROPERTY(N'Babelfish') IS NULL THEN DATALENGTH(ResourceKey) / 2
                           ELSE LEN(ResourceKey + N'.') - 1 END;
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL
       AND EXISTS (SELECT 1 FROM @Lease WHERE KeyUnits BETWEEN 129 AND 256)
    BEGIN
        -- Each such key's characters outside the BMP counted set-wise: every
        -- position of every key at once (LEN counts characters there, at most 256
        -- for these keys), so the cost is one query, not a round per character.
        UPDATE k
           SET KeyUnits = k.KeyUnits + a.Astral
          FROM @Lease AS k
          JOIN (SELECT Long.ResourceKey, COUNT(*) AS Astral
                  FROM (SELECT DISTINCT ResourceKey FROM @Lease WHERE KeyUnits BETWEEN 129 AND 256) AS Long
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

    DECLARE @Count int = (SELECT COUNT(*) FROM @Lease);
    IF @Count NOT BETWEEN 1 AND 1000
        THROW 50133, N'@Leases must be a JSON array of 1 to 1000 objects {"ResourceKey", "Owner", "Generation", "LeaseSeconds"}.', 1;
    IF EXISTS (SELECT 1 FROM @Lease WHERE ResourceKey IS NULL OR KeyUnits NOT BETWEEN 1 AND 256)
        THROW 50133, N'@Leases: each ResourceKey must be 1 to 256 UTF-16 code units long.', 1;
    IF EXISTS (SELECT 1 FROM @Lease WHERE UNICODE(RIGHT(ResourceKey, 1)) = 32)
        THROW 50133, N'@Leases: a ResourceKey must not end with a space: keys are exact identifiers.', 1;
    IF EXISTS (SELECT 1 FROM @Lease GROUP BY ResourceKey HAVING COUNT(*) > 1)
        THROW 50133, N'@Leases: each ResourceKey may appear once.', 1;
    DECLARE @Hex nvarchar(20) = N'[0-9A-Fa-f]';
    DECLARE @Uuid nvarchar(400) = REPLICATE(@Hex, 8) + N'-' + REPLICATE(@Hex, 4) + N'-' + REPLICATE(@Hex, 4) + N'-'
                                  + REPLICATE(@Hex, 4) + N'-' + REPLICATE(@Hex, 12);
    IF EXISTS (SELECT 1 FROM @Lease WHERE OwnerText IS NULL OR OwnerText NOT LIKE @Uuid
                                       OR OwnerText = N'00000000-0000-0000-0000-000000000000')
        THROW 50133, N'@Leases: each Owner must be a non-nil uniqueidentifier (36 characters), fresh for each acquisition.', 1;
    -- Up to the largest bigint: 19 digits, the longest compared as text
    -- (binary, digit by digit), so that no conversion can overflow.
    IF EXISTS (SELECT 1 FROM @Lease WHERE GenerationText IS NULL OR GenerationText LIKE N'%[^0-9]%'
                                       OR LEN(GenerationText) NOT BETWEEN 1 AND 19 OR GenerationText NOT LIKE N'%[1-9]%'
                                       OR (LEN(GenerationText) = 19
                                           AND GenerationText COLLATE Latin1_General_100_BIN2 > N'9223372036854775807'))
        THROW 50133, N'@Leases: each Generation must be a generation returned by Acquire (1 or more).', 1;
    IF EXISTS (SELECT 1 FROM @Lease WHERE LeaseSecondsText IS NULL OR LeaseSecondsText LIKE N'%[^0-9]%'
                                       OR LEN(LeaseSecondsText) NOT BETWEEN 1 AND 5)
        THROW 50133, N'@Leases: each LeaseSeconds must be between 1 and 86400.', 1;
    -- Converted only once every value is known to be digits: nothing
    -- promises the checks above are evaluated before a conversion beside them.
    UPDATE @Lease
       SET Owner = CAST(OwnerText AS uniqueidentifier),
           Generation = CAST(GenerationText AS bigint),
           LeaseSeconds = CAST(LeaseSecondsText AS int);
    IF EXISTS (SELECT 1 FROM @Lease WHERE LeaseSeconds NOT BETWEEN 1 AND 86400)
        THROW 50133, N'@Leases: each LeaseSeconds must be between 1 and 86400.', 1;

    DECLARE @Now datetime2(7);

    BEGIN TRANSACTION;

    -- Lock every listed row before reading the clock, as Renew does: a call
    -- that waited for another session's lock is judged at the moment it held
    -- every row, not when it was sent. The lock is an update that really
    -- changes the row (LockCount, migration V4), so it lasts until the
    -- transaction ends on every engine (see Renew).
    --
    -- The wait is bounded: one row that another session's transaction holds
    -- must not hold up the renewal of every other lease of the call. Behind
    -- it the call renews nothing and raises an error (SQL Server: 50129;
    -- Babelfish: its uncatchable "canceling statement due to lock timeout"),
    -- and the caller renews those leases in smaller calls or one by one.
    --
    -- Each statement that joins the fence table seeks it by key (FORCESEEK):
    -- for a large call SQL Server may otherwise estimate a scan cheaper, and
    -- a scan under UPDATE takes update locks on every row it reads, so it
    -- would wait on rows of other clients' leases no key of the call names.
    -- Babelfish 4.2 accepts the hint and, with babelfishpg_tsql.enable_pg_hint
    -- off (its default), ignores it; PostgreSQL's planner chooses the plan.
    SET LOCK_TIMEOUT 1000;
    IF SERVERPROPERTY(N'Babelfish') IS NOT NULL
        UPDATE r
           SET LockCount = r.LockCount + 1
          FROM fence.Resource AS r WITH (FORCESEEK)
          JOIN @Lease AS l ON l.ResourceKey = r.ResourceKey;
    ELSE
    BEGIN TRY
        UPDATE r
           SET LockCount = r.LockCount + 1
          FROM fence.Resource AS r WITH (FORCESEEK)
          JOIN @Lease AS l ON l.ResourceKey = r.ResourceKey;
    END TRY
    BEGIN CATCH
        IF ERROR_NUMBER() <> 1222
            THROW;
        THROW 50129, N'Waited 1 second for a fence row or its table: an open transaction, a deploy or a recovery holds it.', 1;
    END CATCH;
    SET @Now = SYSUTCDATETIME();

    UPDATE r
       SET LeaseUntilUtc = DATEADD(SECOND, l.LeaseSeconds, @Now)
      FROM fence.Resource AS r WITH (FORCESEEK)
      JOIN @Lease AS l ON l.ResourceKey = r.ResourceKey
     WHERE r.Owner = l.Owner
       AND r.Generation = l.Generation
       AND r.LeaseUntilUtc > @Now;

    -- Read back under the same locks: a renewed row ends exactly its length
    -- after @Now, which a lease that was not renewed (it ended at or before
    -- @Now) cannot.
    UPDATE l
       SET Outcome    = N'Renewed',
           LeaseUntil = r.LeaseUntilUtc
      FROM @Lease AS l
      JOIN fence.Resource AS r WITH (FORCESEEK) ON r.ResourceKey = l.ResourceKey
     WHERE r.Owner = l.Owner
       AND r.Generation = l.Generation
       AND r.LeaseUntilUtc = DATEADD(SECOND, l.LeaseSeconds, @Now);

    COMMIT TRANSACTION;

    SELECT CAST(COALESCE(Outcome, N'Lost') AS nvarchar(32)) AS Outcome,
           CAST(ResourceKey AS nvarchar(256)) AS ResourceKey,
           LeaseUntil AS LeaseUntilUtc
      FROM @Lease
     ORDER BY ResourceKey;
END;
