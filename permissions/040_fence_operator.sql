-- Operators can fence out a stuck holder.
GRANT EXECUTE ON fence_admin.ForceRelease TO fence_operator;
-- Operators list resources and their leases (never the owners).
GRANT EXECUTE ON fence_admin.ListLeases TO fence_operator;
