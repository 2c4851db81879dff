-- Readers see published results and lease state, and can change nothing.
GRANT EXECUTE ON fence_api.ReadPublication TO fence_reader;
GRANT EXECUTE ON fence_api.Inspect TO fence_reader;
