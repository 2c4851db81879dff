//! The server around the database: its roles, permissions and configuration,
//! its DDL and logon triggers, and the linked servers it can reach.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{
    AvailabilityGroupPermission, LinkedLogin, LinkedServer, LinkedServers, Membership, ServerFacts, ServerPermission,
    ServerRoleOwner, ServerSettings, ServerTrigger,
};
use super::query::{Query, Reading};
use super::rows::{int, required, text};

/// The visibility marker, the server role memberships, the group logins and
/// every server role (a role without members included).
const SERVER_ROLES: &str = "SELECT N'visible', CAST(CASE WHEN IS_SRVROLEMEMBER(N'sysadmin') = 1
                                         OR HAS_PERMS_BY_NAME(NULL, NULL, N'VIEW ANY DEFINITION') = 1
                                         THEN N'1' ELSE N'0' END AS nvarchar(256)), CAST(NULL AS nvarchar(256)),
                            CAST(NULL AS nvarchar(256))
                     UNION ALL
                     SELECT N'member', CAST(r.name AS nvarchar(256)), CAST(m.name AS nvarchar(256)),
                            CAST(NULL AS nvarchar(256))
                       FROM sys.server_role_members AS rm
                       JOIN sys.server_principals AS r ON r.principal_id = rm.role_principal_id
                       JOIN sys.server_principals AS m ON m.principal_id = rm.member_principal_id
                     UNION ALL
                     SELECT N'group', CAST(g.name AS nvarchar(256)), CAST(NULL AS nvarchar(256)),
                            CAST(NULL AS nvarchar(256))
                       FROM sys.server_principals AS g WHERE g.type IN ('G', 'X')
                     UNION ALL
                     SELECT N'role', CAST(r.name AS nvarchar(256)),
                            CAST(CASE WHEN r.is_fixed_role = 0 THEN SUSER_NAME(r.owning_principal_id) END
                                 AS nvarchar(256)),
                            CAST(NULL AS nvarchar(256))
                       FROM sys.server_principals AS r WHERE r.type = 'R'";

/// Every granted or denied server permission: server-wide ones, those on a
/// login or server role (class 101), and those on an availability group
/// (class 108, named through the replica its `major_id` is the metadata id
/// of, or `#id` where this instance holds no replica of it), and the owners
/// of the groups (`sys.availability_replicas.owner_sid`: "ALTER
/// AUTHORIZATION" leaves no permission row, yet the owner holds CONTROL).
/// All of them, not a chosen list:
/// the rules decide which reach the fence, and a permission left unread is
/// one no rule can weigh. A DENY is read so that it cuts the edge it
/// documentedly cuts, and no other.
const SERVER_PERMISSIONS: &str = "SELECT CASE WHEN p.state = 'D' THEN N'deny' ELSE N'permission' END,
                            CAST(p.permission_name AS nvarchar(256)),
                            CAST(g.name AS nvarchar(256)),
                            CAST(CASE WHEN p.class = 101 THEN SUSER_NAME(p.major_id) END AS nvarchar(256))
                       FROM sys.server_permissions AS p
                       JOIN sys.server_principals AS g ON g.principal_id = p.grantee_principal_id
                      WHERE p.state IN ('G', 'W', 'D')
                        AND p.class IN (100, 101)
                     UNION ALL
                     SELECT CASE WHEN p.state = 'D' THEN N'group deny' ELSE N'group permission' END,
                            CAST(p.permission_name AS nvarchar(256)),
                            CAST(g.name AS nvarchar(256)),
                            CAST(ISNULL((SELECT TOP (1) ag.name FROM sys.availability_replicas AS r
                                           JOIN sys.availability_groups AS ag ON ag.group_id = r.group_id
                                          WHERE r.replica_metadata_id = p.major_id),
                                        N'#' + CAST(p.major_id AS nvarchar(12))) AS nvarchar(256))
                       FROM sys.server_permissions AS p
                       JOIN sys.server_principals AS g ON g.principal_id = p.grantee_principal_id
                      WHERE p.state IN ('G', 'W', 'D') AND p.class = 108
                     UNION ALL
                     SELECT DISTINCT N'group owner', CAST(N'CONTROL' AS nvarchar(256)),
                            CAST(SUSER_SNAME(r.owner_sid) AS nvarchar(256)), CAST(ag.name AS nvarchar(256))
                       FROM sys.availability_replicas AS r
                       JOIN sys.availability_groups AS ag ON ag.group_id = r.group_id
                      WHERE SUSER_SNAME(r.owner_sid) IS NOT NULL";

/// Without VIEW ANY DEFINITION a login sees only its own server roles, so an
/// empty answer would prove nothing; the first row says which. An engine
/// without sys.server_permissions (Babelfish) gets a marker row instead of
/// those grants: naming the view would fail the batch.
pub(super) fn server_roles_and_permissions() -> Query {
    let sql = format!(
        "IF OBJECT_ID(N'sys.server_permissions') IS NULL
                     {SERVER_ROLES}
                     UNION ALL
                     SELECT N'no permission catalog', CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256)),
                            CAST(NULL AS nvarchar(256))
                 ELSE
                     {SERVER_ROLES}
                     UNION ALL
                     {SERVER_PERMISSIONS}"
    );
    Query::optional("server roles and permissions", sql, read_server_roles_and_permissions)
}

fn read_server_roles_and_permissions(
    rows: Option<&[Row]>,
    what: &'static str,
    reading: &mut Reading,
) -> Result<(), AuditError> {
    let catalog = &mut reading.catalog;
    catalog.server = match rows {
        Some(rows) if rows.iter().any(|r| is_visible_marker(r, what)) => {
            Some(server(rows, what, &catalog.engine.product)?)
        }
        _ => None,
    };
    Ok(())
}

/// The marker row saying the login can see every login's server roles.
fn is_visible_marker(row: &Row, what: &'static str) -> bool {
    matches!((text(row, 0, what), text(row, 1, what)), (Ok(Some(k)), Ok(Some(v))) if k == "visible" && v == "1")
}

/// Server role members and permissions; the marker row of an engine without
/// a server permission catalog makes an empty list of permissions unknown.
fn server(rows: &[Row], what: &'static str, product: &str) -> Result<ServerFacts, AuditError> {
    let mut facts = ServerFacts::default();
    for row in rows {
        match text(row, 0, what)?.as_deref() {
            Some("member") => facts.role_members.push(Membership {
                role: required(row, 1, what)?,
                member: required(row, 2, what)?,
            }),
            Some("permission") => facts.permissions.push(ServerPermission {
                permission: required(row, 1, what)?,
                grantee: required(row, 2, what)?,
                on_login: text(row, 3, what)?,
            }),
            Some("deny") => facts.denies.push(ServerPermission {
                permission: required(row, 1, what)?,
                grantee: required(row, 2, what)?,
                on_login: text(row, 3, what)?,
            }),
            Some(kind @ ("group permission" | "group deny")) => {
                facts.availability_groups.push(AvailabilityGroupPermission {
                    permission: required(row, 1, what)?,
                    grantee: required(row, 2, what)?,
                    group: required(row, 3, what)?,
                    denied: kind == "group deny",
                    owner: false,
                })
            }
            Some("group owner") => facts.availability_groups.push(AvailabilityGroupPermission {
                permission: required(row, 1, what)?,
                grantee: required(row, 2, what)?,
                group: required(row, 3, what)?,
                denied: false,
                owner: true,
            }),
            Some("group") => facts.group_logins.push(required(row, 1, what)?),
            Some("role") => {
                let role: String = required(row, 1, what)?;
                if let Some(owner) = text(row, 2, what)?.filter(|o| !o.eq_ignore_ascii_case(&role)) {
                    facts.role_owners.push(ServerRoleOwner {
                        role: role.clone(),
                        owner,
                    });
                }
                facts.roles.push(role);
            }
            Some("no permission catalog") => {
                facts.permissions_unreadable = Some(format!(
                    "{product} has no server permission catalog (sys.server_permissions)"
                ));
            }
            _ => {}
        }
    }
    Ok(facts)
}

/// No row leaves it unknown. An engine that does not chain ownership
/// (Babelfish, which lists no such option) is not asked.
pub(super) fn server_configuration() -> Query {
    Query::optional(
        "server configuration",
        "IF SERVERPROPERTY('Babelfish') IS NULL
                 SELECT CAST(c.value_in_use AS int),
                        (SELECT CAST(cc.value_in_use AS int) FROM sys.configurations AS cc
                          WHERE cc.name = N'common criteria compliance enabled')
                   FROM sys.configurations AS c
                  WHERE c.name = N'cross db ownership chaining'
             ELSE
                 SELECT CAST(NULL AS int) WHERE 1 = 0",
        read_server_configuration,
    )
}

fn read_server_configuration(
    rows: Option<&[Row]>,
    what: &'static str,
    reading: &mut Reading,
) -> Result<(), AuditError> {
    reading.catalog.server_settings = match rows.and_then(|r| r.first()) {
        Some(row) => Some(ServerSettings {
            cross_db_ownership_chaining: int(row, 0, what)? == Some(1),
            // Only Enterprise and Developer editions list the option.
            common_criteria_compliance: int(row, 1, what)?.map(|v| v == 1),
        }),
        None => None,
    };
    Ok(())
}

/// Server DDL and logon triggers with their texts; a marker row says the
/// engine has no such catalog (Babelfish), where none can be ruled out.
const SERVER_TRIGGERS: &str = "IF OBJECT_ID(N'sys.server_triggers') IS NULL
         SELECT CAST(N'no catalog' AS nvarchar(16)), CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(max))
     ELSE
         SELECT CAST(N'trigger' AS nvarchar(16)), CAST(t.name AS nvarchar(256)), CAST(m.definition AS nvarchar(max))
           FROM sys.server_triggers AS t LEFT JOIN sys.server_sql_modules AS m ON m.object_id = t.object_id";

/// Read after the server roles: the triggers are part of what the server's
/// facts hold, and stay unknown when those could not be read.
pub(super) fn server_triggers() -> Query {
    Query::optional("server triggers", SERVER_TRIGGERS, read_server_triggers)
}

fn read_server_triggers(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    if let (Some(server), Some(rows)) = (reading.catalog.server.as_mut(), rows) {
        let mut triggers = Some(Vec::new());
        for row in rows {
            match (text(row, 0, what)?.as_deref(), triggers.as_mut()) {
                (Some("trigger"), Some(list)) => list.push(ServerTrigger {
                    name: required(row, 1, what)?,
                    definition: text(row, 2, what)?,
                }),
                _ => triggers = None,
            }
        }
        server.triggers = triggers;
    }
    Ok(())
}

/// The names this server answers to, its linked servers and their login
/// mappings; a `visible` row when the checking login sees them all.
const LINKED_SERVERS: &str = "SELECT CAST(N'visible' AS nvarchar(16)), CAST(NULL AS nvarchar(256)),
                CAST(NULL AS nvarchar(4000)), CAST(NULL AS int), CAST(NULL AS nvarchar(256))
          WHERE IS_SRVROLEMEMBER(N'sysadmin') = 1 OR HAS_PERMS_BY_NAME(NULL, NULL, N'VIEW ANY DEFINITION') = 1
     UNION ALL
     SELECT N'this', CAST(@@SERVERNAME AS nvarchar(256)), NULL, NULL, NULL
     UNION ALL
     SELECT N'this', CAST(CAST(SERVERPROPERTY('MachineName') AS nvarchar(128))
                          + ISNULL(N'\\' + CAST(SERVERPROPERTY('InstanceName') AS nvarchar(128)), N'') AS nvarchar(256)),
            NULL, NULL, NULL
     UNION ALL
     SELECT N'server', CAST(s.name AS nvarchar(256)), CAST(s.data_source AS nvarchar(4000)), NULL, NULL
       FROM sys.servers AS s WHERE s.is_linked = 1
     UNION ALL
     SELECT N'login', CAST(s.name AS nvarchar(256)),
            CAST(CASE WHEN l.local_principal_id <> 0 THEN SUSER_NAME(l.local_principal_id) END AS nvarchar(4000)),
            CAST(l.uses_self_credential AS int), CAST(l.remote_name AS nvarchar(256))
       FROM sys.linked_logins AS l JOIN sys.servers AS s ON s.server_id = l.server_id WHERE s.is_linked = 1";

pub(super) fn linked_servers() -> Query {
    Query::optional("linked servers", LINKED_SERVERS, read_linked_servers)
}

fn read_linked_servers(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    reading.catalog.linked_servers = match rows {
        Some(rows) => linked(rows, what)?,
        None => None,
    };
    Ok(())
}

/// The linked servers, or `None` without the row saying the checking login
/// sees them all.
fn linked(rows: &[Row], what: &'static str) -> Result<Option<LinkedServers>, AuditError> {
    let mut linked = LinkedServers::default();
    let mut visible = false;
    let mut logins = Vec::new();
    for row in rows {
        let name = text(row, 1, what)?;
        match (text(row, 0, what)?.as_deref(), name) {
            (Some("visible"), _) => visible = true,
            (Some("this"), Some(name)) if !name.is_empty() => linked.this_server.push(name),
            (Some("server"), Some(name)) => linked.servers.push(LinkedServer {
                name,
                data_source: text(row, 2, what)?.filter(|d| !d.is_empty()),
                logins: Vec::new(),
            }),
            (Some("login"), Some(name)) => {
                let login = LinkedLogin {
                    local_login: text(row, 2, what)?,
                    uses_self_credential: int(row, 3, what)? == Some(1),
                    remote_login: text(row, 4, what)?,
                };
                logins.push((name, login));
            }
            _ => {}
        }
    }
    // A UNION ALL keeps no order: mappings are matched once every server is in.
    for (name, login) in logins {
        if let Some(s) = linked.servers.iter_mut().find(|s| s.name == name) {
            s.logins.push(login);
        }
    }
    Ok(visible.then_some(linked))
}

#[cfg(test)]
mod tests {
    use tiberius::{ColumnData, ColumnType, Row};

    use super::*;

    fn row(cells: [Option<&str>; 4]) -> Row {
        cells
            .iter()
            .enumerate()
            .fold(Row::builder(), |row, (i, cell)| {
                row.column(
                    format!("c{i}"),
                    ColumnType::NVarchar,
                    ColumnData::String(cell.map(|c| c.to_string().into())),
                )
            })
            .build()
    }

    #[test]
    fn an_availability_groups_owner_is_read_as_holding_control_on_it() {
        let rows = [
            row([Some("visible"), Some("1"), None, None]),
            row([
                Some("group owner"),
                Some("CONTROL"),
                Some("app_login"),
                Some("ag_orders"),
            ]),
        ];
        let facts = server(&rows, "server roles and permissions", "SQL Server").unwrap();
        assert_eq!(facts.permissions, []);
        assert_eq!(
            facts.availability_groups,
            [AvailabilityGroupPermission {
                grantee: "app_login".into(),
                permission: "CONTROL".into(),
                group: "ag_orders".into(),
                denied: false,
                owner: true,
            }]
        );
    }

    #[test]
    fn grants_and_denies_on_one_availability_group_are_kept_apart_from_server_wide_ones() {
        let rows = [
            row([Some("visible"), Some("1"), None, None]),
            row([
                Some("group permission"),
                Some("ALTER"),
                Some("ha_operator"),
                Some("ag_orders"),
            ]),
            row([Some("group deny"), Some("CONTROL"), Some("auditor"), Some("ag_orders")]),
        ];
        let facts = server(&rows, "server roles and permissions", "SQL Server").unwrap();
        assert_eq!(facts.permissions, []);
        assert_eq!(facts.denies, []);
        assert_eq!(
            facts.availability_groups,
            [
                AvailabilityGroupPermission {
                    grantee: "ha_operator".into(),
                    permission: "ALTER".into(),
                    group: "ag_orders".into(),
                    denied: false,
                    owner: false,
                },
                AvailabilityGroupPermission {
                    grantee: "auditor".into(),
                    permission: "CONTROL".into(),
                    group: "ag_orders".into(),
                    denied: true,
                    owner: false,
                },
            ]
        );
    }
}
