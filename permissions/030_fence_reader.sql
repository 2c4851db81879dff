-- Readers see published results, lease state and the contract version, and can
-- change nothing.
GRANT EXECUTE ON fence_api.ReadPublication TO fence_reader;
GRANT EXECUTE ON fence_api.Inspect TO fence_reader;
GRANT EXECUTE ON fence_api.ContractVersion TO fence_reader;
-- Readers see the tenure history too: it holds no owner id, only its hash.
GRANT EXECUTE ON fence_admin.LeaseHistory TO fence_reader;
