-- Operators can fence out a stuck holder.
GRANT EXECUTE ON fence_admin.ForceRelease TO fence_operator;
-- Operators list resources and their leases (never the owners).
GRANT EXECUTE ON fence_admin.ListLeases TO fence_operator;
-- Operators read a resource's tenure history (owners only as hashes).
GRANT EXECUTE ON fence_admin.LeaseHistory TO fence_operator;
-- Operators lower or clear a resource's source version after its source's
-- versions restarted (contract v1.4).
GRANT EXECUTE ON fence_admin.ResetSourceVersion TO fence_operator;
-- Pruning the history and recovering after a restore belong to
-- fence_recovery (045); deploys before that granted them here.
REVOKE EXECUTE ON fence_admin.PruneTenure FROM fence_operator;
REVOKE EXECUTE ON fence_admin.Recover FROM fence_operator;
-- Operators retire a key the application no longer uses (contract v1.6): it
-- is refused while the key is held, and never lowers a generation.
GRANT EXECUTE ON fence_admin.Retire TO fence_operator;
