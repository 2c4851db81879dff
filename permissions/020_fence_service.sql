-- Services lease, publish and read through the fence_api procedures and
-- nothing else. EXECUTE is granted procedure by procedure, never on the
-- schema, so a procedure added later is not reachable until it is granted here.
GRANT EXECUTE ON fence_api.Provision TO fence_service;
GRANT EXECUTE ON fence_api.Acquire TO fence_service;
GRANT EXECUTE ON fence_api.Renew TO fence_service;
GRANT EXECUTE ON fence_api.RenewMany TO fence_service;
GRANT EXECUTE ON fence_api.Publish TO fence_service;
GRANT EXECUTE ON fence_api.Release TO fence_service;
GRANT EXECUTE ON fence_api.GetOutcome TO fence_service;
GRANT EXECUTE ON fence_api.ReadPublication TO fence_service;
GRANT EXECUTE ON fence_api.Inspect TO fence_service;
GRANT EXECUTE ON fence_api.AssertHolder TO fence_service;
GRANT EXECUTE ON fence_api.AcquireSet TO fence_service;
GRANT EXECUTE ON fence_api.RenewSet TO fence_service;
GRANT EXECUTE ON fence_api.ReleaseSet TO fence_service;
GRANT EXECUTE ON fence_api.PublishSet TO fence_service;
GRANT EXECUTE ON fence_api.AssertHolderSet TO fence_service;
GRANT EXECUTE ON fence_api.AcquireSlot TO fence_service;
GRANT EXECUTE ON fence_api.ContractVersion TO fence_service;
