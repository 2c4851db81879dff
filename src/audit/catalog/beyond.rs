//! What reaches the fence by ways beyond grants and memberships: expressions
//! on the fence tables that call functions, the keys that sign modules, and
//! the ways out of T-SQL (Agent steps of other subsystems, xp_cmdshell,
//! startup procedures, assemblies, external data sources) that the catalog
//! shows but whose reach it cannot follow.

use serde::{Deserialize, Serialize};

/// A CHECK constraint, DEFAULT constraint or computed column of a table:
/// its expression runs inside every write to the table, the shipped
/// procedures' included.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableExpression {
    /// `schema.name` of the table.
    pub table: String,
    /// `CHECK`, `DEFAULT` or `COMPUTED`.
    pub kind: String,
    /// The constraint's or the column's name.
    pub name: String,
    /// The expression's text.
    pub definition: String,
}

/// A certificate or asymmetric key of the database. ADD SIGNATURE needs
/// only CONTROL on the key (and ALTER on the module), and the key's private
/// key: whoever owns or controls it may sign a module, which then runs with
/// the rights of the user (and, at server level, the login) mapped to the
/// key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SigningKey {
    /// `CERTIFICATE` or `ASYMMETRIC KEY`.
    pub key: String,
    /// Its name.
    pub name: String,
    /// The database principal that owns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The user mapped to it (`CREATE USER ... FROM CERTIFICATE`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The login mapped to a key of the same thumbprint, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub login: Option<String>,
    /// Whether the database holds its private key
    /// (`pvt_key_encryption_type` other than `NA`): without it no one here
    /// can sign with it, ADD SIGNATURE taking only a signature made
    /// elsewhere. `None` when not read: then it may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<bool>,
}

/// A user assembly of the database (`sys.assemblies`): whoever may alter it
/// (its owner, CONTROL or ALTER on it, ALTER ANY ASSEMBLY) replaces the code
/// of every CLR module it holds (ALTER ASSEMBLY ... FROM), SAFE ones
/// included, whose code runs inside T-SQL with the rights of whoever or
/// whatever runs the module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assembly {
    /// Its name.
    pub name: String,
    /// The database principal that owns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// `SAFE_ACCESS`, `EXTERNAL_ACCESS` or `UNSAFE_ACCESS`.
    pub permission_set: String,
}

/// The ways out of T-SQL the catalog shows: each read is listed, and each
/// part that could not be read says what reading it needs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OutsideTsql {
    /// What was found.
    pub items: Vec<OutsideItem>,
    /// What could not be read.
    pub unread: Vec<Unread>,
}

/// One way out of T-SQL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutsideItem {
    /// What kind of way it is.
    pub kind: OutsideKind,
    /// Its name (`job step`, `login`, `master.dbo.proc`, assembly, data source).
    pub name: String,
    /// What it runs as or connects with, when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The kinds of way out of T-SQL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutsideKind {
    /// A SQL Server Agent step of a subsystem other than T-SQL (CmdExec,
    /// PowerShell, SSIS, ...), run as a proxy or the Agent's account.
    AgentStep,
    /// A login or role other than sysadmin that may run `xp_cmdshell`
    /// (EXECUTE granted in master); its detail ends `; off now` while the
    /// option is off, which whoever holds ALTER SETTINGS turns on.
    XpCmdshell,
    /// A login or role other than sysadmin that may run the OLE Automation
    /// procedures (EXECUTE on `sp_OACreate` granted in master); `; off now`
    /// likewise while `Ole Automation Procedures` is off.
    OleAutomation,
    /// A procedure in master that runs at every start-up (`sp_procoption`).
    StartupProcedure,
    /// A user assembly with EXTERNAL_ACCESS or UNSAFE permission set.
    Assembly,
    /// An external data source: a connection out of the database.
    ExternalDataSource,
}

/// A part the checking login could not read, and what reading it needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unread {
    /// What could not be read.
    pub what: String,
    /// The view or right that would show it.
    pub needs: String,
}
