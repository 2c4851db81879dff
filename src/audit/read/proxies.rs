//! SQL Server Agent proxies, the account of each one's credential, and who
//! may use them, from msdb. Babelfish and Azure SQL Database have no Agent;
//! a login that cannot read msdb's proxy tables gets a row saying so.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{AgentProxy, ProxyUser, ProxyUserKind};
use super::query::{Query, Reading};
use super::rows::{int, required, text};

/// `(kind, proxy, name, user kind)`: a `proxy` row with its credential's
/// account, a `user` row per principal it is granted to (0 a login, 1 a
/// server role, 2 an msdb role), or one `none` or `unread` row.
const PROXIES: &str = "IF SERVERPROPERTY('Babelfish') IS NOT NULL OR SERVERPROPERTY('EngineEdition') = 5
         SELECT CAST(N'none' AS nvarchar(16)), CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256)),
                CAST(NULL AS int)
     ELSE IF HAS_DBACCESS(N'msdb') = 1
             AND HAS_PERMS_BY_NAME(N'msdb.dbo.sysproxies', N'OBJECT', N'SELECT') = 1
             AND HAS_PERMS_BY_NAME(N'msdb.dbo.sysproxylogin', N'OBJECT', N'SELECT') = 1
         SELECT CAST(N'proxy' AS nvarchar(16)), CAST(p.name AS nvarchar(256)),
                CAST(c.credential_identity AS nvarchar(256)), CAST(NULL AS int)
           FROM msdb.dbo.sysproxies AS p LEFT JOIN sys.credentials AS c ON c.credential_id = p.credential_id
          WHERE p.enabled = 1
         UNION ALL
         SELECT N'user', CAST(p.name AS nvarchar(256)),
                CAST(CASE WHEN l.flags = 2
                          THEN (SELECT d.name FROM msdb.sys.database_principals AS d WHERE d.sid = l.sid)
                          ELSE SUSER_SNAME(l.sid) END AS nvarchar(256)),
                CAST(l.flags AS int)
           FROM msdb.dbo.sysproxylogin AS l JOIN msdb.dbo.sysproxies AS p ON p.proxy_id = l.proxy_id
          WHERE p.enabled = 1
     ELSE
         SELECT N'unread', CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256)), CAST(NULL AS int)";

pub(super) fn agent_proxies() -> Query {
    Query::optional("Agent proxies", PROXIES, read_agent_proxies)
}

fn read_agent_proxies(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    reading.catalog.agent_proxies = match rows {
        Some(rows) => proxies(rows, what)?,
        None => None,
    };
    Ok(())
}

fn proxies(rows: &[Row], what: &'static str) -> Result<Option<Vec<AgentProxy>>, AuditError> {
    let mut proxies: Vec<AgentProxy> = Vec::new();
    for row in rows {
        match text(row, 0, what)?.as_deref() {
            Some("none") => return Ok(Some(Vec::new())),
            Some("proxy") => proxies.push(AgentProxy {
                name: required(row, 1, what)?,
                identity: text(row, 2, what)?,
                users: Vec::new(),
            }),
            Some("user") => {}
            _ => return Ok(None),
        }
    }
    // A UNION ALL keeps no order: users are matched once every proxy is in.
    for row in rows {
        if text(row, 0, what)?.as_deref() != Some("user") {
            continue;
        }
        let proxy = required(row, 1, what)?;
        let Some(name) = text(row, 2, what)? else { continue };
        let kind = match int(row, 3, what)? {
            Some(1) => ProxyUserKind::ServerRole,
            Some(2) => ProxyUserKind::MsdbRole,
            _ => ProxyUserKind::Login,
        };
        if let Some(p) = proxies.iter_mut().find(|p| p.name == proxy) {
            p.users.push(ProxyUser { name, kind });
        }
    }
    Ok(Some(proxies))
}
