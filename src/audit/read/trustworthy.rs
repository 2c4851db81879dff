//! The other TRUSTWORTHY databases on the server, their owners and who holds
//! there what lets a module run as its owner.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{OtherDatabase, OtherDatabaseUser};
use super::query::{Query, Reading};
use super::rows::{int, required, text};

/// Every other TRUSTWORTHY database, its owner, and who holds there what
/// lets a module run as its owner: db_owner, db_ddladmin or db_securityadmin
/// (through nested roles), or CONTROL, ALTER, IMPERSONATE on dbo, CONTROL or
/// ALTER on any schema dbo owns (a procedure there WITH EXECUTE AS OWNER
/// runs as dbo) and the like, public's grants included (a `public` row:
/// every user there holds them), read with one dynamic query over the
/// databases the checking login may read. Babelfish has no TRUSTWORTHY
/// databases and no INSERT ... EXEC: it only lists them.
const TRUSTWORTHY: &str = "IF SERVERPROPERTY('Babelfish') IS NULL
     BEGIN
         DECLARE @fp_owners TABLE (db nvarchar(256), usr nvarchar(256), lgn nvarchar(256), via nvarchar(256),
                                   what nvarchar(256));
         DECLARE @fp_sql nvarchar(max) = N'';
         SELECT @fp_sql = @fp_sql + N';WITH o (id, via, what) AS (
                    SELECT rm.member_principal_id, rm.member_principal_id, CAST(r.name AS nvarchar(256))
                      FROM ' + QUOTENAME(d.name) + N'.sys.database_role_members AS rm
                      JOIN ' + QUOTENAME(d.name) + N'.sys.database_principals AS r
                        ON r.principal_id = rm.role_principal_id
                       AND r.name IN (N''db_owner'', N''db_ddladmin'', N''db_securityadmin'')
                    UNION ALL
                    SELECT p.grantee_principal_id, p.grantee_principal_id,
                           CAST(p.permission_name + CASE WHEN p.class = 4 THEN N'' ON USER::dbo''
                                WHEN p.class = 3 THEN N'' ON SCHEMA::'' + (SELECT s.name FROM ' + QUOTENAME(d.name)
                                     + N'.sys.schemas AS s WHERE s.schema_id = p.major_id) ELSE N'''' END
                                AS nvarchar(256))
                      FROM ' + QUOTENAME(d.name) + N'.sys.database_permissions AS p
                     WHERE p.state IN (''G'', ''W'')
                       AND ((p.class = 0 AND p.permission_name IN (N''CONTROL'', N''ALTER'', N''ALTER ANY SCHEMA'',
                                N''ALTER ANY ROLE'', N''ALTER ANY USER''))
                         OR (p.class = 4 AND p.major_id = 1
                             AND p.permission_name IN (N''IMPERSONATE'', N''CONTROL'', N''ALTER''))
                         OR (p.class = 3 AND p.permission_name IN (N''CONTROL'', N''ALTER'')
                             AND EXISTS (SELECT 1 FROM ' + QUOTENAME(d.name) + N'.sys.schemas AS s
                                          WHERE s.schema_id = p.major_id AND s.principal_id = 1)))
                    UNION ALL
                    SELECT rm.member_principal_id, o.via, o.what
                      FROM ' + QUOTENAME(d.name) + N'.sys.database_role_members AS rm
                      JOIN o ON rm.role_principal_id = o.id)
                SELECT ' + QUOTENAME(d.name, N'''') + N', m.name, SUSER_SNAME(m.sid), v.name, o.what
                  FROM o
                  JOIN ' + QUOTENAME(d.name) + N'.sys.database_principals AS m ON m.principal_id = o.id
                  JOIN ' + QUOTENAME(d.name) + N'.sys.database_principals AS v ON v.principal_id = o.via
                 WHERE m.type <> ''R'' OR m.principal_id = 0;'
           FROM sys.databases AS d
          WHERE d.is_trustworthy_on = 1 AND d.database_id <> DB_ID() AND HAS_DBACCESS(d.name) = 1
            AND (IS_SRVROLEMEMBER(N'sysadmin') = 1 OR HAS_PERMS_BY_NAME(d.name, N'DATABASE', N'VIEW DEFINITION') = 1);
         IF @fp_sql <> N'' INSERT INTO @fp_owners EXEC sp_executesql @fp_sql;
         SELECT CAST(d.name AS nvarchar(256)), CAST(SUSER_SNAME(d.owner_sid) AS nvarchar(256)),
                CAST(CASE WHEN HAS_DBACCESS(d.name) = 1
                           AND (IS_SRVROLEMEMBER(N'sysadmin') = 1
                                OR HAS_PERMS_BY_NAME(d.name, N'DATABASE', N'VIEW DEFINITION') = 1)
                          THEN 1 ELSE 0 END AS int),
                CAST(o.usr AS nvarchar(256)), CAST(o.lgn AS nvarchar(256)), CAST(o.via AS nvarchar(256)),
                CAST(o.what AS nvarchar(256))
           FROM sys.databases AS d
           LEFT JOIN @fp_owners AS o ON o.db = d.name
          WHERE d.is_trustworthy_on = 1 AND d.database_id <> DB_ID();
     END
     ELSE
         SELECT CAST(d.name AS nvarchar(256)), CAST(SUSER_SNAME(d.owner_sid) AS nvarchar(256)), CAST(0 AS int),
                CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256)),
                CAST(NULL AS nvarchar(256))
           FROM sys.databases AS d
          WHERE d.is_trustworthy_on = 1 AND d.database_id <> DB_ID()";

pub(super) fn trustworthy_databases() -> Query {
    Query::optional("other TRUSTWORTHY databases", TRUSTWORTHY, read_trustworthy_databases)
}

fn read_trustworthy_databases(
    rows: Option<&[Row]>,
    what: &'static str,
    reading: &mut Reading,
) -> Result<(), AuditError> {
    reading.catalog.trustworthy_databases = match rows {
        None => None,
        Some(rows) => Some(trustworthy(rows, what)?),
    };
    Ok(())
}

/// One row per TRUSTWORTHY database and db_owner member (or one row with no
/// member when the checking login could not read them).
fn trustworthy(rows: &[Row], what: &'static str) -> Result<Vec<OtherDatabase>, AuditError> {
    let mut databases: Vec<OtherDatabase> = Vec::new();
    for row in rows {
        let name = required(row, 0, what)?;
        let readable = int(row, 2, what)? == Some(1);
        let at = match databases.iter().position(|d| d.name == name) {
            Some(at) => at,
            None => {
                databases.push(OtherDatabase {
                    name: name.clone(),
                    owner: text(row, 1, what)?,
                    db_owners: readable.then(Vec::new),
                });
                databases.len() - 1
            }
        };
        if let (Some(owners), Some(user)) = (databases[at].db_owners.as_mut(), text(row, 3, what)?) {
            owners.push(OtherDatabaseUser {
                via: text(row, 5, what)?.unwrap_or_else(|| user.clone()),
                login: text(row, 4, what)?,
                right: text(row, 6, what)?.unwrap_or_else(|| "db_owner".into()),
                user,
            });
        }
    }
    Ok(databases)
}
