-- Operators can fence out a stuck holder.
GRANT EXECUTE ON fence_admin.ForceRelease TO fence_operator;
