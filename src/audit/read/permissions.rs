//! The database permissions, and the names of the keys some of them are on.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{Permission, PermissionState, Securable};
use super::query::{Query, Reading};
use super::rows::{int, required, text};

pub(super) fn database_permissions() -> Query {
    Query::required(
        "database permissions",
        "SELECT CAST(USER_NAME(p.grantee_principal_id) AS nvarchar(256)),
                    CAST(p.permission_name AS nvarchar(128)), CAST(p.state AS nvarchar(1)), CAST(p.class AS int),
                    CAST(CASE p.class WHEN 3 THEN SCHEMA_NAME(p.major_id)
                                      WHEN 1 THEN OBJECT_SCHEMA_NAME(p.major_id) END AS nvarchar(256)),
                    CAST(CASE p.class WHEN 1 THEN OBJECT_NAME(p.major_id)
                                      WHEN 4 THEN USER_NAME(p.major_id) END AS nvarchar(256)),
                    CAST(CASE WHEN p.class = 1 AND p.minor_id > 0
                              THEN COL_NAME(p.major_id, p.minor_id)
                         END AS nvarchar(256)),
                    CAST(p.class_desc AS nvarchar(60)), p.major_id
               FROM sys.database_permissions AS p
              WHERE p.state IN ('G', 'W', 'D')",
        read_database_permissions,
    )
}

fn read_database_permissions(
    rows: Option<&[Row]>,
    what: &'static str,
    reading: &mut Reading,
) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        if let Some(p) = permission(row, what)? {
            reading.catalog.permissions.push(p);
        }
    }
    Ok(())
}

fn permission(row: &Row, what: &'static str) -> Result<Option<Permission>, AuditError> {
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
        Some(class @ 24..=26) => Securable::Key {
            key: match class {
                24 => "SYMMETRIC KEY",
                25 => "CERTIFICATE",
                _ => "ASYMMETRIC KEY",
            }
            .into(),
            // The name is filled in from the key catalog; the id until then.
            name: format!("#{}", int(row, 8, what)?.unwrap_or_default()),
        },
        // An assembly: its name is filled in from the key catalog too.
        Some(5) => Securable::Other {
            class_desc: text(row, 7, what)?.unwrap_or_default(),
            name: Some(format!("#{}", int(row, 8, what)?.unwrap_or_default())),
        },
        // Kept, not dropped: a permission no rule weighs is still listed.
        _ => Securable::Other {
            class_desc: text(row, 7, what)?.unwrap_or_default(),
            name: None,
        },
    };
    let state = match text(row, 2, what)?.as_deref() {
        Some("D") => PermissionState::Deny,
        Some("W") => PermissionState::GrantWithGrantOption,
        _ => PermissionState::Grant,
    };
    Ok(Some(Permission {
        grantee: required(row, 0, what)?,
        permission: required(row, 1, what)?,
        state,
        on,
    }))
}

/// Names of the keys and assemblies permissions are on, by class and id:
/// Babelfish's sys.certificates has no certificate_id, so they are read
/// apart. Read after the permissions, whose `#id` it replaces with the name.
pub(super) fn keys() -> Query {
    Query::optional(
        "certificates and asymmetric keys",
        "IF SERVERPROPERTY('Babelfish') IS NULL
                 SELECT 25, c.certificate_id, CAST(c.name AS nvarchar(256)) FROM sys.certificates AS c
                 UNION ALL
                 SELECT 26, k.asymmetric_key_id, CAST(k.name AS nvarchar(256)) FROM sys.asymmetric_keys AS k
                 UNION ALL
                 SELECT 5, a.assembly_id, CAST(a.name AS nvarchar(256)) FROM sys.assemblies AS a
             ELSE
                 SELECT CAST(NULL AS int), CAST(NULL AS int), CAST(NULL AS nvarchar(256)) WHERE 1 = 0",
        read_keys,
    )
}

fn read_keys(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        let (Some(class), Some(id), Some(name)) = (int(row, 0, what)?, int(row, 1, what)?, text(row, 2, what)?) else {
            continue;
        };
        if class == 5 {
            for p in &mut reading.catalog.permissions {
                if let Securable::Other { name: Some(n), .. } = &mut p.on
                    && *n == format!("#{id}")
                {
                    *n = name.clone();
                }
            }
            continue;
        }
        let key = if class == 25 { "CERTIFICATE" } else { "ASYMMETRIC KEY" };
        for p in &mut reading.catalog.permissions {
            if let Securable::Key { key: k, name: n } = &mut p.on
                && k == key
                && *n == format!("#{id}")
            {
                *n = name.clone();
            }
        }
    }
    Ok(())
}
