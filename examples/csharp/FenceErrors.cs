// What a fence call's SqlException means for the caller: see docs/callers.md,
// "Errors". Outcomes (Busy, Superseded, Lost, ...) are rows, never errors.
#if MICROSOFT_DATA_SQLCLIENT
using Microsoft.Data.SqlClient;
#else
using System.Data.SqlClient;
#endif
using System;

namespace Fencepost.Example
{
    public static class FenceErrors
    {
        // Deadlock victim, lock timeout, and Azure SQL's "try again" family.
        static readonly int[] Transient =
        {
            1205, 1222, 4221, 10928, 10929, 40143, 40197, 40501, 40540, 40613, 49918, 49919, 49920,
        };

        // The server's error number, or null for an error that is not the server's.
        public static int? Number(Exception e)
        {
            var sql = e as SqlException;
            return sql == null ? (int?)null : sql.Number;
        }

        // 501xx: the procedure refused the call and changed nothing.
        public static bool IsRefusal(Exception e)
        {
            var number = Number(e);
            return number >= 50100 && number <= 50199;
        }

        // Acquire (inside your transaction), ForceRelease, ResetSourceVersion,
        // Recover: waited 5 s for a fence row another transaction holds.
        // Nothing was granted: for Acquire this is Busy with an unknown end.
        // Babelfish ends the same wait with its own lock-timeout error.
        public static bool GaveUpWaitingForTheRow(Exception e)
        {
            var number = Number(e);
            return number == 50129 || number == 1222
                || number != null && e.Message.IndexOf("canceling statement due to lock timeout", StringComparison.Ordinal) >= 0;
        }

        // The same call with the same arguments may simply be sent again.
        // Not for Publish: after a timeout (-2) or a lost connection its
        // outcome is unknown, and only a replay with the same operation id
        // (not a new publish) settles it.
        public static bool IsRetryable(Exception e)
        {
            var sql = e as SqlException;
            return sql != null
                && (Array.IndexOf(Transient, sql.Number) >= 0
                    || sql.Number == 50127
                    || GaveUpWaitingForTheRow(sql)
                    || sql.Number == -2
                    || sql.Class >= 20);
        }
    }
}
