//! Names of fencepost's objects in a database, spelled once for every room
//! that names them: the procedure schemas, the fence roles, the migration
//! history and the deploy lock.

/// The schemas whose procedures fencepost ships and tracks.
pub const PROCEDURE_SCHEMAS: [&str; 2] = ["fence_api", "fence_admin"];

/// The schemas a deploy creates, each owned by dbo: the tables', then the
/// procedures'.
pub const FENCE_SCHEMAS: [&str; 3] = ["fence", "fence_api", "fence_admin"];

/// The roles a deploy may add members to: the fence's own, nothing else.
pub const FENCE_ROLES: [&str; 4] = ["fence_service", "fence_reader", "fence_operator", "fence_recovery"];

/// Where fencepost keeps its migration history (refinery's table).
pub const HISTORY_TABLE: &str = "fence.SchemaHistory";

/// The name of the deploy lock (`sp_getapplock` resource), followed by the
/// database name. SQL Server scopes application locks to a database already;
/// engines whose locks are server-wide (Babelfish) need the name to keep
/// deploys of different databases independent.
pub const DEPLOY_LOCK: &str = "fencepost:deploy:";
