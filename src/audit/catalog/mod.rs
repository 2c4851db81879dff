//! A plain snapshot of what the catalog shows about one database: the input of
//! the rules. Built by [`read_catalog`](super::read_catalog) from a server, or
//! by hand (or from JSON) in tests, so every rule can be tried without one.

mod beyond;
mod code;
mod execute_as;
mod foreign_keys;
mod proxies;
mod runners;
mod security;
mod server;
mod tables;

use serde::{Deserialize, Serialize};

pub use beyond::{Assembly, OutsideItem, OutsideKind, OutsideTsql, SigningKey, TableExpression, Unread};
pub use code::{Dependency, DeployedProcedure, Object, ObjectKind};
pub(crate) use execute_as::ExecuteAs;
pub use foreign_keys::{ForeignKey, ReferentialAction};
pub use proxies::{AgentProxy, ProxyUser, ProxyUserKind};
pub use runners::{JobEditor, JobStep, LinkedLogin, LinkedServer, LinkedServers, ServiceQueue};
pub use security::{
    LoginKind, Membership, Permission, PermissionState, Principal, PrincipalKind, Schema, Securable, UserAuthentication,
};
pub use server::{
    AvailabilityGroupPermission, OtherDatabase, OtherDatabaseUser, ServerFacts, ServerPermission, ServerRoleOwner,
    ServerSettings, ServerTrigger,
};
pub use tables::{FenceTableFeature, TableFeature};

/// Everything the rules look at, by name rather than by id so a fixture reads
/// like the T-SQL that would produce it. A part the checking login could not
/// read is `None`, never an empty list: an empty list is a claim that there
/// is nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Catalog {
    /// The database the snapshot was taken of.
    pub database: String,
    /// Facts about the engine that no catalog view states.
    pub engine: Engine,
    /// What the checking login may see of the database's metadata; `None`
    /// when that could not be read, and then no rule can pass.
    pub visibility: Option<Visibility>,
    /// Database options that widen who can act as whom; `None` when unreadable.
    pub settings: Option<DatabaseSettings>,
    /// Users and roles of the database (`sys.database_principals`).
    pub principals: Vec<Principal>,
    /// Direct role memberships (`sys.database_role_members`); `public` is implied.
    pub memberships: Vec<Membership>,
    /// Grants and denies at database, schema, object, column and principal level.
    pub permissions: Vec<Permission>,
    /// Schemas and their owners.
    pub schemas: Vec<Schema>,
    /// Tables, modules, synonyms and database DDL triggers, with module
    /// definitions.
    pub objects: Vec<Object>,
    /// Why module signatures (`sys.crypt_properties`) could not be read, when
    /// they could not: then an empty [`Object::signed_by`] proves nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signatures_unreadable: Option<String>,
    /// What modules reference (`sys.sql_expression_dependencies`); `None` when
    /// the engine does not keep it.
    pub dependencies: Option<Vec<Dependency>>,
    /// The deploy runner's journal (`fence.DeployedProcedure`); `None` when
    /// the database has none.
    pub deployed: Option<Vec<DeployedProcedure>>,
    /// Server-level facts about the logins behind database users; `None` when
    /// the checking login cannot see them all.
    pub server: Option<ServerFacts>,
    /// Server configuration options (`sys.configurations`); `None` when
    /// unreadable.
    pub server_settings: Option<ServerSettings>,
    /// The other TRUSTWORTHY databases of the server; `None` when the list
    /// could not be read.
    pub trustworthy_databases: Option<Vec<OtherDatabase>>,
    /// The database identity, recorded and current; `None` when it could not
    /// be read.
    pub database_identity: Option<IdentityReading>,
    /// What copies, filters or blocks the fence tables' rows besides the
    /// procedures (history tables, change data capture, replication,
    /// security policies); `None` when it could not be read.
    pub fence_table_features: Option<Vec<FenceTableFeature>>,
    /// SQL Server Agent T-SQL job steps that run in this database; `None`
    /// when `msdb` could not be read.
    pub job_steps: Option<Vec<JobStep>>,
    /// Who may rewrite any Agent job by writing msdb's job tables; `None`
    /// when msdb's principals and permissions could not be read in full.
    pub job_editors: Option<Vec<JobEditor>>,
    /// SQL Server Agent proxies and who may use them; `None` when msdb's
    /// proxy tables could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_proxies: Option<Vec<AgentProxy>>,
    /// Linked servers and their login mappings; `None` when unreadable.
    pub linked_servers: Option<LinkedServers>,
    /// Service Broker queues with activation on; `None` when unreadable.
    pub activated_queues: Option<Vec<ServiceQueue>>,
    /// CHECK and DEFAULT constraints and computed columns of the tables;
    /// `None` when unreadable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table_expressions: Option<Vec<TableExpression>>,
    /// Foreign keys with their referential actions; `None` when unreadable
    /// (and in a snapshot taken before they were read).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub foreign_keys: Option<Vec<ForeignKey>>,
    /// Certificates and asymmetric keys, their owners and mapped users;
    /// `None` when unreadable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signing_keys: Option<Vec<SigningKey>>,
    /// The user assemblies and their owners; `None` when unreadable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assemblies: Option<Vec<Assembly>>,
    /// The ways out of T-SQL; `None` when they could not be read at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outside_tsql: Option<OutsideTsql>,
}

/// The database identity as fence.DatabaseIdentity records it and as
/// `sys.database_recovery_status` shows it now (see
/// [`crate::identity`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityReading {
    /// The recorded recovery fork; `None` when none is recorded.
    pub recorded: Option<uuid::Uuid>,
    /// The current recovery fork; `None` where the engine shows none.
    pub current: Option<uuid::Uuid>,
}

/// What the engine does that its catalog cannot show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Engine {
    /// Whether a procedure reaches tables of its own owner without the
    /// caller's permission being checked (SQL Server: yes).
    pub chains_ownership: bool,
    /// Azure SQL Database: no sysadmin and no CONTROL SERVER; the server
    /// admin and the Microsoft Entra admin enter every database as `dbo`,
    /// and server roles are kept in `master`.
    pub azure_database: bool,
    /// The engine's own name for itself, for messages only.
    pub product: String,
    /// Babelfish: the fence procedures (`schema.name`, lower case) that run
    /// as their owner (PostgreSQL's SECURITY DEFINER), which stands in for
    /// ownership chaining there; `None` when unknown or not Babelfish.
    pub security_definer: Option<Vec<String>>,
}

impl Default for Engine {
    fn default() -> Self {
        Self {
            chains_ownership: true,
            azure_database: false,
            product: "SQL Server".into(),
            security_definer: None,
        }
    }
}

/// What decides whether the catalog shows the checking login everything.
/// Catalog views silently leave out the rows of securables a login has no
/// right on; database-level VIEW DEFINITION (and, where the engine has it,
/// VIEW SECURITY DEFINITION) or sysadmin show them all.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Visibility {
    /// The checking login is sysadmin: it passes every permission check,
    /// metadata included.
    pub sysadmin: bool,
    /// `VIEW DEFINITION` on the database, held or implied (CONTROL,
    /// db_owner), as `fn_my_permissions(NULL, 'DATABASE')` lists it; `None`
    /// on engines without that function (Babelfish).
    pub view_definition: Option<bool>,
    /// `VIEW SECURITY DEFINITION` on the database, likewise; `None` also on
    /// engines that do not have that permission (before SQL Server 2022,
    /// where VIEW DEFINITION covers security metadata).
    pub view_security_definition: Option<bool>,
}

/// `sys.databases` options of the checked database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseSettings {
    /// `TRUSTWORTHY ON`: code in this database may act at server level.
    pub trustworthy: bool,
    /// `DB_CHAINING ON`: ownership chains cross into other databases.
    pub db_chaining: bool,
}

impl Catalog {
    /// The object named `schema.name`, if the catalog has it: spelled
    /// exactly so, else as the default collation compares names. In a
    /// case-sensitive database `fence_api.ACQUIRE` may stand beside
    /// `fence_api.Acquire`, and the shipped one is the one spelled as shipped.
    pub fn object(&self, qualified: &str) -> Option<&Object> {
        self.objects
            .iter()
            .find(|o| o.qualified_name() == qualified)
            .or_else(|| self.objects.iter().find(|o| o.is(qualified)))
    }

    /// The principal called `name`.
    pub fn principal(&self, name: &str) -> Option<&Principal> {
        self.principals.iter().find(|p| p.name.eq_ignore_ascii_case(name))
    }

    /// The database principal `name` stands for: a principal of that name,
    /// else the user whose login (matched by SID) has that name.
    pub fn principal_or_login(&self, name: &str) -> Option<&Principal> {
        self.principal(name).or_else(|| {
            self.principals
                .iter()
                .find(|p| p.login.as_deref().is_some_and(|l| l.eq_ignore_ascii_case(name)))
        })
    }

    /// The owner of a schema.
    pub fn schema_owner(&self, schema: &str) -> Option<&str> {
        self.schemas
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(schema))
            .map(|s| s.owner.as_str())
    }

    /// The effective owner of an object: its own, else its schema's.
    pub fn owner_of<'a>(&'a self, object: &'a Object) -> Option<&'a str> {
        object.owner.as_deref().or_else(|| self.schema_owner(&object.schema))
    }

    /// The login that enters this database as `dbo` by owning it, when the
    /// catalog shows it.
    pub fn owner_login(&self) -> Option<&str> {
        self.principal("dbo").and_then(|p| p.login.as_deref())
    }
}
