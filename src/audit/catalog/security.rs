//! Principals, memberships, schemas and the permissions between them.

use serde::{Deserialize, Serialize};

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
    /// What kind of login that is (`sys.server_principals.type`), when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login_kind: Option<LoginKind>,
    /// A role's owner (`owning_principal_id`): it may add and drop members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// A user's default schema, where its unqualified names resolve first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_schema: Option<String>,
    /// How a user authenticates (`authentication_type`), when the engine
    /// says: only a contained user with a password has one to reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication: Option<UserAuthentication>,
}

impl Principal {
    /// A principal with nothing but a name and kind.
    pub fn new(name: impl Into<String>, kind: PrincipalKind) -> Self {
        Self {
            name: name.into(),
            kind,
            login: None,
            login_kind: None,
            owner: None,
            default_schema: None,
            authentication: None,
        }
    }
}

/// How a database user authenticates (`sys.database_principals.
/// authentication_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UserAuthentication {
    /// `NONE` (0): WITHOUT LOGIN, or mapped to a certificate or key: no one
    /// signs in as it, and it has no password.
    NoLogin,
    /// `INSTANCE` (1): through its server login.
    Instance,
    /// `DATABASE` (2): a contained user with a password of its own.
    Database,
    /// `WINDOWS` (3): a contained Windows user or group, with no password here.
    Windows,
    /// `EXTERNAL` (4): a Microsoft Entra user or group, with no password here.
    External,
}

impl UserAuthentication {
    /// From `authentication_type`; `None` for a value the engine does not
    /// document (Babelfish answers -1).
    pub fn from_type(t: i32) -> Option<Self> {
        Some(match t {
            0 => UserAuthentication::NoLogin,
            1 => UserAuthentication::Instance,
            2 => UserAuthentication::Database,
            3 => UserAuthentication::Windows,
            4 => UserAuthentication::External,
            _ => return None,
        })
    }
}

/// How a login authenticates, as `sys.server_principals.type` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoginKind {
    /// A SQL login (`S`).
    Sql,
    /// A Windows login (`U`): it also carries the rights of every Windows
    /// group it belongs to, which no catalog view lists.
    Windows,
    /// A Windows group login (`G`).
    WindowsGroup,
    /// A Microsoft Entra login (`E`): it carries its Entra groups' rights.
    External,
    /// A Microsoft Entra group login (`X`).
    ExternalGroup,
    /// Mapped to a certificate or asymmetric key (`C`, `K`): no one signs in with it.
    Key,
}

impl LoginKind {
    /// From `sys.server_principals.type`.
    pub fn from_type(t: &str) -> Option<Self> {
        Some(match t.trim() {
            "S" => LoginKind::Sql,
            "U" => LoginKind::Windows,
            "G" => LoginKind::WindowsGroup,
            "E" => LoginKind::External,
            "X" => LoginKind::ExternalGroup,
            "C" | "K" => LoginKind::Key,
            _ => return None,
        })
    }

    /// Whether a login of this kind holds its groups' rights besides its own.
    pub fn carries_groups(self) -> bool {
        matches!(self, LoginKind::Windows | LoginKind::External)
    }

    /// Whether this is a group of logins.
    pub fn is_group(self) -> bool {
        matches!(self, LoginKind::WindowsGroup | LoginKind::ExternalGroup)
    }
}

/// The kinds of database principal the rules distinguish.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrincipalKind {
    /// A user (SQL, Windows, external, or without login).
    User,
    /// A user for a Windows or Microsoft Entra group (type `G` or `X`): its
    /// members are logins the catalog does not list, and each may hold
    /// rights through other groups that the catalog cannot connect to it.
    Group,
    /// A user mapped to a certificate or an asymmetric key (type `C` or
    /// `K`): code signed with that key holds its rights, but no one signs in
    /// as it or impersonates it ("EXECUTE AS": the name cannot be a
    /// certificate or key), and it has no password.
    KeyMapped,
    /// A database role, fixed or user-defined.
    Role,
    /// An application role: whoever knows its password holds its rights.
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
    /// A certificate, asymmetric or symmetric key (`CONTROL ON
    /// CERTIFICATE::x`): control of a signing key is the right to sign a
    /// module with its user's rights.
    Key {
        /// `CERTIFICATE`, `ASYMMETRIC KEY` or `SYMMETRIC KEY`.
        key: String,
        /// Its name.
        name: String,
    },
    /// Any other securable class (a type, an XML schema collection, a
    /// Service Broker object, ...), by its `class_desc`: none of them
    /// reaches the fence tables.
    Other {
        /// `sys.database_permissions.class_desc`.
        class_desc: String,
        /// Its name, when the reader could resolve it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
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
