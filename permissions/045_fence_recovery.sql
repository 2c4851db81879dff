-- Recovery after a restore (voids every lease and raises every generation)
-- and pruning of the tenure history (erases the audit trail) have a wider
-- blast radius than force-release, so they are granted apart from it.
GRANT EXECUTE ON fence_admin.Recover TO fence_recovery;
GRANT EXECUTE ON fence_admin.PruneTenure TO fence_recovery;
-- A recovery's operator reads what it changed.
GRANT EXECUTE ON fence_admin.ListLeases TO fence_recovery;
GRANT EXECUTE ON fence_admin.LeaseHistory TO fence_recovery;
-- Pruning the outcome records (contract v1.6) shortens the replay window of
-- every key at once, like pruning the history.
GRANT EXECUTE ON fence_admin.PruneOutcomes TO fence_recovery;
