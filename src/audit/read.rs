//! Takes a [`Catalog`] snapshot from a live database: one batch of catalog
//! queries, one round trip, however many objects the database holds.

use std::collections::HashMap;

use tiberius::Row;

use super::AuditError;
use super::catalog::{
    Catalog, DatabaseSettings, Dependency, DeployedProcedure, Engine, Membership, Object, ObjectKind, Permission,
    PermissionState, Principal, PrincipalKind, Schema, Securable, ServerFacts, ServerPermission,
};
use super::definition_hash::definition_hash_sql;
use crate::Connection;

/// One catalog query. Optional ones read views some engines lack; their
/// absence becomes "cannot verify" for the rules that need them.
struct Query {
    what: &'static str,
    sql: String,
    required: bool,
}

/// The visibility marker and the server role memberships.
const SERVER_ROLES: &str = "SELECT N'visible', CAST(CASE WHEN IS_SRVROLEMEMBER(N'sysadmin') = 1
                                         OR HAS_PERMS_BY_NAME(NULL, NULL, N'VIEW ANY DEFINITION') = 1
                                         THEN N'1' ELSE N'0' END AS nvarchar(256)), CAST(NULL AS nvarchar(256))
                     UNION ALL
                     SELECT N'member', CAST(r.name AS nvarchar(256)), CAST(m.name AS nvarchar(256))
                       FROM sys.server_role_members AS rm
                       JOIN sys.server_principals AS r ON r.principal_id = rm.role_principal_id
                       JOIN sys.server_principals AS m ON m.principal_id = rm.member_principal_id";

fn queries() -> Vec<Query> {
    let q = |what, sql: &str, required| Query {
        what,
        sql: sql.to_string(),
        required,
    };
    vec![
        // No catalog view says whether an engine chains ownership; the engine
        // announcing itself is the only evidence there is.
        q(
            "the database and engine",
            "SELECT CAST(DB_NAME() AS nvarchar(256)),
                    CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL THEN 1 ELSE 0 END AS int),
                    CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL THEN N'SQL Server'
                              ELSE N'Babelfish for PostgreSQL' END AS nvarchar(64))",
            true,
        ),
        q(
            "database options",
            "SELECT CAST(d.is_trustworthy_on AS int), CAST(d.is_db_chaining_on AS int)
               FROM sys.databases AS d WHERE d.database_id = DB_ID()",
            false,
        ),
        q(
            "database principals",
            "SELECT CAST(dp.name AS nvarchar(256)), CAST(dp.type AS nvarchar(2)) FROM sys.database_principals AS dp",
            true,
        ),
        q(
            "the logins behind database users",
            "SELECT CAST(dp.name AS nvarchar(256)), CAST(sp.name AS nvarchar(256))
               FROM sys.database_principals AS dp JOIN sys.server_principals AS sp ON sp.sid = dp.sid",
            false,
        ),
        q(
            "role memberships",
            "SELECT CAST(r.name AS nvarchar(256)), CAST(m.name AS nvarchar(256))
               FROM sys.database_role_members AS rm
               JOIN sys.database_principals AS r ON r.principal_id = rm.role_principal_id
               JOIN sys.database_principals AS m ON m.principal_id = rm.member_principal_id",
            true,
        ),
        q(
            "database permissions",
            "SELECT CAST(USER_NAME(p.grantee_principal_id) AS nvarchar(256)),
                    CAST(p.permission_name AS nvarchar(128)), CAST(p.state AS nvarchar(1)), CAST(p.class AS int),
                    CAST(CASE p.class WHEN 3 THEN SCHEMA_NAME(p.major_id)
                                      WHEN 1 THEN OBJECT_SCHEMA_NAME(p.major_id) END AS nvarchar(256)),
                    CAST(CASE p.class WHEN 1 THEN OBJECT_NAME(p.major_id)
                                      WHEN 4 THEN USER_NAME(p.major_id) END AS nvarchar(256)),
                    CAST(CASE WHEN p.class = 1 AND p.minor_id > 0
                              THEN COL_NAME(p.major_id, p.minor_id) END AS nvarchar(256))
               FROM sys.database_permissions AS p
              WHERE p.class IN (0, 1, 3, 4) AND p.state IN ('G', 'W', 'D')",
            true,
        ),
        q(
            "schemas",
            "SELECT CAST(s.name AS nvarchar(256)), CAST(USER_NAME(s.principal_id) AS nvarchar(256)) FROM sys.schemas AS s",
            true,
        ),
        // Objects and module texts are read apart and joined here by id:
        // on Babelfish each catalog view is costly per row, and joining the
        // two in SQL costs more than reading both.
        q(
            "objects",
            "SELECT o.object_id, CAST(SCHEMA_NAME(o.schema_id) AS nvarchar(256)), CAST(o.name AS nvarchar(256)),
                    CAST(o.type AS nvarchar(2)),
                    -- Babelfish answers USER_NAME(NULL) with the current user;
                    -- a NULL owner means the schema's.
                    CAST(CASE WHEN o.principal_id IS NOT NULL THEN USER_NAME(o.principal_id) END AS nvarchar(256)),
                    CAST(CASE WHEN o.parent_object_id <> 0
                              THEN OBJECT_SCHEMA_NAME(o.parent_object_id) + N'.' + OBJECT_NAME(o.parent_object_id)
                         END AS nvarchar(520))
               FROM sys.objects AS o
              WHERE o.is_ms_shipped = 0 AND o.type IN ('U', 'P', 'V', 'FN', 'IF', 'TF', 'TR')",
            true,
        ),
        // Hashing is limited to the code schemas: only shipped procedures
        // are compared with the deploy journal.
        Query {
            what: "module definitions",
            sql: format!(
                "SELECT m.object_id, CAST(m.definition AS nvarchar(max)),
                        -- NULL is EXECUTE AS CALLER (and USER_NAME(NULL) the current user on Babelfish).
                        CAST(CASE WHEN m.execute_as_principal_id IS NULL THEN NULL
                                  WHEN m.execute_as_principal_id = -2 THEN N'OWNER'
                                  ELSE USER_NAME(m.execute_as_principal_id) END AS nvarchar(256)),
                        CASE WHEN OBJECT_SCHEMA_NAME(m.object_id) IN (N'fence_api', N'fence_admin') THEN {} END
                   FROM sys.sql_modules AS m",
                definition_hash_sql()
            ),
            required: true,
        },
        q(
            "synonyms",
            "SELECT CAST(SCHEMA_NAME(s.schema_id) AS nvarchar(256)), CAST(s.name AS nvarchar(256)),
                    CAST(CASE WHEN s.principal_id IS NOT NULL THEN USER_NAME(s.principal_id) END AS nvarchar(256)),
                    CAST(s.base_object_name AS nvarchar(1035))
               FROM sys.synonyms AS s",
            false,
        ),
        q(
            "references to the fence schema",
            "SELECT CAST(OBJECT_SCHEMA_NAME(d.referencing_id) + N'.' + OBJECT_NAME(d.referencing_id) AS nvarchar(520)),
                    CAST(COALESCE(d.referenced_schema_name, OBJECT_SCHEMA_NAME(d.referenced_id)) + N'.'
                         + d.referenced_entity_name AS nvarchar(520))
               FROM sys.sql_expression_dependencies AS d
              WHERE d.referenced_schema_name = N'fence' OR OBJECT_SCHEMA_NAME(d.referenced_id) = N'fence'",
            false,
        ),
        // A marker row tells "no journal table" from "an empty journal".
        q(
            "the deploy journal",
            "IF OBJECT_ID(N'fence.DeployedProcedure', N'U') IS NULL
                 SELECT CAST(0 AS int), CAST(NULL AS nvarchar(256)), CAST(NULL AS varbinary(32))
             ELSE
                 SELECT CAST(1 AS int), CAST(ProcedureName AS nvarchar(256)), CAST(DefinitionHash AS varbinary(32))
                   FROM fence.DeployedProcedure",
            false,
        ),
        // Without VIEW ANY DEFINITION a login sees only its own server roles,
        // so an empty answer would prove nothing; the first row says which.
        // An engine without sys.server_permissions (Babelfish) gets a marker
        // row instead of those grants: naming the view would fail the batch.
        Query {
            what: "server roles and permissions",
            sql: format!(
                "IF OBJECT_ID(N'sys.server_permissions') IS NULL
                     {SERVER_ROLES}
                     UNION ALL
                     SELECT N'no permission catalog', CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256))
                 ELSE
                     {SERVER_ROLES}
                     UNION ALL
                     SELECT N'permission', CAST(p.permission_name AS nvarchar(256)), CAST(g.name AS nvarchar(256))
                       FROM sys.server_permissions AS p
                       JOIN sys.server_principals AS g ON g.principal_id = p.grantee_principal_id
                      WHERE p.state IN ('G', 'W') AND p.permission_name = N'CONTROL SERVER'"
            ),
            required: false,
        },
    ]
}

/// Reads the catalog of the connection's current database.
///
/// All queries go to the server as one batch; only when that batch fails
/// (an engine without one of the views) are they sent one by one, so that
/// the views the engine has still count. A required view that fails is an
/// error; an optional one leaves its part of the snapshot `None`.
pub async fn read_catalog(connection: &mut Connection) -> Result<Catalog, AuditError> {
    read_catalog_counted(connection).await.map(|(catalog, _)| catalog)
}

/// [`read_catalog`], also returning how many round trips it took: 1, unless
/// the engine failed the batch and the queries went one by one.
pub async fn read_catalog_counted(connection: &mut Connection) -> Result<(Catalog, usize), AuditError> {
    let queries = queries();
    let batch: String = queries.iter().map(|q| format!("{};\n", q.sql)).collect();
    let mut round_trips = 1;
    let results: Vec<Option<Vec<Row>>> = match run(connection, &batch).await {
        Ok(sets) if sets.len() == queries.len() => sets.into_iter().map(Some).collect(),
        _ => {
            let mut sets = Vec::with_capacity(queries.len());
            for q in &queries {
                round_trips += 1;
                match run(connection, &q.sql).await {
                    Ok(mut result) if result.len() == 1 => sets.push(result.pop()),
                    Ok(result) if q.required => {
                        return Err(AuditError::UnexpectedShape {
                            what: q.what,
                            reason: format!("{} result sets instead of 1", result.len()),
                        });
                    }
                    Err(source) if q.required => {
                        return Err(AuditError::Query { what: q.what, source });
                    }
                    _ => sets.push(None),
                }
            }
            sets
        }
    };
    let mut sets = results.into_iter().zip(&queries);
    let mut next = || {
        let (rows, q) = sets.next().expect("one result per query");
        (rows, q.what)
    };
    build(&mut next).map(|catalog| (catalog, round_trips))
}

async fn run(connection: &mut Connection, sql: &str) -> tiberius::Result<Vec<Vec<Row>>> {
    connection.simple_query(sql).await?.into_results().await
}

type Next<'a> = dyn FnMut() -> (Option<Vec<Row>>, &'static str) + 'a;

fn build(next: &mut Next) -> Result<Catalog, AuditError> {
    let mut catalog = Catalog::default();

    let (rows, what) = next();
    let row = rows
        .as_deref()
        .and_then(|r| r.first())
        .ok_or(AuditError::UnexpectedShape {
            what,
            reason: "no row".into(),
        })?;
    catalog.database = text(row, 0, what)?.unwrap_or_default();
    catalog.engine = Engine {
        chains_ownership: int(row, 1, what)? == Some(1),
        product: text(row, 2, what)?.unwrap_or_default(),
    };

    let (rows, what) = next();
    catalog.settings = match rows.as_deref().and_then(|r| r.first()) {
        Some(row) => Some(DatabaseSettings {
            trustworthy: int(row, 0, what)? == Some(1),
            db_chaining: int(row, 1, what)? == Some(1),
        }),
        None => None,
    };

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        let kind = match text(row, 1, what)?.as_deref().map(str::trim) {
            Some("R") => PrincipalKind::Role,
            Some("A") => PrincipalKind::ApplicationRole,
            _ => PrincipalKind::User,
        };
        catalog.principals.push(Principal {
            name: required(row, 0, what)?,
            kind,
            login: None,
        });
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        let user = required(row, 0, what)?;
        let login = text(row, 1, what)?;
        if let Some(p) = catalog
            .principals
            .iter_mut()
            .find(|p| p.name.eq_ignore_ascii_case(&user))
        {
            p.login = login;
        }
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        catalog.memberships.push(Membership {
            role: required(row, 0, what)?,
            member: required(row, 1, what)?,
        });
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        let on = match int(row, 3, what)? {
            Some(0) => Securable::Database,
            Some(3) => Securable::Schema {
                schema: required(row, 4, what)?,
            },
            Some(1) => Securable::Object {
                schema: required(row, 4, what)?,
                name: required(row, 5, what)?,
                column: text(row, 6, what)?,
            },
            Some(4) => Securable::Principal {
                name: required(row, 5, what)?,
            },
            _ => continue,
        };
        let state = match text(row, 2, what)?.as_deref() {
            Some("D") => PermissionState::Deny,
            Some("W") => PermissionState::GrantWithGrantOption,
            _ => PermissionState::Grant,
        };
        catalog.permissions.push(Permission {
            grantee: required(row, 0, what)?,
            permission: required(row, 1, what)?,
            state,
            on,
        });
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        catalog.schemas.push(Schema {
            name: required(row, 0, what)?,
            owner: text(row, 1, what)?.unwrap_or_default(),
        });
    }

    let (rows, what) = next();
    let mut by_id = HashMap::new();
    for row in rows.iter().flatten() {
        let kind = match text(row, 3, what)?.as_deref().map(str::trim) {
            Some("U") => ObjectKind::Table,
            Some("P") => ObjectKind::Procedure,
            Some("V") => ObjectKind::View,
            Some("TR") => ObjectKind::Trigger,
            _ => ObjectKind::Function,
        };
        if let Some(id) = int(row, 0, what)? {
            by_id.insert(id, catalog.objects.len());
        }
        catalog.objects.push(Object {
            schema: required(row, 1, what)?,
            name: required(row, 2, what)?,
            kind,
            owner: text(row, 4, what)?,
            parent: text(row, 5, what)?,
            definition: None,
            definition_hash: None,
            execute_as: None,
        });
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        let Some(&at) = int(row, 0, what)?.and_then(|id| by_id.get(&id)) else {
            continue;
        };
        let object = &mut catalog.objects[at];
        object.definition = text(row, 1, what)?;
        object.execute_as = text(row, 2, what)?;
        object.definition_hash = crate::deploy::hash_hex(row, 3);
    }

    let (rows, what) = next();
    for row in rows.iter().flatten() {
        catalog.objects.push(Object {
            schema: required(row, 0, what)?,
            name: required(row, 1, what)?,
            kind: ObjectKind::Synonym,
            owner: text(row, 2, what)?,
            parent: None,
            definition: text(row, 3, what)?,
            definition_hash: None,
            execute_as: None,
        });
    }

    let (rows, what) = next();
    catalog.dependencies = match rows {
        None => None,
        Some(rows) => Some(
            rows.iter()
                .map(|row| {
                    Ok(Dependency {
                        referencing: required(row, 0, what)?,
                        referenced: required(row, 1, what)?,
                    })
                })
                .collect::<Result<_, AuditError>>()?,
        ),
    };

    let (rows, what) = next();
    catalog.deployed = match rows {
        Some(rows) if rows.iter().all(|r| matches!(int(r, 0, what), Ok(Some(1)))) => Some(
            rows.iter()
                .map(|row| {
                    Ok(DeployedProcedure {
                        name: required(row, 1, what)?,
                        definition_hash: crate::deploy::hash_hex(row, 2),
                    })
                })
                .collect::<Result<_, AuditError>>()?,
        ),
        _ => None,
    };

    let (rows, what) = next();
    catalog.server = match rows {
        Some(rows) if rows.iter().any(|r| is_visible_marker(r, what)) => {
            let mut facts = ServerFacts::default();
            for row in &rows {
                match text(row, 0, what)?.as_deref() {
                    Some("member") => facts.role_members.push(Membership {
                        role: required(row, 1, what)?,
                        member: required(row, 2, what)?,
                    }),
                    Some("permission") => facts.permissions.push(ServerPermission {
                        permission: required(row, 1, what)?,
                        grantee: required(row, 2, what)?,
                    }),
                    Some("no permission catalog") => {
                        facts.permissions_unreadable = Some(format!(
                            "{} has no server permission catalog (sys.server_permissions)",
                            catalog.engine.product
                        ));
                    }
                    _ => {}
                }
            }
            Some(facts)
        }
        _ => None,
    };
    Ok(catalog)
}

/// The marker row saying the login can see every login's server roles.
fn is_visible_marker(row: &Row, what: &'static str) -> bool {
    matches!((text(row, 0, what), text(row, 1, what)), (Ok(Some(k)), Ok(Some(v))) if k == "visible" && v == "1")
}

fn text(row: &Row, i: usize, what: &'static str) -> Result<Option<String>, AuditError> {
    row.try_get::<&str, usize>(i)
        .map(|v| v.map(str::to_string))
        .map_err(|e| AuditError::UnexpectedShape {
            what,
            reason: format!("column {i}: {e}"),
        })
}

fn required(row: &Row, i: usize, what: &'static str) -> Result<String, AuditError> {
    text(row, i, what)?.ok_or(AuditError::UnexpectedShape {
        what,
        reason: format!("column {i} is NULL"),
    })
}

fn int(row: &Row, i: usize, what: &'static str) -> Result<Option<i32>, AuditError> {
    row.try_get::<i32, usize>(i).map_err(|e| AuditError::UnexpectedShape {
        what,
        reason: format!("column {i}: {e}"),
    })
}
