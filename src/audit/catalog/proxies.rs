//! SQL Server Agent proxies: a CmdExec, PowerShell or SSIS step that names
//! one runs as the Windows account of its credential ("Create a SQL Server
//! Agent proxy"), and whoever the proxy is granted to may name it in a step
//! of a job of its own.

use serde::{Deserialize, Serialize};

/// An enabled Agent proxy (`msdb.dbo.sysproxies`), its credential's account
/// and who may use it (`msdb.dbo.sysproxylogin`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentProxy {
    /// Its name.
    pub name: String,
    /// The Windows account its credential signs in as
    /// (`sys.credentials.credential_identity`); `None` when not visible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
    /// Who may use it, besides sysadmin.
    #[serde(default)]
    pub users: Vec<ProxyUser>,
}

/// One principal a proxy is granted to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProxyUser {
    /// The login, server role or msdb role.
    pub name: String,
    /// Which of the three it is.
    pub kind: ProxyUserKind,
}

/// The kinds of principal a proxy is granted to (`sysproxylogin.flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProxyUserKind {
    /// A login (0).
    Login,
    /// A server role (1).
    ServerRole,
    /// A role of msdb (2), whose members the audit does not read.
    MsdbRole,
}
