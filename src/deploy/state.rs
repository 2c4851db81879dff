//! What a database holds of fencepost, as data: the migration history and the
//! procedures in the fence schemas joined with the deploy journal. Read by
//! [`run`](super::run) in one round trip; compared with what ships by the
//! [`Plan`](super::Plan).

use super::rights::ProbedRights;

/// One row of the migration history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedMigration {
    /// The version.
    pub version: i32,
    /// The name without the version, e.g. `lease_tables`.
    pub name: String,
    /// When it was applied (RFC 3339, as refinery records it).
    pub applied_on: String,
    /// refinery's checksum of name, version and text.
    pub checksum: u64,
}

/// A procedure in a fence schema as the server holds it, joined with what the
/// journal says was deployed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerProcedure {
    /// `schema.name`.
    pub name: String,
    /// Whether the procedure exists; `false` when only a journal row does.
    pub exists: bool,
    /// The fingerprint of the definition the server holds now; `None` when the
    /// procedure does not exist, is not one of the shipped procedures the
    /// state was read for (only those are hashed), or exists but its
    /// definition cannot be read (encrypted, or the login lacks VIEW
    /// DEFINITION).
    pub definition_hash: Option<String>,
    /// The shipped text's checksum recorded at the last deploy, if any.
    pub deployed_checksum: Option<String>,
    /// The definition fingerprint recorded right after that deploy, if any.
    pub deployed_definition_hash: Option<String>,
}

/// fencepost's footprint in one database.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerState {
    /// Applied migrations by version; empty when the history does not exist.
    pub migrations: Vec<AppliedMigration>,
    /// Procedures in `fence_api` and `fence_admin`, and journal rows of procedures
    /// that no longer exist.
    pub procedures: Vec<ServerProcedure>,
    /// The deploying user, when a fence role must be created or given to
    /// dbo and that user may not make dbo a role's owner (it is not dbo, not
    /// in db_owner, and holds no IMPERSONATE on dbo); `None` otherwise, and
    /// on Babelfish, which shows no role owner.
    pub cannot_give_roles_to_dbo: Option<String>,
    /// Who deploys, and the rights a deploy may need that the login lacks.
    pub(crate) rights: ProbedRights,
}
