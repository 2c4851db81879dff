-- Operators can fence out a stuck holder.
GRANT EXECUTE ON fence_admin.ForceRelease TO fence_operator;
-- Operators list resources and their leases (never the owners).
GRANT EXECUTE ON fence_admin.ListLeases TO fence_operator;
-- Operators read a resource's tenure history (owners only as hashes), keep it
-- bounded, and raise every generation after a restore.
GRANT EXECUTE ON fence_admin.LeaseHistory TO fence_operator;
GRANT EXECUTE ON fence_admin.PruneTenure TO fence_operator;
GRANT EXECUTE ON fence_admin.Recover TO fence_operator;
