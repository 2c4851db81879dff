//! Expressions on the tables, the keys that sign modules, and the ways out
//! of T-SQL: what the catalog shows of the paths beyond grants.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{Assembly, OutsideItem, OutsideKind, OutsideTsql, SigningKey, TableExpression, Unread};
use super::query::{Query, Reading};
use super::rows::{int, required, text};

/// DEFAULT constraints and computed columns, with their text. The table
/// each belongs to is named from its id (OBJECT_NAME), not by a join with
/// sys.tables: on Babelfish that view and the column views are functions
/// over the whole database, and a plan that joins them per row takes
/// minutes in a database of thousands of tables.
const DEFAULTS_AND_COMPUTED: &str = "SELECT N'DEFAULT',
                CAST(OBJECT_SCHEMA_NAME(c.parent_object_id) + N'.' + OBJECT_NAME(c.parent_object_id) AS nvarchar(520)),
                CAST(c.name AS nvarchar(256)), CAST(c.definition AS nvarchar(max))
           FROM sys.default_constraints AS c WHERE OBJECT_NAME(c.parent_object_id) IS NOT NULL
         UNION ALL
         SELECT N'COMPUTED', CAST(OBJECT_SCHEMA_NAME(c.object_id) + N'.' + OBJECT_NAME(c.object_id) AS nvarchar(520)),
                CAST(c.name AS nvarchar(256)), CAST(c.definition AS nvarchar(max))
           FROM sys.computed_columns AS c WHERE OBJECT_NAME(c.object_id) IS NOT NULL";

/// CHECK constraints, DEFAULT constraints and computed columns, with their
/// text. Babelfish 4.2 fails the whole batch ("unrecognized node type: 27")
/// rendering a CHECK's `definition` that holds an IN list, as the fence
/// tables' do, and no TRY/CATCH stops it: there the CHECK texts come from
/// PostgreSQL's own rendering (pg_get_expr), inside EXEC so that SQL Server
/// never compiles it.
fn table_expressions_sql() -> String {
    format!(
        "IF SERVERPROPERTY('Babelfish') IS NOT NULL
         EXEC (N'SELECT CAST(N''CHECK'' AS nvarchar(16)),
                        CAST(OBJECT_SCHEMA_NAME(c.parent_object_id) + N''.'' + OBJECT_NAME(c.parent_object_id)
                             AS nvarchar(520)),
                        CAST(c.name AS nvarchar(256)),
                        CAST(pg_catalog.pg_get_expr(k.conbin, k.conrelid) AS nvarchar(max))
                   FROM sys.check_constraints AS c
                   JOIN pg_catalog.pg_constraint AS k ON CAST(k.oid AS int) = c.object_id
                  WHERE OBJECT_NAME(c.parent_object_id) IS NOT NULL
                 UNION ALL
                 {}')
     ELSE
         SELECT CAST(N'CHECK' AS nvarchar(16)),
                CAST(OBJECT_SCHEMA_NAME(c.parent_object_id) + N'.' + OBJECT_NAME(c.parent_object_id) AS nvarchar(520)),
                CAST(c.name AS nvarchar(256)), CAST(c.definition AS nvarchar(max))
           FROM sys.check_constraints AS c WHERE OBJECT_NAME(c.parent_object_id) IS NOT NULL
         UNION ALL
         {DEFAULTS_AND_COMPUTED}",
        DEFAULTS_AND_COMPUTED.replace('\'', "''")
    )
}

pub(super) fn table_expressions() -> Query {
    Query::optional("table expressions", table_expressions_sql(), read_table_expressions)
}

fn read_table_expressions(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    reading.catalog.table_expressions = match rows {
        None => None,
        Some(rows) => Some(
            rows.iter()
                .map(|row| {
                    Ok(TableExpression {
                        kind: required(row, 0, what)?,
                        table: required(row, 1, what)?,
                        name: required(row, 2, what)?,
                        definition: text(row, 3, what)?.unwrap_or_default(),
                    })
                })
                .collect::<Result<_, AuditError>>()?,
        ),
    };
    Ok(())
}

/// Certificates and asymmetric keys, their owners, the users mapped to them,
/// the logins of the same thumbprint, and whether the database holds their
/// private key.
const SIGNING_KEYS: &str = "SELECT CAST(N'CERTIFICATE' AS nvarchar(16)), CAST(c.name AS nvarchar(256)),
                CAST(USER_NAME(c.principal_id) AS nvarchar(256)), CAST(u.name AS nvarchar(256)),
                CAST(SUSER_SNAME(c.sid) AS nvarchar(256)),
                CAST(CASE WHEN c.pvt_key_encryption_type = 'NA' THEN 0 ELSE 1 END AS int)
           FROM sys.certificates AS c LEFT JOIN sys.database_principals AS u ON u.sid = c.sid
         UNION ALL
         SELECT N'ASYMMETRIC KEY', CAST(k.name AS nvarchar(256)), CAST(USER_NAME(k.principal_id) AS nvarchar(256)),
                CAST(u.name AS nvarchar(256)), CAST(SUSER_SNAME(k.sid) AS nvarchar(256)),
                CAST(CASE WHEN k.pvt_key_encryption_type = 'NA' THEN 0 ELSE 1 END AS int)
           FROM sys.asymmetric_keys AS k LEFT JOIN sys.database_principals AS u ON u.sid = k.sid";

pub(super) fn signing_keys() -> Query {
    Query::optional("certificate and key owners", SIGNING_KEYS, read_signing_keys)
}

fn read_signing_keys(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    reading.catalog.signing_keys = match rows {
        None => None,
        Some(rows) => Some(
            rows.iter()
                .map(|row| {
                    Ok(SigningKey {
                        key: required(row, 0, what)?,
                        name: required(row, 1, what)?,
                        owner: text(row, 2, what)?,
                        user: text(row, 3, what)?,
                        login: text(row, 4, what)?,
                        private_key: int(row, 5, what)?.map(|k| k == 1),
                    })
                })
                .collect::<Result<_, AuditError>>()?,
        ),
    };
    Ok(())
}

/// The user assemblies, their owners and permission sets.
const ASSEMBLIES: &str = "SELECT CAST(a.name AS nvarchar(256)), CAST(USER_NAME(a.principal_id) AS nvarchar(256)),
                CAST(a.permission_set_desc AS nvarchar(60))
           FROM sys.assemblies AS a WHERE CAST(a.is_user_defined AS int) = 1";

pub(super) fn assemblies() -> Query {
    Query::optional("assemblies", ASSEMBLIES, read_assemblies)
}

fn read_assemblies(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    reading.catalog.assemblies = match rows {
        None => None,
        Some(rows) => Some(
            rows.iter()
                .map(|row| {
                    Ok(Assembly {
                        name: required(row, 0, what)?,
                        owner: text(row, 1, what)?,
                        permission_set: text(row, 2, what)?.unwrap_or_default(),
                    })
                })
                .collect::<Result<_, AuditError>>()?,
        ),
    };
    Ok(())
}

/// The ways out of T-SQL, as `(kind, name, detail)`; an `unread` row names
/// what a part needs. Babelfish keeps its equivalents (foreign servers,
/// extensions, COPY ... PROGRAM) in PostgreSQL's catalog; Azure SQL
/// Database has no Agent, xp_cmdshell or master to read.
const OUTSIDE_TSQL: &str = "IF SERVERPROPERTY('Babelfish') IS NOT NULL
         SELECT CAST(N'unread' AS nvarchar(32)),
                CAST(N'PostgreSQL foreign servers, extensions and server programs' AS nvarchar(256)),
                CAST(N'they live in PostgreSQL''s catalog (pg_foreign_server, pg_extension), outside the T-SQL catalog: \
read them there as a PostgreSQL superuser' AS nvarchar(4000))
     ELSE
     BEGIN
         DECLARE @fp_o TABLE (k nvarchar(32), n nvarchar(256), d nvarchar(4000));
         DECLARE @fp_sees bit = CASE WHEN IS_SRVROLEMEMBER(N'sysadmin') = 1
                                      OR HAS_PERMS_BY_NAME(NULL, NULL, N'VIEW ANY DEFINITION') = 1 THEN 1 ELSE 0 END;
         -- This database's own parts first: after a statement naming msdb's
         -- or master's catalog, Babelfish would read that database's.
         INSERT INTO @fp_o
         SELECT N'assembly', CAST(a.name AS nvarchar(256)), CAST(a.permission_set_desc AS nvarchar(4000))
           FROM sys.assemblies AS a WHERE a.is_user_defined = 1 AND a.permission_set <> 1;
         IF OBJECT_ID(N'sys.external_data_sources') IS NOT NULL
             INSERT INTO @fp_o
             SELECT N'data source', CAST(d.name AS nvarchar(256)),
                    CAST(d.type_desc + N' ' + d.location + ISNULL(N' with credential ' + c.name, N'') AS nvarchar(4000))
               FROM sys.external_data_sources AS d
               LEFT JOIN sys.database_scoped_credentials AS c ON c.credential_id = d.credential_id;
         IF SERVERPROPERTY('EngineEdition') <> 5
         BEGIN
             IF HAS_DBACCESS(N'msdb') = 1 AND HAS_PERMS_BY_NAME(N'msdb.dbo.sysjobsteps', N'OBJECT', N'SELECT') = 1
                AND HAS_PERMS_BY_NAME(N'msdb.dbo.sysproxies', N'OBJECT', N'SELECT') = 1
                 INSERT INTO @fp_o
                 SELECT N'agent step', CAST(j.name + N' step ' + CAST(s.step_id AS nvarchar(12)) AS nvarchar(256)),
                        CAST(s.subsystem + N' as ' + ISNULL(N'proxy ' + p.name, N'the SQL Server Agent service account')
                             AS nvarchar(4000))
                   FROM msdb.dbo.sysjobsteps AS s JOIN msdb.dbo.sysjobs AS j ON j.job_id = s.job_id
                   LEFT JOIN msdb.dbo.sysproxies AS p ON p.proxy_id = s.proxy_id
                  WHERE s.subsystem <> N'TSQL';
             ELSE
                 INSERT INTO @fp_o VALUES (N'unread', N'SQL Server Agent steps other than T-SQL',
                     N'SELECT on msdb.dbo.sysjobsteps and msdb.dbo.sysproxies (SQLAgentReaderRole in msdb, or sysadmin)');
             IF @fp_sees = 0
                 INSERT INTO @fp_o VALUES (N'unread', N'xp_cmdshell grants and start-up procedures in master',
                     N'VIEW ANY DEFINITION, or sysadmin');
             ELSE
             BEGIN
                 -- Read whether the option is on or off: whoever holds ALTER
                 -- SETTINGS turns it on.
                 INSERT INTO @fp_o
                 SELECT CASE WHEN p.major_id = OBJECT_ID(N'master.sys.xp_cmdshell') THEN N'xp_cmdshell'
                             ELSE N'ole automation' END,
                        CAST(g.name AS nvarchar(256)),
                        CAST(CASE WHEN p.major_id <> OBJECT_ID(N'master.sys.xp_cmdshell')
                                  THEN N'creates COM objects in the server process, as its service account'
                                  WHEN EXISTS (SELECT 1 FROM sys.credentials
                                                WHERE name = N'##xp_cmdshell_proxy_account##')
                                  THEN N'runs commands as the xp_cmdshell proxy account'
                                  ELSE N'no proxy account is set: the call fails for it' END
                             + CASE WHEN EXISTS (SELECT 1 FROM sys.configurations
                                                  WHERE name = CASE WHEN p.major_id = OBJECT_ID(N'master.sys.xp_cmdshell')
                                                                    THEN N'xp_cmdshell'
                                                                    ELSE N'Ole Automation Procedures' END
                                                    AND CAST(value_in_use AS int) = 1)
                                    THEN N'' ELSE N'; off now' END AS nvarchar(4000))
                   FROM master.sys.database_permissions AS p
                   JOIN master.sys.database_principals AS g ON g.principal_id = p.grantee_principal_id
                  WHERE p.class = 1 AND p.permission_name = N'EXECUTE' AND p.state IN ('G', 'W')
                    AND p.major_id IN (OBJECT_ID(N'master.sys.xp_cmdshell'), OBJECT_ID(N'master.sys.sp_OACreate'));
                 INSERT INTO @fp_o
                 SELECT N'startup', CAST(N'master.' + SCHEMA_NAME(p.schema_id) + N'.' + p.name AS nvarchar(256)), NULL
                   FROM master.sys.procedures AS p WHERE p.is_auto_executed = 1;
             END
         END
         SELECT k, n, d FROM @fp_o;
     END";

pub(super) fn outside_tsql() -> Query {
    Query::optional("ways out of T-SQL", OUTSIDE_TSQL, read_outside_tsql)
}

fn read_outside_tsql(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    let Some(rows) = rows else {
        reading.catalog.outside_tsql = None;
        return Ok(());
    };
    let mut outside = OutsideTsql::default();
    for row in rows {
        let name = required(row, 1, what)?;
        let detail = text(row, 2, what)?;
        let kind = match required(row, 0, what)?.as_str() {
            "unread" => {
                outside.unread.push(Unread {
                    what: name,
                    needs: detail.unwrap_or_default(),
                });
                continue;
            }
            "agent step" => OutsideKind::AgentStep,
            "xp_cmdshell" => OutsideKind::XpCmdshell,
            "ole automation" => OutsideKind::OleAutomation,
            "startup" => OutsideKind::StartupProcedure,
            "assembly" => OutsideKind::Assembly,
            "data source" => OutsideKind::ExternalDataSource,
            other => {
                return Err(AuditError::UnexpectedShape {
                    what,
                    reason: format!("unknown kind {other}"),
                });
            }
        };
        outside.items.push(OutsideItem { kind, name, detail });
    }
    reading.catalog.outside_tsql = Some(outside);
    Ok(())
}
