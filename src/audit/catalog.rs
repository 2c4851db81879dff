//! A plain snapshot of what the catalog shows about one database: the input of
//! the rules. Built by [`read_catalog`](super::read_catalog) from a server, or
//! by hand (or from JSON) in tests, so every rule can be tried without one.

use serde::{Deserialize, Serialize};

/// Everything the rules look at, by name rather than by id so a fixture reads
/// like the T-SQL that would produce it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Catalog {
    /// The database the snapshot was taken of.
    pub database: String,
    /// Facts about the engine that no catalog view states.
    pub engine: Engine,
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
    /// Tables, modules and synonyms, with module definitions.
    pub objects: Vec<Object>,
    /// What modules reference (`sys.sql_expression_dependencies`); `None` when
    /// the engine does not keep it.
    pub dependencies: Option<Vec<Dependency>>,
    /// The deploy runner's journal (`fence.DeployedProcedure`); `None` when
    /// the database has none.
    pub deployed: Option<Vec<DeployedProcedure>>,
    /// Server-level facts about the logins behind database users; `None` when
    /// the checking login cannot see them all.
    pub server: Option<ServerFacts>,
}

/// What the engine does that its catalog cannot show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Engine {
    /// Whether a procedure reaches tables of its own owner without the
    /// caller's permission being checked (SQL Server: yes).
    pub chains_ownership: bool,
    /// The engine's own name for itself, for messages only.
    pub product: String,
}

impl Default for Engine {
    fn default() -> Self {
        Self {
            chains_ownership: true,
            product: "SQL Server".into(),
        }
    }
}

/// `sys.databases` options of the checked database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseSettings {
    /// `TRUSTWORTHY ON`: code in this database may act at server level.
    pub trustworthy: bool,
    /// `DB_CHAINING ON`: ownership chains cross into other databases.
    pub db_chaining: bool,
}

/// A database principal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Principal {
    /// Its name in the database.
    pub name: String,
    /// User or role.
    pub kind: PrincipalKind,
    /// The server login it maps to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<String>,
}

/// The kinds of database principal the rules distinguish.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    /// A user (SQL, Windows, external, or without login).
    User,
    /// A database role, fixed or user-defined.
    Role,
    /// An application role.
    ApplicationRole,
}

/// `member` belongs directly to `role`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    /// The role.
    pub role: String,
    /// The user or role in it.
    pub member: String,
}

/// One row of `sys.database_permissions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permission {
    /// Who holds (or is denied) it.
    pub grantee: String,
    /// The permission name as the catalog spells it (`UPDATE`, `CREATE PROCEDURE`).
    pub permission: String,
    /// Grant, grant with grant option, or deny.
    #[serde(default)]
    pub state: PermissionState,
    /// What it is on.
    pub on: Securable,
}

/// Whether a permission row grants or denies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionState {
    /// `GRANT`.
    #[default]
    Grant,
    /// `GRANT ... WITH GRANT OPTION`.
    GrantWithGrantOption,
    /// `DENY`.
    Deny,
}

/// What a permission is on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "snake_case")]
pub enum Securable {
    /// The database itself: the permission reaches every object in it.
    Database,
    /// A schema: the permission reaches every object in it.
    Schema {
        /// Schema name.
        schema: String,
    },
    /// An object, or one column of it.
    Object {
        /// Schema name.
        schema: String,
        /// Object name.
        name: String,
        /// The column, for a column-level permission.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        column: Option<String>,
    },
    /// A database principal (`IMPERSONATE ON USER::x`, `ALTER ON ROLE::x`).
    Principal {
        /// Principal name.
        name: String,
    },
}

/// A schema and its owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// Schema name.
    pub name: String,
    /// Owning principal.
    pub owner: String,
}

/// A table, module or synonym.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Object {
    /// Schema name.
    pub schema: String,
    /// Object name.
    pub name: String,
    /// What it is.
    pub kind: ObjectKind,
    /// The owner when set on the object itself; `None` means the schema owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// For a trigger, the `schema.name` of the table it fires on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The module's text (`sys.sql_modules.definition`), or a synonym's base
    /// object; `None` when hidden (encrypted, or no VIEW DEFINITION).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
    /// The server's hash of `definition`, computed as the deploy runner
    /// computes the hash it records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_hash: Option<String>,
    /// The principal named by `WITH EXECUTE AS`, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execute_as: Option<String>,
}

impl Object {
    /// `schema.name`.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    /// Whether this is `schema.name`, compared as the default collation does.
    pub fn is(&self, qualified: &str) -> bool {
        match qualified.split_once('.') {
            Some((s, n)) => self.schema.eq_ignore_ascii_case(s) && self.name.eq_ignore_ascii_case(n),
            None => false,
        }
    }
}

/// The object kinds the rules tell apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// A user table.
    Table,
    /// A stored procedure.
    Procedure,
    /// A view.
    View,
    /// A scalar or table-valued function.
    Function,
    /// A DML trigger.
    Trigger,
    /// A synonym: an alias that a module can write through.
    Synonym,
}

impl ObjectKind {
    /// Whether objects of this kind have T-SQL that runs (or, for a synonym,
    /// that stands in for another object).
    pub fn is_module(self) -> bool {
        !matches!(self, ObjectKind::Table)
    }
}

/// `referencing` (a module, `schema.name`) names `referenced` (`schema.name`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dependency {
    /// The module.
    pub referencing: String,
    /// What it names.
    pub referenced: String,
}

/// One row of the deploy runner's journal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployedProcedure {
    /// `schema.name`.
    pub name: String,
    /// The hash of the server's definition right after the deploy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_hash: Option<String>,
}

/// Server roles and server permissions of logins.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerFacts {
    /// Server role memberships (`sysadmin`, user-defined server roles).
    pub role_members: Vec<Membership>,
    /// Granted server permissions, by login or server role.
    pub permissions: Vec<ServerPermission>,
    /// Why `permissions` could not be read, when it could not: then an empty
    /// list proves nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions_unreadable: Option<String>,
}

/// A server-level permission granted to a login or server role.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerPermission {
    /// The login or server role.
    pub grantee: String,
    /// The permission (`CONTROL SERVER`).
    pub permission: String,
}

impl Catalog {
    /// The object named `schema.name`, if the catalog has it.
    pub fn object(&self, qualified: &str) -> Option<&Object> {
        self.objects.iter().find(|o| o.is(qualified))
    }

    /// The principal called `name`.
    pub fn principal(&self, name: &str) -> Option<&Principal> {
        self.principals.iter().find(|p| p.name.eq_ignore_ascii_case(name))
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
}
