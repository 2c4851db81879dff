//! Asking the server which of the [`CANDIDATES`] the deploying login lacks:
//! one result set of the state query, so `status`, a dry run and `migrate`
//! (under the deploy lock, before its first change) read it in the round trip
//! they already make. The engine judges each right with HAS_PERMS_BY_NAME,
//! which counts role memberships, rights implied by wider ones (CONTROL on
//! the database implies every right in it) and DENY.
//!
//! `dbo` holds every right in its database and skips the questions: on SQL
//! Server and Azure SQL the owner and every sysadmin enter as `dbo`, and on
//! Babelfish only they may deploy at all (it grants no database-level
//! right to anyone else, and adds no member to db_owner); its
//! HAS_PERMS_BY_NAME also answers 0 for rights `dbo` holds (CREATE ROLE,
//! IMPERSONATE), so asking there would name rights that are not missing.

use super::candidates::{CANDIDATES, Candidate, IDENTITY_UNRECORDED_SET, On};
use crate::tsql::literal;

/// A right the login was found to lack, or that the engine would not answer
/// for, as the server checked it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProbedRight {
    /// The candidate's key.
    pub key: String,
    /// The permission checked: the candidate's, or its database-wide form
    /// where the schema does not exist yet (ALTER ANY SCHEMA for ALTER).
    pub permission: String,
    /// `DATABASE`, `SCHEMA`, `OBJECT` or `USER`.
    pub class: String,
    /// What it was checked on: the database, schema, `schema.table` or user.
    pub securable: String,
    /// `Some(false)`: lacking; `None`: the engine gave no answer.
    pub held: Option<bool>,
}

/// What the probe found: who deploys, and what they lack.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProbedRights {
    /// The deploying database user (`USER_NAME()`).
    pub user: String,
    /// Its login (`SUSER_SNAME()`).
    pub login: String,
    /// The database (`DB_NAME()`).
    pub database: String,
    /// Whether the engine is Babelfish, where a right is given by making the
    /// login the database's owner rather than by GRANT.
    pub babelfish: bool,
    /// The rights lacking or unanswered; none for `dbo`.
    pub lacking: Vec<ProbedRight>,
    /// The database's owner (`SUSER_SNAME` of its `owner_sid`), which the
    /// Babelfish statement replaces.
    pub owner: String,
    /// The login enters through a Windows group's user: `USER_NAME()`
    /// names no database principal of its own.
    pub group_login: bool,
    /// The first fence schema that exists owned by someone other than dbo,
    /// and its owner: the deploy refuses it (50198).
    pub schema_not_owned_by_dbo: Option<(String, String)>,
    /// The roles the deploying user is a member of: Babelfish's owner
    /// change drops the user, and these memberships with it.
    pub roles: Vec<String>,
}

/// The probe's result set: one row per right lacking or unanswered, each
/// with who deploys, or one row naming no right when nothing is lacking. Run
/// through EXEC so that `dbo`'s session never compiles the questions.
pub(crate) fn probe_query() -> String {
    let mut checks = String::new();
    for candidate in CANDIDATES {
        checks += &check(candidate);
    }
    let inner = format!(
        "SET NOCOUNT ON;
DECLARE @Rights TABLE (RightKey nvarchar(64) NOT NULL, Permission nvarchar(64) NOT NULL,
                       Class nvarchar(16) NOT NULL, Securable nvarchar(300) NOT NULL, Held int NULL);
DECLARE @Grantor int = CASE WHEN ISNULL(IS_MEMBER(N'db_securityadmin'), 0) = 1 THEN 1 ELSE 0 END;
{IDENTITY_UNRECORDED_SET}{checks}{ROLES}SELECT r.RightKey, r.Permission, r.Class, r.Securable, r.Held, {WHO},
       @Roles AS Roles
  FROM (SELECT 1 AS One) AS me
  LEFT JOIN @Rights AS r ON r.Held IS NULL OR r.Held <> 1
  {FOREIGN_SCHEMA};"
    );
    format!(
        "IF USER_NAME() = N'dbo'
    SELECT CAST(NULL AS nvarchar(64)), CAST(NULL AS nvarchar(64)), CAST(NULL AS nvarchar(16)),
           CAST(NULL AS nvarchar(300)), CAST(NULL AS int), {WHO},
           CAST(NULL AS nvarchar(4000))
      FROM (SELECT 1 AS One) AS me
      {FOREIGN_SCHEMA};
ELSE
    EXEC ({});",
        literal(&inner)
    )
}

/// Who deploys, on every row (and on the one row that names no right).
const WHO: &str = "CAST(USER_NAME() AS nvarchar(256)) AS UserName, CAST(SUSER_SNAME() AS nvarchar(256)) AS LoginName,
       CAST(DB_NAME() AS nvarchar(256)) AS DatabaseName,
       CASE WHEN SERVERPROPERTY(N'Babelfish') IS NULL THEN 0 ELSE 1 END AS IsBabelfish,
       CAST((SELECT SUSER_SNAME(owner_sid) FROM sys.databases WHERE name = DB_NAME()) AS nvarchar(256)) AS DatabaseOwner,
       CASE WHEN DATABASE_PRINCIPAL_ID(USER_NAME()) IS NULL THEN 1 ELSE 0 END AS GroupLogin,
       CAST(f.name AS nvarchar(128)) AS SchemaNotOwnedByDbo, CAST(USER_NAME(f.principal_id) AS nvarchar(256)) AS SchemaOwner";

/// The roles the deploying user is a member of, one a line, in `@Roles`:
/// read one by one rather than with STRING_AGG, which SQL Server 2016 lacks.
const ROLES: &str = "DECLARE @Roles nvarchar(4000) = N'', @Role sysname = N'';
WHILE 1 = 1
BEGIN
    SET @Role = (SELECT MIN(r.name) FROM sys.database_role_members AS m
                   JOIN sys.database_principals AS r ON r.principal_id = m.role_principal_id
                  WHERE m.member_principal_id = DATABASE_PRINCIPAL_ID(USER_NAME()) AND r.name > @Role);
    IF @Role IS NULL BREAK;
    SET @Roles = @Roles + CASE WHEN @Roles = N'' THEN N'' ELSE NCHAR(10) END + @Role;
END;
";

/// The first fence schema another principal owns, joined to the probe's
/// rows (none: NULLs).
const FOREIGN_SCHEMA: &str = "OUTER APPLY (SELECT TOP (1) s.name, s.principal_id FROM sys.schemas AS s
                   WHERE s.name IN (N'fence', N'fence_api', N'fence_admin') AND s.principal_id <> USER_ID(N'dbo')
                   ORDER BY s.name) AS f";

/// The statements that record one candidate, asked of the widest securable
/// that exists.
fn check(candidate: &Candidate) -> String {
    let key = literal(candidate.key);
    let permission = candidate.permission;
    let held = |expr: String| {
        if candidate.grants {
            format!("CASE WHEN @Grantor = 1 THEN 1 ELSE {expr} END")
        } else {
            expr
        }
    };
    let insert = |permission: &str, class: &str, securable: &str, expr: String| {
        format!(
            "INSERT INTO @Rights VALUES ({key}, {}, N'{class}', {securable}, {});\n",
            literal(permission),
            held(expr)
        )
    };
    let database_wide = database_form(permission);
    let on_database = insert(
        database_wide,
        "DATABASE",
        "DB_NAME()",
        format!("HAS_PERMS_BY_NAME(DB_NAME(), N'DATABASE', {})", literal(database_wide)),
    );
    let on_schema = |schema: &str| {
        let name = literal(schema);
        format!(
            "IF SCHEMA_ID({name}) IS NOT NULL\n    {}ELSE\n    {on_database}",
            insert(
                permission,
                "SCHEMA",
                &name,
                format!("HAS_PERMS_BY_NAME({name}, N'SCHEMA', {})", literal(permission))
            )
        )
    };
    let statements = match candidate.on {
        On::Database => insert(
            permission,
            "DATABASE",
            "DB_NAME()",
            format!("HAS_PERMS_BY_NAME(DB_NAME(), N'DATABASE', {})", literal(permission)),
        ),
        On::Schema(schema) => on_schema(schema),
        On::Object(schema, table) => {
            let name = literal(&format!("{schema}.{table}"));
            format!(
                "IF OBJECT_ID({name}, N'U') IS NOT NULL\n    {}ELSE\n{}",
                insert(
                    permission,
                    "OBJECT",
                    &name,
                    format!("HAS_PERMS_BY_NAME({name}, N'OBJECT', {})", literal(permission))
                ),
                indent(&on_schema(schema))
            )
        }
        On::Role(role) => {
            let name = literal(role);
            let database_wide = || format!("HAS_PERMS_BY_NAME(DB_NAME(), N'DATABASE', {})", literal(permission));
            format!(
                "IF DATABASE_PRINCIPAL_ID({name}) IS NOT NULL\n    {}ELSE IF SCHEMA_ID(N'fence') IS NOT NULL\n    {}ELSE\n    {}",
                insert(permission, "ROLE", &name, "1".into()),
                insert(permission, "ROLE", &name, database_wide()),
                insert(permission, "DATABASE", "DB_NAME()", database_wide()),
            )
        }
        On::User(user) => {
            let name = literal(user);
            insert(
                permission,
                "USER",
                &name,
                format!("HAS_PERMS_BY_NAME({name}, N'USER', {})", literal(permission)),
            )
        }
    };
    match candidate.only_if {
        Some(condition) => format!("IF {condition}\nBEGIN\n{}END;\n", indent(&statements)),
        None => statements,
    }
}

/// A schema's permission as the database grants it over every schema.
fn database_form(permission: &str) -> &str {
    match permission {
        "ALTER" => "ALTER ANY SCHEMA",
        other => other,
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("    {line}\n")).collect()
}

/// The [`ProbedRights`] in the probe's result set.
pub(crate) fn parse_probe(rows: &[tiberius::Row]) -> ProbedRights {
    let row_text = |row: &tiberius::Row, i: usize| row.get::<&str, usize>(i).map(|s| s.trim().to_string());
    let text = |row: &tiberius::Row, i: usize| row_text(row, i).unwrap_or_default();
    let Some(first) = rows.first() else {
        return ProbedRights::default();
    };
    ProbedRights {
        user: text(first, 5),
        login: text(first, 6),
        database: text(first, 7),
        babelfish: first.get::<i32, usize>(8) == Some(1),
        owner: text(first, 9),
        group_login: first.get::<i32, usize>(10) == Some(1),
        schema_not_owned_by_dbo: row_text(first, 11).zip(row_text(first, 12)),
        roles: row_text(first, 13)
            .map(|roles| roles.lines().map(str::to_string).filter(|r| !r.is_empty()).collect())
            .unwrap_or_default(),
        lacking: rows
            .iter()
            .filter(|row| row.get::<&str, usize>(0).is_some())
            .map(|row| ProbedRight {
                key: text(row, 0),
                permission: text(row, 1),
                class: text(row, 2),
                securable: text(row, 3),
                held: row.get::<i32, usize>(4).map(|held| held == 1),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dbo_is_asked_nothing_and_everyone_else_every_candidate() {
        let sql = probe_query();
        assert!(sql.starts_with("IF USER_NAME() = N'dbo'"), "{sql}");
        for candidate in CANDIDATES {
            assert!(
                sql.contains(&format!("N''{}''", candidate.key)),
                "{}: {sql}",
                candidate.key
            );
        }
    }

    #[test]
    fn a_right_on_a_missing_table_is_asked_of_its_schema_then_of_the_database() {
        let insert = CANDIDATES.iter().find(|c| c.key == "insert_deployment").unwrap();
        let sql = check(insert);
        let object = sql.find("IF OBJECT_ID(N'fence.Deployment', N'U') IS NOT NULL").unwrap();
        let schema = sql.find("IF SCHEMA_ID(N'fence') IS NOT NULL").unwrap();
        let database = sql
            .find("HAS_PERMS_BY_NAME(DB_NAME(), N'DATABASE', N'INSERT')")
            .unwrap();
        assert!(object < schema && schema < database, "{sql}");
        let alter = CANDIDATES.iter().find(|c| c.key == "alter_fence").unwrap();
        assert!(check(alter).contains("N'ALTER ANY SCHEMA'"), "{}", check(alter));
    }

    /// A fence role the deployer can see needs nothing more; one it cannot
    /// is asked of the role once the schemas step has run (the role exists,
    /// dbo's), and of the database before.
    #[test]
    fn a_fence_role_is_held_when_visible_and_asked_of_the_role_or_the_database() {
        let view = CANDIDATES.iter().find(|c| c.key == "view_fence_service").unwrap();
        let sql = check(view);
        let visible = sql
            .find("IF DATABASE_PRINCIPAL_ID(N'fence_service') IS NOT NULL")
            .unwrap();
        let role = sql
            .find("N'VIEW DEFINITION', N'ROLE', N'fence_service', HAS_PERMS_BY_NAME(DB_NAME(), N'DATABASE'")
            .unwrap();
        let database = sql.find("N'VIEW DEFINITION', N'DATABASE', DB_NAME()").unwrap();
        assert!(visible < role && role < database, "{sql}");
        assert!(sql.contains("N'ROLE', N'fence_service', 1);"), "{sql}");
    }

    #[test]
    fn db_securityadmin_may_grant_and_the_conditions_wrap_their_checks() {
        let control = CANDIDATES.iter().find(|c| c.key == "control_fence").unwrap();
        let sql = check(control);
        assert!(
            sql.starts_with("IF SERVERPROPERTY(N'Babelfish') IS NULL\nBEGIN\n"),
            "{sql}"
        );
        assert!(
            sql.contains("CASE WHEN @Grantor = 1 THEN 1 ELSE HAS_PERMS_BY_NAME"),
            "{sql}"
        );
    }
}
