//! Every right a deploy may need, on what, for which step, and when: the
//! table the probe asks the server about and the plan filters by what the
//! next deploy does. Each follows SQL Server's documented permissions for the
//! statement the step runs (CREATE SCHEMA, CREATE TABLE, CREATE PROCEDURE,
//! ALTER PROCEDURE and DROP PROCEDURE, CREATE ROLE, GRANT and DENY, INSERT,
//! UPDATE and DELETE); where an object does not exist yet the right is asked
//! of its schema, and where the schema does not either, of the database.

use super::statements::Statement;

/// What a right is held on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum On {
    /// The database itself (`GRANT CREATE TABLE TO ...`).
    Database,
    /// A schema.
    Schema(&'static str),
    /// A table in a schema: asked of the schema while the table is missing.
    Object(&'static str, &'static str),
    /// A database user (IMPERSONATE).
    User(&'static str),
    /// A fence role: asked of the database while it is not visible to the
    /// deployer and the fence schemas are missing (the one-step path).
    Role(&'static str),
}

/// Which steps of the next deploy need a right; the plan says whether it
/// takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum When {
    /// A migration is pending.
    MigrationsPending,
    /// A pending migration runs a statement whose kind takes this right
    /// ([`rights_for`]).
    MigrationRuns,
    /// A procedure is missing and will be created.
    ProcedureCreated,
    /// A procedure in this schema is created, altered or dropped.
    ProceduresChangedIn(&'static str),
    /// A procedure is created or altered (its journal row written).
    ProceduresDeployed,
    /// A procedure is dropped (its journal row deleted).
    ProceduresDropped,
    /// The permission scripts run (every deploy that ships any).
    PermissionsApplied,
    /// Every deploy: it reads the journal and records itself.
    EveryDeploy,
}

/// One right the probe asks about.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Candidate {
    /// The key the probe's rows carry.
    pub key: &'static str,
    /// The permission, as GRANT names it.
    pub permission: &'static str,
    /// What it is held on.
    pub on: On,
    /// Which steps need it.
    pub when: When,
    /// A T-SQL condition on the server's state without which no step needs
    /// it (a schema or role that is missing), `None` for always.
    pub only_if: Option<&'static str>,
    /// GRANT, REVOKE and DENY: besides the permission itself, a member of
    /// db_securityadmin may grant and deny in the database.
    pub grants: bool,
    /// What the deploy does with it, for the message.
    pub needed_for: &'static str,
}

const FENCE_SCHEMA_MISSING: &str =
    "SCHEMA_ID(N'fence') IS NULL OR SCHEMA_ID(N'fence_api') IS NULL OR SCHEMA_ID(N'fence_admin') IS NULL";
const FENCE_ROLE_MISSING: &str = "DATABASE_PRINCIPAL_ID(N'fence_service') IS NULL \
OR DATABASE_PRINCIPAL_ID(N'fence_reader') IS NULL OR DATABASE_PRINCIPAL_ID(N'fence_operator') IS NULL \
OR DATABASE_PRINCIPAL_ID(N'fence_recovery') IS NULL";

/// The candidates (by key) a statement of `kind` takes, per SQL Server's
/// documentation of the statement. The tables are dbo's, not the
/// deployer's: every right on them is asked for, none comes with ownership.
pub(crate) fn rights_for(kind: Statement) -> &'static [&'static str] {
    match kind {
        Statement::CreateSchema => &["create_schema", "impersonate_dbo"],
        Statement::CreateTable => &["create_table", "alter_fence"],
        Statement::SelectInto => &["create_table", "alter_fence", "select_fence"],
        Statement::Index | Statement::AlterTable | Statement::DropTable => &["alter_fence"],
        Statement::ForeignKey => &["references_fence"],
        Statement::Select => &["select_fence"],
        Statement::Insert => &["insert_fence"],
        // An UPDATE or DELETE with a WHERE reads the rows it changes.
        Statement::Update => &["update_fence", "select_fence"],
        Statement::Delete => &["delete_fence", "select_fence"],
    }
}

/// Whether fence.DatabaseIdentity is missing or holds no row: set by the
/// probe's preamble ([`IDENTITY_UNRECORDED_SET`]).
const IDENTITY_UNRECORDED: &str = "@IdentityUnrecorded = 1";

/// Sets `@IdentityUnrecorded` in two statements, so that the table is named
/// only once it exists (a statement naming a missing table fails when it
/// runs, not when the batch compiles).
pub(crate) const IDENTITY_UNRECORDED_SET: &str = "DECLARE @IdentityUnrecorded bit = 0;
IF OBJECT_ID(N'fence.DatabaseIdentity', N'U') IS NULL
    SET @IdentityUnrecorded = 1;
ELSE IF NOT EXISTS (SELECT 1 FROM fence.DatabaseIdentity)
    SET @IdentityUnrecorded = 1;
";

/// Why a deployer must see each fence role. [Metadata visibility] "The
/// visibility of metadata is limited to securables that a user either owns or
/// on which the user has been granted some permission": a role dbo owns is
/// invisible to a deployer that is not its member and holds no right on it,
/// so `DATABASE_PRINCIPAL_ID` answers NULL, the permission script would
/// create the role again, and its GRANTs to the role would not find it.
/// VIEW DEFINITION on the role is the least that shows it (ownership would
/// let the deployer add members, which the roles' owner, dbo, is there to
/// prevent).
const VIEW_ROLE: &str = "seeing the fence role, to create it only while missing and grant to it";

/// Every right a deploy may need, in the order a deploy takes them.
pub(crate) const CANDIDATES: &[Candidate] = &[
    Candidate {
        key: "create_schema",
        permission: "CREATE SCHEMA",
        on: On::Database,
        when: When::MigrationsPending,
        only_if: Some(FENCE_SCHEMA_MISSING),
        grants: false,
        needed_for: "creating the schemas fence, fence_api and fence_admin",
    },
    Candidate {
        key: "impersonate_dbo",
        permission: "IMPERSONATE",
        on: On::User("dbo"),
        when: When::MigrationsPending,
        only_if: Some(FENCE_SCHEMA_MISSING),
        grants: false,
        needed_for: "making dbo the fence schemas' owner (CREATE SCHEMA ... AUTHORIZATION dbo)",
    },
    Candidate {
        key: "create_table",
        permission: "CREATE TABLE",
        on: On::Database,
        when: When::MigrationRuns,
        only_if: None,
        grants: false,
        needed_for: "creating the fence tables and the migration history",
    },
    Candidate {
        key: "alter_fence",
        permission: "ALTER",
        on: On::Schema("fence"),
        when: When::MigrationsPending,
        only_if: None,
        grants: false,
        needed_for: "applying migrations, which create and alter the tables in schema fence",
    },
    Candidate {
        key: "insert_history",
        permission: "INSERT",
        on: On::Object("fence", "SchemaHistory"),
        when: When::MigrationsPending,
        only_if: None,
        grants: false,
        needed_for: "recording each migration in fence.SchemaHistory",
    },
    Candidate {
        key: "insert_fence",
        permission: "INSERT",
        on: On::Schema("fence"),
        when: When::MigrationRuns,
        only_if: None,
        grants: false,
        needed_for: "applying migrations that insert rows into the tables in schema fence (fence.Anchor, fence.Retirement)",
    },
    Candidate {
        key: "update_fence",
        permission: "UPDATE",
        on: On::Schema("fence"),
        when: When::MigrationRuns,
        only_if: None,
        grants: false,
        needed_for: "applying migrations that update rows in the tables in schema fence",
    },
    Candidate {
        key: "delete_fence",
        permission: "DELETE",
        on: On::Schema("fence"),
        when: When::MigrationRuns,
        only_if: None,
        grants: false,
        needed_for: "applying migrations that delete rows from the tables in schema fence",
    },
    Candidate {
        key: "references_fence",
        permission: "REFERENCES",
        on: On::Schema("fence"),
        when: When::MigrationRuns,
        only_if: None,
        grants: false,
        needed_for: "applying migrations that create a foreign key to a table in schema fence (fence.Resource)",
    },
    Candidate {
        key: "create_procedure",
        permission: "CREATE PROCEDURE",
        on: On::Database,
        when: When::ProcedureCreated,
        only_if: None,
        grants: false,
        needed_for: "creating the fence procedures",
    },
    Candidate {
        key: "alter_fence_api",
        permission: "ALTER",
        on: On::Schema("fence_api"),
        when: When::ProceduresChangedIn("fence_api"),
        only_if: None,
        grants: false,
        needed_for: "creating, altering and dropping the procedures in schema fence_api",
    },
    Candidate {
        key: "alter_fence_admin",
        permission: "ALTER",
        on: On::Schema("fence_admin"),
        when: When::ProceduresChangedIn("fence_admin"),
        only_if: None,
        grants: false,
        needed_for: "creating, altering and dropping the procedures in schema fence_admin",
    },
    Candidate {
        key: "insert_journal",
        permission: "INSERT",
        on: On::Object("fence", "DeployedProcedure"),
        when: When::ProceduresDeployed,
        only_if: None,
        grants: false,
        needed_for: "recording each procedure deployed in fence.DeployedProcedure",
    },
    Candidate {
        key: "update_journal",
        permission: "UPDATE",
        on: On::Object("fence", "DeployedProcedure"),
        when: When::ProceduresDeployed,
        only_if: None,
        grants: false,
        needed_for: "recording each procedure deployed in fence.DeployedProcedure",
    },
    Candidate {
        key: "delete_journal",
        permission: "DELETE",
        on: On::Object("fence", "DeployedProcedure"),
        when: When::ProceduresDropped,
        only_if: None,
        grants: false,
        needed_for: "forgetting each procedure dropped in fence.DeployedProcedure",
    },
    Candidate {
        key: "select_fence",
        permission: "SELECT",
        on: On::Schema("fence"),
        when: When::EveryDeploy,
        only_if: None,
        grants: false,
        needed_for: "reading the migration history, the procedure journal and the database identity in schema fence",
    },
    Candidate {
        key: "create_role",
        permission: "CREATE ROLE",
        on: On::Database,
        when: When::PermissionsApplied,
        only_if: Some(FENCE_ROLE_MISSING),
        grants: false,
        needed_for: "creating the fence roles",
    },
    Candidate {
        key: "control_fence_api",
        permission: "CONTROL",
        on: On::Schema("fence_api"),
        when: When::PermissionsApplied,
        only_if: None,
        grants: true,
        needed_for: "granting EXECUTE on the fence_api procedures to the fence roles",
    },
    Candidate {
        key: "control_fence_admin",
        permission: "CONTROL",
        on: On::Schema("fence_admin"),
        when: When::PermissionsApplied,
        only_if: None,
        grants: true,
        needed_for: "granting EXECUTE on the fence_admin procedures to the fence roles",
    },
    Candidate {
        key: "control_fence",
        permission: "CONTROL",
        on: On::Schema("fence"),
        when: When::PermissionsApplied,
        // Babelfish has no DENY: the permission script skips it there.
        only_if: Some("SERVERPROPERTY(N'Babelfish') IS NULL"),
        grants: true,
        needed_for: "denying the fence roles every right on schema fence",
    },
    Candidate {
        key: "view_fence_service",
        permission: "VIEW DEFINITION",
        on: On::Role("fence_service"),
        when: When::PermissionsApplied,
        only_if: Some("SERVERPROPERTY(N'Babelfish') IS NULL"),
        grants: false,
        needed_for: VIEW_ROLE,
    },
    Candidate {
        key: "view_fence_reader",
        permission: "VIEW DEFINITION",
        on: On::Role("fence_reader"),
        when: When::PermissionsApplied,
        only_if: Some("SERVERPROPERTY(N'Babelfish') IS NULL"),
        grants: false,
        needed_for: VIEW_ROLE,
    },
    Candidate {
        key: "view_fence_operator",
        permission: "VIEW DEFINITION",
        on: On::Role("fence_operator"),
        when: When::PermissionsApplied,
        only_if: Some("SERVERPROPERTY(N'Babelfish') IS NULL"),
        grants: false,
        needed_for: VIEW_ROLE,
    },
    Candidate {
        key: "view_fence_recovery",
        permission: "VIEW DEFINITION",
        on: On::Role("fence_recovery"),
        when: When::PermissionsApplied,
        only_if: Some("SERVERPROPERTY(N'Babelfish') IS NULL"),
        grants: false,
        needed_for: VIEW_ROLE,
    },
    Candidate {
        key: "insert_deployment",
        permission: "INSERT",
        on: On::Object("fence", "Deployment"),
        when: When::EveryDeploy,
        only_if: None,
        grants: false,
        needed_for: "recording the deployment in fence.Deployment",
    },
    Candidate {
        key: "insert_identity",
        permission: "INSERT",
        on: On::Object("fence", "DatabaseIdentity"),
        when: When::EveryDeploy,
        // Written once, by the first deploy that finds no row there (the
        // table may exist without it: an engine that showed no identity,
        // or a row removed by hand).
        only_if: Some(IDENTITY_UNRECORDED),
        grants: false,
        needed_for: "recording the database identity in fence.DatabaseIdentity",
    },
];

/// The candidate a probe row names.
pub(crate) fn candidate(key: &str) -> Option<&'static Candidate> {
    CANDIDATES.iter().find(|c| c.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_candidate_has_its_own_key() {
        for (i, c) in CANDIDATES.iter().enumerate() {
            assert!(
                CANDIDATES[i + 1..].iter().all(|other| other.key != c.key),
                "{} twice",
                c.key
            );
            assert_eq!(candidate(c.key).map(|found| found.key), Some(c.key));
        }
    }
}
