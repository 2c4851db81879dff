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
}

/// A schema and its owner.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schema {
    /// Schema name.
    pub name: String,
    /// Owning principal.
    pub owner: String,
}
