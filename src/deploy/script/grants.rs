//! `fencepost script --grant ROLE=USER`: the memberships `migrate --grant`
//! ensures, as the deployment script's last section, for a DBA who deploys
//! offline. It checks every member before adding any (a user the database
//! lacks, or the user running the script, stops it with nothing added), and
//! each name reaches the server as a string that QUOTENAME quotes, never
//! spliced into a statement.

use std::fmt::Write;

use super::guard;
use crate::deploy::run::Grant;
use crate::source::Sources;
use crate::tsql::literal;

/// A member the database has no user or role for (the section throws the
/// number written out, which the docs test finds).
pub const GRANT_REFUSED_NO_USER: u32 = 50196;
/// A member that is the user running the script, or a role it is in: the
/// fence roles' DENY on schema `fence` would fail its next deploy.
pub const GRANT_REFUSED_DEPLOYING_USER: u32 = 50197;

/// Refuses a name sqlcmd would not pass through as written: it expands
/// `$(variable)` everywhere, inside quoted strings too, so a member named
/// `svc$(x)` would add someone else; a control character (a line break
/// before `GO`, say) cannot be told from the script around it.
pub fn refuse_for_sqlcmd(grant: &Grant) -> Result<(), String> {
    let text = format!("{}={}", grant.role, grant.member);
    if text.contains("$(") {
        return Err(format!(
            "--grant {text:?}: sqlcmd would expand `$(` in the script as a variable; the script adds no such \
             name (add the member with `fencepost migrate --grant`, which passes names as parameters)"
        ));
    }
    if text.chars().any(char::is_control) {
        return Err(format!(
            "--grant {text:?}: the name holds a control character, which a script cannot carry as written"
        ));
    }
    Ok(())
}

/// The section that adds each member to its role unless it is one already.
pub(super) fn render(sources: &Sources, versions: &[i32], grants: &[Grant]) -> String {
    if grants.is_empty() {
        return String::new();
    }
    let pairs: Vec<String> = grants
        .iter()
        .map(|g| format!("({}, {})", literal(&g.role), literal(&g.member)))
        .collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "-- the service users added to the fence roles (idempotent; each name quoted by the server)
{section}DECLARE @Grants TABLE (Position int IDENTITY PRIMARY KEY, RoleName sysname NOT NULL, Member sysname NOT NULL);
INSERT INTO @Grants (RoleName, Member) VALUES {values};
DECLARE @Refused sysname;
SELECT TOP (1) @Refused = Member FROM @Grants WHERE DATABASE_PRINCIPAL_ID(Member) IS NULL ORDER BY Position;
IF @Refused IS NOT NULL
BEGIN
    DECLARE @NoUser nvarchar(400) = N'no user or role ' + QUOTENAME(@Refused)
        + N' in this database: create it (CREATE USER ... FOR LOGIN ...) or leave its --grant out; no member was added';
    THROW 50196, @NoUser, 1;
END;
SELECT TOP (1) @Refused = Member FROM @Grants
 WHERE DATABASE_PRINCIPAL_ID(Member) = DATABASE_PRINCIPAL_ID()
    OR EXISTS (SELECT 1 FROM sys.database_principals AS p WHERE p.name = Member AND p.type = 'R')
       AND IS_ROLEMEMBER(Member) = 1
 ORDER BY Position;
IF @Refused IS NOT NULL
BEGIN
    DECLARE @Deploying nvarchar(400) = QUOTENAME(@Refused)
        + N' is the user running this script, or a role it is in: a fence role''s DENY on schema fence would fail its next deploy; no member was added';
    THROW 50197, @Deploying, 1;
END;
DECLARE @Position int = 1, @Role sysname, @Member sysname, @Statement nvarchar(400);
WHILE @Position <= (SELECT MAX(Position) FROM @Grants)
BEGIN
    SELECT @Role = RoleName, @Member = Member FROM @Grants WHERE Position = @Position;
    IF NOT EXISTS (SELECT 1 FROM sys.database_role_members AS rm
                    WHERE rm.role_principal_id = DATABASE_PRINCIPAL_ID(@Role)
                      AND rm.member_principal_id = DATABASE_PRINCIPAL_ID(@Member))
    BEGIN
        SET @Statement = N'ALTER ROLE ' + QUOTENAME(@Role) + N' ADD MEMBER ' + QUOTENAME(@Member) + N';';
        EXEC (@Statement);
    END;
    SET @Position += 1;
END;
GO
",
        section = guard::section(sources, versions),
        values = pairs.join(", "),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_is_a_string_quoted_by_the_server_and_every_member_is_checked_before_any_is_added() {
        let sources = Sources::from_files(vec![], vec![], vec![]).unwrap();
        let grants = [
            Grant::parse("fence_service=svc]o'ps").unwrap(),
            Grant::parse("fence_reader=reports").unwrap(),
        ];
        let sql = render(&sources, &[], &grants);
        assert!(
            sql.contains("VALUES (N'fence_service', N'svc]o''ps'), (N'fence_reader', N'reports');"),
            "{sql}"
        );
        assert!(!sql.contains("[svc"), "a name was spliced: {sql}");
        let checks = sql.find(&format!("THROW {GRANT_REFUSED_DEPLOYING_USER}")).unwrap();
        let adds = sql.find("ALTER ROLE ' + QUOTENAME(@Role)").unwrap();
        assert!(sql.find(&format!("THROW {GRANT_REFUSED_NO_USER}")).unwrap() < checks && checks < adds);
        assert_eq!(render(&sources, &[], &[]), "");
    }
}
