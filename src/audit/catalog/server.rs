//! What the server shows about the logins behind database users, its
//! configuration, and the other databases a service could act from.

use serde::{Deserialize, Serialize};

use super::Membership;

/// Server roles and server permissions of logins.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerFacts {
    /// Server role memberships (`sysadmin`, `##MS_DatabaseManager##`,
    /// user-defined server roles). The permissions of fixed server roles are
    /// not listed in `permissions`: the rules know them.
    pub role_members: Vec<Membership>,
    /// The server roles (`sys.server_principals`, type `R`), fixed and
    /// user-defined, with members or without: a name here is a server role,
    /// never a login. Empty when the reader did not list them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<String>,
    /// The owners of user-defined server roles (`owning_principal_id`): an
    /// owner, or a member of an owning role, adds members. Empty when the
    /// reader did not list them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub role_owners: Vec<ServerRoleOwner>,
    /// Granted server permissions, by login or server role.
    pub permissions: Vec<ServerPermission>,
    /// Denied server permissions (`sys.server_permissions`, state `D`), by
    /// login or server role, read with the grants. A DENY binds its grantee
    /// and the members of a denied role, never sysadmin; an owner is bound
    /// by none on what it owns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denies: Vec<ServerPermission>,
    /// Permissions granted or denied on one availability group
    /// (`sys.server_permissions` class 108), apart from `permissions`: none
    /// of them is server-wide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub availability_groups: Vec<AvailabilityGroupPermission>,
    /// Why `permissions` could not be read, when it could not: then an empty
    /// list proves nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions_unreadable: Option<String>,
    /// The logins that are Windows or Microsoft Entra groups (type `G`, `X`):
    /// whose members they are, no catalog view says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group_logins: Vec<String>,
    /// Server-level DDL and logon triggers (`sys.server_triggers`); `None`
    /// when they could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers: Option<Vec<ServerTrigger>>,
}

/// The owner of a user-defined server role.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerRoleOwner {
    /// The server role.
    pub role: String,
    /// The login or server role that owns it.
    pub owner: String,
}

/// A server DDL or logon trigger: it fires for every login, the deployer
/// and the services included, and runs as that login unless it says EXECUTE AS.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerTrigger {
    /// Its name.
    pub name: String,
    /// Its text (`sys.server_sql_modules`); `None` when hidden or CLR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition: Option<String>,
}

/// A server-level permission granted to a login or server role.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerPermission {
    /// The login or server role.
    pub grantee: String,
    /// The permission (`CONTROL SERVER`, `IMPERSONATE`).
    pub permission: String,
    /// The login it is on, for a permission on a login
    /// (`IMPERSONATE ON LOGIN::sa`); `None` for a server-wide one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_login: Option<String>,
}

/// A permission granted or denied on one availability group ("GRANT
/// Availability Group Permissions": ALTER, CONNECT, CONTROL, TAKE
/// OWNERSHIP, VIEW DEFINITION).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AvailabilityGroupPermission {
    /// The login or server role.
    pub grantee: String,
    /// The permission (`ALTER`, `CONTROL`).
    pub permission: String,
    /// The availability group it is on.
    pub group: String,
    /// A DENY rather than a GRANT.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub denied: bool,
    /// The grantee owns the group (`sys.availability_replicas.owner_sid`):
    /// "ALTER AUTHORIZATION" makes it so with no row in
    /// `sys.server_permissions`, and an owner holds CONTROL on what it owns
    /// (`permission`), bound by no DENY there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub owner: bool,
}

/// Server configuration options (`sys.configurations`, value in use).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerSettings {
    /// `cross db ownership chaining`: every database chains ownership
    /// across databases, whatever its own DB_CHAINING says.
    pub cross_db_ownership_chaining: bool,
    /// `common criteria compliance enabled`: a table-level DENY takes
    /// precedence over a column-level GRANT. Off (the default), a column
    /// GRANT overrides a table DENY, kept for backward compatibility.
    /// `None` when it could not be read: the check then assumes it off, the
    /// weaker of the two.
    #[serde(default)]
    pub common_criteria_compliance: Option<bool>,
}

/// Another TRUSTWORTHY database of the server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtherDatabase {
    /// Its name.
    pub name: String,
    /// The login that owns it (its `dbo`).
    pub owner: Option<String>,
    /// The users in its `db_owner` role, directly or through nested roles;
    /// `None` when the checking login cannot read them there.
    pub db_owners: Option<Vec<OtherDatabaseUser>>,
}

/// A user of another database who is in its `db_owner` role.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtherDatabaseUser {
    /// The user's name there.
    pub user: String,
    /// The login it maps to, if any.
    pub login: Option<String>,
    /// The direct member of the role it holds `right` through: itself, or a
    /// role; the grantee, for a permission.
    pub via: String,
    /// What it holds there: `db_owner` (the default), `db_ddladmin`,
    /// `db_securityadmin`, or a database permission such as `IMPERSONATE ON
    /// USER::dbo`, `CONTROL` or `ALTER ANY SCHEMA`.
    #[serde(default = "db_owner")]
    pub right: String,
}

fn db_owner() -> String {
    "db_owner".into()
}
