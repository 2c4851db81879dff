-- The version of the procedure contract this database speaks, so a client can
-- refuse an old procedure body whose parameters still look right. A client
-- accepts the same major and a minor at least as new as the one it needs:
-- the minor rises with every compatible addition (a column, an outcome, an
-- optional parameter, a procedure), the major with any change of meaning.
-- v1.2: this procedure, and Acquire's ServerUtc column.
-- v1.3: the tenure history (fence_admin.LeaseHistory, PruneTenure) and
-- fence_admin.Recover.
-- v1.4: the source-version fence (Publish's and AssertHolder's @SourceVersion,
-- the StaleSource outcome, SourceVersion columns, ResetSourceVersion).
-- v1.5: operator commands idempotent by operation id (ForceRelease's and
-- ResetSourceVersion's @OperationId, error 50130, fence.OperatorOperation).
-- v1.6: the lifecycle (fence_admin.Retire, PruneOutcomes, fence.Retirement).
-- v1.7: fence_api.RenewMany, many leases renewed in one call (error 50133).
-- v1.8: lease sets (fence_api.AcquireSet, RenewSet, ReleaseSet, PublishSet,
-- AssertHolderSet; errors 50134 and 50135) and slots (fence_api.AcquireSlot,
-- error 50136).
CREATE PROCEDURE fence_api.ContractVersion
AS
BEGIN
    SET NOCOUNT ON;
    SET XACT_ABORT ON;

    SELECT CAST(N'Version' AS nvarchar(32)) AS Outcome, CAST(1 AS int) AS Major, CAST(8 AS int) AS Minor;
END;
