-- Keeps the tenure history bounded: deletes the tenures that ended more than
-- @OlderThanDays days ago (server clock) and answers how many. Deletes in
-- batches, so a large prune never holds one long transaction when it runs on
-- its own.
CREATE PROCEDURE fence_admin.PruneTenure
    @OlderThanDays int
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    IF @OlderThanDays IS NULL OR @OlderThanDays NOT BETWEEN 1 AND 36500
        THROW 50123, N'@OlderThanDays must be 1 to 36500.', 1;

    DECLARE @Before datetime2(7) = DATEADD(DAY, -@OlderThanDays, SYSUTCDATETIME());
    DECLARE @Deleted int = 0, @Batch int = 5000;

    WHILE @Batch = 5000
    BEGIN
        DELETE TOP (5000) FROM fence.Tenure WHERE EndedAtUtc < @Before;
        SET @Batch = @@ROWCOUNT;
        SET @Deleted += @Batch;
    END;

    SELECT CAST(N'Pruned' AS nvarchar(32)) AS Outcome, @Deleted AS Deleted, @Before AS EndedBeforeUtc;
END;
