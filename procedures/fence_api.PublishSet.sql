-- Publishes a result under every lease of a set at once (contract v1.8),
-- all or nothing: each key's payload is written under its own generation
-- and operation id, each judged as Publish judges one, and one refusal
-- refuses all, every key's row saying why. An item whose operation id was
-- already committed, to its key and generation, is a replay: it answers
-- AlreadyPublished and is not judged again. With @Release = 1 an accepted
-- publish also gives every lease back, in the same transaction: each key
-- it published, and, when it published any, each replayed key this owner
-- still holds.
--
-- @Leases is a JSON array of objects, one per key of the set:
--   [{"ResourceKey": "report:a", "Generation": 7,
--     "OperationId": "6F9619FF-8B86-D011-B42D-00C04FC964FF", "Payload": "..."}, ...]
-- read as RenewMany reads its leases.
CREATE PROCEDURE fence_api.PublishSet
    @Leases  nvarchar(max),
    @Owner   uniqueidentifier,
    @Release bit = 0
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
    DECLARE @Set TABLE
    (
        ResourceKey    nvarchar(4000) COLLATE Latin1_General_100_BIN2 NULL,
        GenerationText nvarchar(100) NULL,
        Generation     bigint NULL,
        KeyUnits       int NULL,
        LockOrder      int NULL,
        Found          int NULL,
        Outcome        nvarchar(32) NULL,
        OperationIdText nvarchar(100) NULL,
        OperationId    uniqueidentifier NULL,
        Payload        nvarchar(max) NULL
    );

    -- JSON may begin with any of its four whitespace characters.
    DECLARE @Blank nvarchar(10) = N'%[^ ' + NCHAR(9) + NCHAR(10) + NCHAR(13) + N']%';
    DECLARE @Shape nvarchar(200) = N'@Leases must be a JSON array of 1 to 1000 objects {"ResourceKey", "Generation", "OperationId", "Payload"}.';
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
            THROW 50135, N'@Leases: a ResourceKey or Payload must not hold the character U+0000 (\u0000) on this engine.', 1;
        IF PATINDEX(N'%' + NCHAR(2) + N'__[^' + NCHAR(3) + N']%', @Escapes) > 0
           OR PATINDEX(N'%[^' + NCHAR(2) + N']__' + NCHAR(3) + N'%', @Escapes) > 0
            THROW 50135, N'@Leases: a ResourceKey or Payload must not hold half of a surrogate pair (\ud800 to \udfff alone).', 1;
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
                WHERE (field.[key] IN (N'ResourceKey', N'OperationId', N'Payload') AND field.[type] <> 1)
                   OR (field.[key] = N'Generation' AND field.[type] NOT IN (1, 2)))
        THROW 50135, N'@Leases: each ResourceKey, OperationId and Payload must be a JSON string, and each Generation a JSON number or a string of digits.', 1;
    INSERT INTO @Set (ResourceKey, GenerationText, OperationIdText, Payload)
    SELECT ResourceKey, Generation, OperationId, Payload
      FROM OPENJSON(@Leases)
           WITH (ResourceKey nvarchar(4000) '$.ResourceKey',
                 Generation  nvarchar(100)  '$.Generation',
                 OperationId nvarchar(100)  '$.OperationId',
                 Payload     nvarchar(max)  '$.Payload');

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
        THROW 50135, N'@Leases must be a JSON array of 1 to 1000 objects {"ResourceKey", "Generation", "OperationId", "Payload"}.', 1;
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
    DECLARE @Hex nvarchar(20) = N'[0-9A-Fa-f]';
    DECLARE @Uuid nvarchar(400) = REPLICATE(@Hex, 8) + N'-' + REPLICATE(@Hex, 4) + N'-' + REPLICATE(@Hex, 4) + N'-'
                                  + REPLICATE(@Hex, 4) + N'-' + REPLICATE(@Hex, 12);
    IF EXISTS (SELECT 1 FROM @Set WHERE OperationIdText IS NULL OR OperationIdText NOT LIKE @Uuid
                                     OR OperationIdText = N'00000000-0000-0000-0000-000000000000')
        THROW 50135, N'@Leases: each OperationId must be a non-nil uniqueidentifier (36 characters), fresh for each publish and reused only to replay it.', 1;
    UPDATE @Set SET OperationId = CAST(OperationIdText AS uniqueidentifier);
    IF EXISTS (SELECT 1 FROM @Set GROUP BY OperationId HAVING COUNT(*) > 1)
        THROW 50135, N'@Leases: each OperationId may appear once.', 1;
    IF EXISTS (SELECT 1 FROM @Set WHERE Payload IS NULL)
        THROW 50135, N'@Leases: each Payload must be a JSON string (an empty string is allowed).', 1;
    IF @Release IS NULL
        THROW 50108, N'@Release must be 0 (keep the leases) or 1 (release them with an accepted publish).', 1;

    -- A payload is decoded from the escapes Babelfish keeps, as a key is
    -- (above), jumping from one backslash to the next: a payload may be long.
    IF JSON_VALUE(N'{"k":"\\"}', N'$.k') <> N'\'
       AND EXISTS (SELECT 1 FROM @Set WHERE CHARINDEX(N'\', Payload) > 0)
    BEGIN
        DECLARE @PayloadEscape nchar(1), @PayloadCode int, @Text nvarchar(max), @Plain nvarchar(max), @From bigint, @Slash bigint, @Item nvarchar(4000);
        DECLARE @Pending TABLE (ResourceKey nvarchar(4000) COLLATE Latin1_General_100_BIN2 NOT NULL);
        INSERT INTO @Pending (ResourceKey) SELECT ResourceKey FROM @Set WHERE CHARINDEX(N'\', Payload) > 0;
        WHILE EXISTS (SELECT 1 FROM @Pending)
        BEGIN
            SELECT TOP (1) @Item = ResourceKey FROM @Pending;
            SELECT @Text = Payload FROM @Set WHERE ResourceKey = @Item;
            SELECT @Plain = N'', @From = 1, @Slash = CHARINDEX(N'\', @Text);
            WHILE @Slash > 0
            BEGIN
                SET @PayloadEscape = SUBSTRING(@Text, @Slash + 1, 1);
                SET @PayloadCode = 16 * (CHARINDEX(SUBSTRING(@Text, @Slash + 4, 1), N'0123456789abcdef') - 1)
                            + CHARINDEX(SUBSTRING(@Text, @Slash + 5, 1), N'0123456789abcdef') - 1;
                SET @Plain += SUBSTRING(@Text, @From, @Slash - @From)
                              + CASE @PayloadEscape
                                    WHEN N'b' THEN NCHAR(8)
                                    WHEN N'f' THEN NCHAR(12)
                                    WHEN N'n' THEN NCHAR(10)
                                    WHEN N'r' THEN NCHAR(13)
                                    WHEN N't' THEN NCHAR(9)
                                    WHEN N'u' THEN NCHAR(@PayloadCode)
                                    ELSE @PayloadEscape
                                END;
                SET @From = @Slash + CASE @PayloadEscape WHEN N'u' THEN 6 ELSE 2 END;
                SET @Slash = CHARINDEX(N'\', @Text, @From);
            END;
            SET @Plain += SUBSTRING(@Text, @From, 2147483647);
            UPDATE @Set SET Payload = @Plain WHERE ResourceKey = @Item;
            DELETE FROM @Pending WHERE ResourceKey = @Item;
        END;
    END;
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

    DECLARE @Now datetime2(7), @Key nvarchar(4000), @Locked int = 0, @Refused int, @Message nvarchar(2048);

    BEGIN TRANSACTION;

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

    -- Decided under the locks: an operation id already used elsewhere is an
    -- error, one used here is a replay.
    SET @Key = NULL;
    SELECT TOP (1) @Key = s.ResourceKey
      FROM @Set AS s
      JOIN fence.PublishedOperation AS p ON p.OperationId = s.OperationId
     WHERE p.ResourceKey <> s.ResourceKey OR p.Generation <> s.Generation
     ORDER BY s.LockOrder;
    IF @Key IS NOT NULL
    BEGIN
        SET @Message = CONCAT(N'@Leases: the OperationId for "', @Key,
                              N'" was already used by a publish to another resource or generation.');
        THROW 50107, @Message, 1;
    END;
    UPDATE s
       SET Outcome = N'AlreadyPublished'
      FROM @Set AS s
      JOIN fence.PublishedOperation AS p ON p.OperationId = s.OperationId;

    -- Each other key as Publish judges it.
    UPDATE s
       SET Outcome = CASE
                         WHEN s.Found = 0 THEN N'NotProvisioned'
                         WHEN r.Generation <> s.Generation OR (r.Owner IS NOT NULL AND r.Owner <> @Owner)
                             THEN N'Superseded'
                         WHEN r.PublishedGeneration >= s.Generation THEN N'GenerationAlreadyPublished'
                         WHEN r.Owner IS NULL OR r.LeaseUntilUtc <= @Now THEN N'Expired'
                         ELSE N'Published'
                     END
      FROM @Set AS s
      LEFT JOIN fence.Resource AS r ON r.ResourceKey = s.ResourceKey
     WHERE s.Outcome IS NULL;
    UPDATE @Set SET Outcome = N'NotProvisioned' WHERE Outcome IS NULL;
    SET @Refused = (SELECT COUNT(*) FROM @Set WHERE Outcome NOT IN (N'Published', N'AlreadyPublished'));

    IF @Refused = 0
    BEGIN
        UPDATE r
           SET PublishedGeneration    = s.Generation,
               Payload                = s.Payload,
               PublishedAtUtc         = @Now,
               PublishedSourceVersion = NULL,
               -- As Release does: the generation stays, the lease ends.
               Owner                  = CASE WHEN @Release = 1 THEN NULL ELSE r.Owner END,
               LeaseUntilUtc          = CASE WHEN @Release = 1 THEN NULL ELSE r.LeaseUntilUtc END
          FROM fence.Resource AS r
          JOIN @Set AS s ON s.ResourceKey = r.ResourceKey
         WHERE s.Outcome = N'Published';

        -- A publish of one of these operation ids to another key can race
        -- this one past the check above; the key insert decides, and the
        -- loser is told what the contract says, not "duplicate key".
        BEGIN TRY
            INSERT INTO fence.PublishedOperation (OperationId, ResourceKey, Generation, PublishedAtUtc, SourceVersion)
            SELECT OperationId, ResourceKey, Generation, @Now, NULL
              FROM @Set
             WHERE Outcome = N'Published';
        END TRY
        BEGIN CATCH
            IF ERROR_NUMBER() IN (2601, 2627)
                THROW 50107, N'@Leases: an OperationId was already used by a publish to another resource or generation.', 1;
            THROW;
        END CATCH;

        -- Publishing with @Release = 1 ends each tenure, published.
        IF @Release = 1
            INSERT INTO fence.Tenure (ResourceKey, Generation, OwnerHash, AcquiredAtUtc, EndedAtUtc, Ending, Published,
                                      SourceVersion)
            SELECT r.ResourceKey, r.Generation,
                   HASHBYTES('SHA2_256', CAST(UPPER(CAST(@Owner AS char(36))) AS varchar(36))),
                   r.AcquiredAtUtc, @Now, N'Released', 1, NULL
              FROM fence.Resource AS r
              JOIN @Set AS s ON s.ResourceKey = r.ResourceKey
             WHERE s.Outcome = N'Published';

        -- A replayed key this owner still holds at its generation is given
        -- back too, as Release gives one back, when this call published any
        -- key: every lease of an accepted publish-and-release ends, the
        -- replays' included. A call that is all replays changes nothing, as
        -- Publish's replay changes nothing.
        IF @Release = 1 AND EXISTS (SELECT 1 FROM @Set WHERE Outcome = N'Published')
        BEGIN
            INSERT INTO fence.Tenure (ResourceKey, Generation, OwnerHash, AcquiredAtUtc, EndedAtUtc, Ending, Published,
                                      SourceVersion)
            SELECT r.ResourceKey, r.Generation,
                   HASHBYTES('SHA2_256', CAST(UPPER(CAST(@Owner AS char(36))) AS varchar(36))),
                   r.AcquiredAtUtc,
                   CASE WHEN r.LeaseUntilUtc > @Now THEN @Now ELSE r.LeaseUntilUtc END,
                   CASE WHEN r.LeaseUntilUtc > @Now THEN N'Released' ELSE N'Expired' END,
                   CASE WHEN r.PublishedGeneration = r.Generation THEN 1 ELSE 0 END,
                   CASE WHEN r.PublishedGeneration = r.Generation THEN r.PublishedSourceVersion END
              FROM fence.Resource AS r
              JOIN @Set AS s ON s.ResourceKey = r.ResourceKey
             WHERE s.Outcome = N'AlreadyPublished' AND r.Owner = @Owner AND r.Generation = s.Generation;
            UPDATE r
               SET Owner = NULL,
                   LeaseUntilUtc = NULL
              FROM fence.Resource AS r
              JOIN @Set AS s ON s.ResourceKey = r.ResourceKey
             WHERE s.Outcome = N'AlreadyPublished' AND r.Owner = @Owner AND r.Generation = s.Generation;
        END;
    END;
    ELSE
        UPDATE @Set SET Outcome = N'Withheld' WHERE Outcome = N'Published';

    COMMIT TRANSACTION;

    SELECT CAST(Outcome AS nvarchar(32)) AS Outcome,
           CAST(ResourceKey AS nvarchar(256)) AS ResourceKey
      FROM @Set
     ORDER BY LockOrder;
END;
