//! Who is who in the database: what the checking login itself may see, the
//! database principals, the logins behind them and the role memberships.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{LoginKind, Membership, Principal, PrincipalKind, UserAuthentication, Visibility};
use super::query::{Query, Reading};
use super::rows::{int, required, text};

/// The checking login's own database permissions that decide what the
/// catalog shows it. Babelfish has no fn_my_permissions; there only
/// sysadmin can be established.
const VISIBILITY: &str = "IF SERVERPROPERTY('Babelfish') IS NULL
         SELECT CAST(N'held' AS nvarchar(16)), CAST(p.permission_name AS nvarchar(128))
           FROM fn_my_permissions(NULL, N'DATABASE') AS p
          WHERE p.permission_name IN (N'VIEW DEFINITION', N'VIEW SECURITY DEFINITION')
         UNION ALL
         SELECT N'exists', CAST(b.permission_name AS nvarchar(128))
           FROM sys.fn_builtin_permissions(N'DATABASE') AS b
          WHERE b.permission_name = N'VIEW SECURITY DEFINITION'
         UNION ALL
         SELECT N'sysadmin', CAST(IS_SRVROLEMEMBER(N'sysadmin') AS nvarchar(128))
         UNION ALL
         SELECT N'listed', CAST(NULL AS nvarchar(128))
     ELSE
         SELECT CAST(N'sysadmin' AS nvarchar(16)), CAST(IS_SRVROLEMEMBER(N'sysadmin') AS nvarchar(128))";

pub(super) fn visibility() -> Query {
    Query::optional("the checking login's view of the catalog", VISIBILITY, read_visibility)
}

/// What the checking login sees. A `listed` row says fn_my_permissions ran
/// (an empty list there is an answer: the login lacks both); an `exists` row
/// says the engine has VIEW SECURITY DEFINITION at all.
fn read_visibility(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    let Some(rows) = rows else {
        reading.catalog.visibility = None;
        return Ok(());
    };
    let mut v = Visibility::default();
    let (mut listed, mut view_definition) = (false, false);
    let (mut exists, mut held) = (false, false);
    for row in rows {
        let value = text(row, 1, what)?.unwrap_or_default();
        match text(row, 0, what)?.as_deref() {
            Some("sysadmin") => v.sysadmin = value.trim() == "1",
            Some("listed") => listed = true,
            Some("held") if value == "VIEW DEFINITION" => view_definition = true,
            Some("held") if value == "VIEW SECURITY DEFINITION" => held = true,
            Some("exists") => exists = true,
            _ => {}
        }
    }
    v.view_definition = listed.then_some(view_definition);
    v.view_security_definition = (listed && exists).then_some(held);
    reading.catalog.visibility = Some(v);
    Ok(())
}

pub(super) fn database_principals() -> Query {
    Query::required(
        "database principals",
        // Babelfish answers owning_principal_id with -1 for every row.
        "SELECT CAST(dp.name AS nvarchar(256)), CAST(dp.type AS nvarchar(2)),
                    CAST(CASE WHEN dp.owning_principal_id > 0 THEN USER_NAME(dp.owning_principal_id) END
                         AS nvarchar(256)),
                    CAST(dp.default_schema_name AS nvarchar(256))
               FROM sys.database_principals AS dp",
        read_database_principals,
    )
}

fn read_database_principals(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        let kind = match text(row, 1, what)?.as_deref().map(str::trim) {
            Some("R") => PrincipalKind::Role,
            Some("A") => PrincipalKind::ApplicationRole,
            Some("G" | "X") => PrincipalKind::Group,
            Some("C" | "K") => PrincipalKind::KeyMapped,
            _ => PrincipalKind::User,
        };
        let mut principal = Principal::new(required(row, 0, what)?, kind);
        principal.owner = text(row, 2, what)?;
        principal.default_schema = text(row, 3, what)?.filter(|s| !s.is_empty());
        reading.catalog.principals.push(principal);
    }
    Ok(())
}

/// Read after the principals, whose users it gives their logins.
pub(super) fn user_logins() -> Query {
    Query::optional(
        "the logins behind database users",
        "SELECT CAST(dp.name AS nvarchar(256)), CAST(sp.name AS nvarchar(256)), CAST(sp.type AS nvarchar(2))
               FROM sys.database_principals AS dp JOIN sys.server_principals AS sp ON sp.sid = dp.sid",
        read_user_logins,
    )
}

fn read_user_logins(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        let user = required(row, 0, what)?;
        let login = text(row, 1, what)?;
        let kind = text(row, 2, what)?.as_deref().and_then(LoginKind::from_type);
        if let Some(p) = reading
            .catalog
            .principals
            .iter_mut()
            .find(|p| p.name.eq_ignore_ascii_case(&user))
        {
            p.login = login;
            p.login_kind = kind;
        }
    }
    Ok(())
}

/// Read after the principals: how each user authenticates. Apart from the
/// principals so that an engine without the column leaves it unknown (and
/// a password reset assumed) rather than failing the read.
pub(super) fn user_authentication() -> Query {
    Query::optional(
        "how users authenticate",
        "SELECT CAST(dp.name AS nvarchar(256)), CAST(dp.authentication_type AS int)
               FROM sys.database_principals AS dp WHERE dp.type NOT IN ('R', 'A')",
        read_user_authentication,
    )
}

fn read_user_authentication(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        let user = required(row, 0, what)?;
        let kind = int(row, 1, what)?.and_then(UserAuthentication::from_type);
        if let Some(p) = reading
            .catalog
            .principals
            .iter_mut()
            .find(|p| p.name.eq_ignore_ascii_case(&user))
        {
            p.authentication = kind;
        }
    }
    Ok(())
}

pub(super) fn role_memberships() -> Query {
    Query::required(
        "role memberships",
        "SELECT CAST(r.name AS nvarchar(256)), CAST(m.name AS nvarchar(256))
               FROM sys.database_role_members AS rm
               JOIN sys.database_principals AS r ON r.principal_id = rm.role_principal_id
               JOIN sys.database_principals AS m ON m.principal_id = rm.member_principal_id",
        read_role_memberships,
    )
}

fn read_role_memberships(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    for row in rows.unwrap_or_default() {
        reading.catalog.memberships.push(Membership {
            role: required(row, 0, what)?,
            member: required(row, 1, what)?,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use tiberius::{ColumnData, ColumnType, Row};

    use super::*;

    fn principal_row(name: &str, kind: &str) -> Row {
        [Some(name), Some(kind), None, None]
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
    fn users_mapped_to_a_certificate_or_key_are_read_as_such_not_as_plain_users() {
        // sys.database_principals: C is CERTIFICATE_MAPPED_USER, K is
        // ASYMMETRIC_KEY_MAPPED_USER; "EXECUTE AS" can name neither.
        let rows = [
            principal_row("cert_user", "C"),
            principal_row("key_user", "K"),
            principal_row("app", "S"),
        ];
        let mut reading = Reading::default();
        read_database_principals(Some(&rows), "database principals", &mut reading).unwrap();
        let kinds: Vec<_> = reading.catalog.principals.iter().map(|p| p.kind).collect();
        assert_eq!(
            kinds,
            [PrincipalKind::KeyMapped, PrincipalKind::KeyMapped, PrincipalKind::User]
        );
    }
}
