-- Answers "did this publish commit?" for a caller whose reply was lost.
CREATE PROCEDURE fence_api.GetOutcome
    @OperationId uniqueidentifier
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

    IF @OperationId IS NULL OR @OperationId = '00000000-0000-0000-0000-000000000000'
        THROW 50105, N'@OperationId must be a non-nil uniqueidentifier, fresh for each publish and reused only to replay it.', 1;

    IF EXISTS (SELECT 1 FROM fence.PublishedOperation WHERE OperationId = @OperationId)
        SELECT CAST(N'Published' AS nvarchar(32)) AS Outcome, ResourceKey, Generation, PublishedAtUtc, SourceVersion
          FROM fence.PublishedOperation
         WHERE OperationId = @OperationId;
    ELSE
        SELECT CAST(N'Unknown' AS nvarchar(32)) AS Outcome, CAST(NULL AS nvarchar(256)) AS ResourceKey,
               CAST(NULL AS bigint) AS Generation, CAST(NULL AS datetime2(7)) AS PublishedAtUtc,
               CAST(NULL AS bigint) AS SourceVersion;
END;
