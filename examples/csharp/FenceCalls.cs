// The fence procedures as a .NET service calls them: stored-procedure
// commands with typed parameters, one pooled connection per call, nothing
// but EXECUTE on fence_api. Each method returns the procedure's one row.
//
// Written against the API System.Data.SqlClient (the default) and
// Microsoft.Data.SqlClient (-define:MICROSOFT_DATA_SQLCLIENT) share; CI
// builds and runs the System.Data.SqlClient one.
#if MICROSOFT_DATA_SQLCLIENT
using Microsoft.Data.SqlClient;
#else
using System.Data.SqlClient;
#endif
using System;
using System.Data;

namespace Fencepost.Example
{
    public sealed class AcquireRow
    {
        public string Outcome;
        public long? Generation;
        public DateTime? LeaseUntilUtc;
        public DateTime ServerUtc;
    }

    public sealed class InspectRow
    {
        public string Outcome;
        public long? Generation;
        public bool IsHeld;
        public DateTime? LeaseUntilUtc;
        public DateTime ServerUtc;
    }

    public sealed class PublicationRow
    {
        public string Outcome;
        public long? PublishedGeneration;
        public string Payload;
    }

    public sealed class FenceCalls
    {
        // Longer than any call here needs. A call that runs out of it is
        // cancelled with a TDS Attention: for Publish its outcome is then
        // unknown, and only a replay with the same operation id settles it.
        const int CommandTimeoutSeconds = 30;

        readonly string connectionString;

        public FenceCalls(string connectionString)
        {
            this.connectionString = connectionString;
        }

        public int[] ContractVersion()
        {
            return Call("fence_api.ContractVersion", c => { }, r => new[] { r.GetInt32(1), r.GetInt32(2) });
        }

        public string Provision(string key)
        {
            return Call("fence_api.Provision", c => Key(c, key), r => r.GetString(0));
        }

        public AcquireRow Acquire(string key, Guid owner, int leaseSeconds)
        {
            return Call("fence_api.Acquire", c =>
            {
                Key(c, key);
                c.Parameters.Add("@Owner", SqlDbType.UniqueIdentifier).Value = owner;
                c.Parameters.Add("@LeaseSeconds", SqlDbType.Int).Value = leaseSeconds;
            }, r => new AcquireRow
            {
                Outcome = r.GetString(0),
                Generation = r.IsDBNull(1) ? (long?)null : r.GetInt64(1),
                LeaseUntilUtc = r.IsDBNull(2) ? (DateTime?)null : Utc(r.GetDateTime(2)),
                ServerUtc = Utc(r.GetDateTime(3)),
            });
        }

        public string Renew(string key, Guid owner, long generation, int leaseSeconds, int timeoutSeconds)
        {
            return Call("fence_api.Renew", c =>
            {
                Lease(c, key, owner, generation);
                c.Parameters.Add("@LeaseSeconds", SqlDbType.Int).Value = leaseSeconds;
                c.CommandTimeout = timeoutSeconds;
            }, r => r.GetString(0));
        }

        public string Publish(string key, Guid owner, long generation, Guid operationId, string payload, bool release)
        {
            return Call("fence_api.Publish", c =>
            {
                Lease(c, key, owner, generation);
                c.Parameters.Add("@OperationId", SqlDbType.UniqueIdentifier).Value = operationId;
                // -1 is nvarchar(max): a fixed size would truncate the payload.
                c.Parameters.Add("@Payload", SqlDbType.NVarChar, -1).Value = payload;
                c.Parameters.Add("@Release", SqlDbType.Bit).Value = release;
            }, r => r.GetString(0));
        }

        public string Release(string key, Guid owner, long generation)
        {
            return Call("fence_api.Release", c => Lease(c, key, owner, generation), r => r.GetString(0));
        }

        public string GetOutcome(Guid operationId)
        {
            return Call("fence_api.GetOutcome",
                c => c.Parameters.Add("@OperationId", SqlDbType.UniqueIdentifier).Value = operationId,
                r => r.GetString(0));
        }

        public InspectRow Inspect(string key)
        {
            return Call("fence_api.Inspect", c => Key(c, key), r => new InspectRow
            {
                Outcome = r.GetString(0),
                Generation = r.IsDBNull(1) ? (long?)null : r.GetInt64(1),
                IsHeld = !r.IsDBNull(2) && r.GetBoolean(2),
                LeaseUntilUtc = r.IsDBNull(3) ? (DateTime?)null : Utc(r.GetDateTime(3)),
                ServerUtc = Utc(r.GetDateTime(5)),
            });
        }

        public PublicationRow ReadPublication(string key)
        {
            return Call("fence_api.ReadPublication", c => Key(c, key), r => new PublicationRow
            {
                Outcome = r.GetString(0),
                PublishedGeneration = r.IsDBNull(1) ? (long?)null : r.GetInt64(1),
                Payload = r.IsDBNull(2) ? null : r.GetString(2),
            });
        }

        // The procedures declare @ResourceKey nvarchar(4000), wider than a key
        // may be (256), so an over-long key is refused with 50101. A parameter
        // sized 256 here would cut it on the client, silently, before the
        // procedure could refuse it: two long keys would share one fence.
        static void Key(SqlCommand command, string key)
        {
            command.Parameters.Add("@ResourceKey", SqlDbType.NVarChar, 4000).Value = key;
        }

        static void Lease(SqlCommand command, string key, Guid owner, long generation)
        {
            Key(command, key);
            command.Parameters.Add("@Owner", SqlDbType.UniqueIdentifier).Value = owner;
            command.Parameters.Add("@Generation", SqlDbType.BigInt).Value = generation;
        }

        // datetime2 arrives as DateTimeKind.Unspecified; every fence time is UTC.
        static DateTime Utc(DateTime value)
        {
            return DateTime.SpecifyKind(value, DateTimeKind.Utc);
        }

        T Call<T>(string procedure, Action<SqlCommand> parameters, Func<SqlDataReader, T> row)
        {
            using (var connection = new SqlConnection(connectionString))
            using (var command = new SqlCommand(procedure, connection))
            {
                command.CommandType = CommandType.StoredProcedure;
                command.CommandTimeout = CommandTimeoutSeconds;
                parameters(command);
                connection.Open();
                try
                {
                    using (var reader = command.ExecuteReader())
                    {
                        if (!reader.Read())
                            throw new InvalidOperationException(procedure + " returned no row");
                        return row(reader);
                    }
                }
                catch (SqlException)
                {
                    // Never reuse a session a fence call failed on. On
                    // Babelfish, whose fence procedures are SECURITY DEFINER,
                    // the pool's reset of a session after an error raised in
                    // one fails ("cannot set parameter session_authorization
                    // within security-definer function"), and the replies
                    // that follow on it answer the wrong requests.
                    SqlConnection.ClearPool(connection);
                    throw;
                }
            }
        }
    }
}
