//! Why a deploy must not proceed: the database's history does not agree with
//! what ships, or shipped procedures were changed on the server. A refusal is
//! a value of the plan, found before anything runs: `status` and a dry run
//! show it, and a deploy stops with it as [`DeployError::Blocked`].
//!
//! [`DeployError::Blocked`]: super::DeployError::Blocked

use super::rights::{MissingRight, grant_statements};

/// A reason the plan gives for a deploy not to run. Its text is what the
/// stopped deploy says.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Blocker {
    /// An applied migration no longer matches the shipped file.
    #[error(
        "migration {name} was changed after it was applied (the server's checksum differs); \
             ship a new migration instead of editing an applied one"
    )]
    DivergentMigration {
        /// The migration, e.g. `V1__lease_tables`.
        name: String,
    },
    /// The database holds a migration this fencepost does not ship.
    #[error("the database has migration {name}, which this fencepost does not ship; deploy with the newer fencepost")]
    UnknownMigration {
        /// The migration as recorded on the server.
        name: String,
    },
    /// A pending migration is older than one already applied.
    #[error(
        "migration {name} is pending, but the database already has the later migration {latest}; \
         give it a version above {latest}'s"
    )]
    OutOfOrderMigration {
        /// The pending migration, e.g. `V2__x`.
        name: String,
        /// The latest applied migration.
        latest: String,
    },
    /// A fence schema exists owned by someone other than dbo: its owner
    /// could change the fence tables, and on SQL Server the procedures
    /// (dbo's) would not reach them by ownership chaining.
    #[error(
        "schema {schema} exists and is owned by {owner}, not dbo, so {owner} could change what is in it and, on \
         SQL Server, the fence procedures would not reach its tables by ownership chaining; `fencepost migrate` \
         stops with error 50198 until a DBA makes dbo its owner (ALTER AUTHORIZATION ON SCHEMA::{schema} TO dbo; \
         on Babelfish, which has no such statement, DROP SCHEMA {schema} while it is empty)"
    )]
    SchemaNotOwnedByDbo {
        /// `fence`, `fence_api` or `fence_admin`.
        schema: String,
        /// Its owner.
        owner: String,
    },
    /// A procedure in a fence schema that fencepost never deployed.
    #[error(
        "procedure {name} is in a fence schema but was not deployed by fencepost; a procedure there can \
         write the fence tables, so drop it or move it out of fence_api and fence_admin before deploying"
    )]
    HandMadeProcedure {
        /// `schema.name`.
        name: String,
    },
    /// The fence roles must be created owned by dbo (or given to dbo), and
    /// the deploying user may not make dbo their owner: the permission
    /// scripts would fail half way, after the migrations and procedures.
    #[error(
        "the deploying user {user} cannot create the fence roles owned by dbo: CREATE ROLE ... AUTHORIZATION dbo \
         needs IMPERSONATE on dbo, and giving dbo a role another user owns needs TAKE OWNERSHIP on that role too, \
         which dbo and db_owner members hold. Deploy once as a db_owner member, or GRANT IMPERSONATE ON USER::dbo \
         TO [{user}] (and TAKE OWNERSHIP on each fence role another user owns); the roles are owned by dbo so that \
         no deployer can add members to them outside a review of the grants"
    )]
    RolesNeedImpersonate {
        /// The deploying user.
        user: String,
    },
    /// The deploying login lacks rights the deploy's statements need: it
    /// would fail part-way, after the changes before the first it may not
    /// make.
    #[error(
        "the deploying user {user} lacks {} right(s) this deploy needs, so it would stop part-way: {}. \
         A DBA grants them: {}",
        .rights.len(),
        .rights.iter().map(|r| format!("{} on {} ({})", r.permission, r.securable, r.needed_for))
            .collect::<Vec<_>>().join("; "),
        grant_statements(.rights).join(" ")
    )]
    MissingRights {
        /// The deploying user.
        user: String,
        /// What it lacks, each with the statement that grants it.
        rights: Vec<MissingRight>,
    },
    /// Shipped procedures on the server are not what fencepost deployed:
    /// someone altered them, or this login cannot read them. A deploy does
    /// not overwrite that unless told to.
    #[error(
        "{} on the server differ{} from what fencepost deployed (altered by hand, or unreadable to this login): \
         review with `fencepost status --diff`, then deploy with --overwrite-drift to restore the shipped text, \
         or ship the change in the procedure's file",
        .names.join(", "), if .names.len() == 1 { "s" } else { "" }
    )]
    Drift {
        /// `schema.name` of each drifted procedure.
        names: Vec<String>,
    },
}
