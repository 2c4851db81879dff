//! Adding a service's database users to the fence roles, as a deploy
//! pipeline does for each environment: idempotent, and with every name
//! quoted by the server (QUOTENAME), never spliced into the statement.

use serde::Serialize;

use crate::connection::Connection;
use crate::deploy::blocker::Blocker;
use crate::deploy::error::DeployError;
use crate::deploy::rights::Who;
use crate::schema::FENCE_ROLES;

/// One role membership to ensure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// One of [`FENCE_ROLES`].
    pub role: String,
    /// A database user (or role) in the target database.
    pub member: String,
}

/// What ensuring a membership did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GrantOutcome {
    /// The role.
    pub role: String,
    /// The member.
    pub member: String,
    /// True when this run added it; false when it was a member already.
    pub added: bool,
}

impl Grant {
    /// Reads `ROLE=MEMBER`, refusing a role that is not a fence role.
    pub fn parse(text: &str) -> Result<Grant, String> {
        let Some((role, member)) = text.split_once('=') else {
            return Err(format!("'{text}' is not ROLE=USER, e.g. fence_service=svc_reports"));
        };
        let (role, member) = (role.trim(), member.trim());
        if !FENCE_ROLES.contains(&role) {
            return Err(format!(
                "'{role}' is not a fence role: grant one of {}",
                FENCE_ROLES.join(", ")
            ));
        }
        // A sysname: 128 UTF-16 code units, the limit QUOTENAME quotes.
        if member.is_empty() || member.encode_utf16().count() > 128 {
            return Err(format!("'{text}': the user name must be 1 to 128 characters"));
        }
        Ok(Grant {
            role: role.to_string(),
            member: member.to_string(),
        })
    }
}

/// Adds the member to the role unless it is one already; the names are
/// parameters, quoted by QUOTENAME on the server.
const ENSURE_MEMBER: &str = "\
DECLARE @Role sysname = @P1, @Member sysname = @P2;
IF DATABASE_PRINCIPAL_ID(@Member) IS NULL
    SELECT CAST(N'NoSuchUser' AS nvarchar(32)) AS Outcome;
ELSE IF EXISTS (SELECT 1 FROM sys.database_role_members AS rm
                 WHERE rm.role_principal_id = DATABASE_PRINCIPAL_ID(@Role)
                   AND rm.member_principal_id = DATABASE_PRINCIPAL_ID(@Member))
    SELECT CAST(N'AlreadyMember' AS nvarchar(32)) AS Outcome;
ELSE
BEGIN
    DECLARE @Statement nvarchar(400) = N'ALTER ROLE ' + QUOTENAME(@Role) + N' ADD MEMBER ' + QUOTENAME(@Member) + N';';
    EXEC sys.sp_executesql @Statement;
    SELECT CAST(N'Added' AS nvarchar(32)) AS Outcome;
END;";

/// 1 when the member is the user this session deploys as, or a role that
/// user is a member of. A deploying user put in a fence role gets that
/// role's rights, and on SQL Server its DENY on schema `fence`, which
/// applies to every db_owner member but `dbo` and would fail the deploy's
/// own reads and writes of the fence tables with error 229.
///
/// Then whether this login may add a member to the role (ALTER on the
/// role, or ALTER ANY ROLE while the deploy is still to create it), as
/// HAS_PERMS_BY_NAME judges it; `dbo` may, and Babelfish answers 0 for
/// `dbo`, so it is not asked. Then who deploys, for the statement that
/// gives the right.
const IS_DEPLOYING_USER: &str = "\
DECLARE @Member sysname = @P1, @Role sysname = @P2;
SELECT CAST(CASE
    WHEN DATABASE_PRINCIPAL_ID(@Member) = DATABASE_PRINCIPAL_ID() THEN 1
    WHEN EXISTS (SELECT 1 FROM sys.database_principals WHERE name = @Member AND type = 'R')
         AND IS_ROLEMEMBER(@Member) = 1 THEN 1
    ELSE 0 END AS int) AS IsDeployingUser,
       CAST(CASE
    WHEN USER_NAME() = N'dbo' THEN 1
    WHEN DATABASE_PRINCIPAL_ID(@Role) IS NULL THEN HAS_PERMS_BY_NAME(DB_NAME(), N'DATABASE', N'ALTER ANY ROLE')
    ELSE HAS_PERMS_BY_NAME(@Role, N'ROLE', N'ALTER') END AS int) AS MayAlterRole,
       CAST(CASE WHEN DATABASE_PRINCIPAL_ID(@Role) IS NULL THEN 1 ELSE 0 END AS int) AS RoleMissing,
       CAST(USER_NAME() AS nvarchar(256)), CAST(SUSER_SNAME() AS nvarchar(256)), CAST(DB_NAME() AS nvarchar(256)),
       CASE WHEN SERVERPROPERTY(N'Babelfish') IS NULL THEN 0 ELSE 1 END;";

/// Refuses, before anything is deployed or granted, a grant that would put
/// the deploying user (itself, or through a role it is in) in a fence role,
/// and grants this login may not make (no ALTER on the role), naming each
/// right with the statement that gives it: the deploy would otherwise run
/// and its grants fail after it.
pub async fn refuse_deploying_user(conn: &mut Connection, grants: &[Grant]) -> Result<(), DeployError> {
    let mut lacking = Vec::new();
    let mut user = String::new();
    for grant in grants {
        let context = format!("checking {} for {}", grant.member, grant.role);
        let row = conn
            .query(IS_DEPLOYING_USER, &[&grant.member.as_str(), &grant.role.as_str()])
            .await
            .map_err(DeployError::server(context.clone()))?
            .into_row()
            .await
            .map_err(DeployError::server(context))?;
        let Some(row) = row else { continue };
        if row.get::<i32, usize>(0) == Some(1) {
            return Err(DeployError::GrantToDeployingUser {
                member: grant.member.clone(),
                role: grant.role.clone(),
            });
        }
        if row.get::<i32, usize>(1) == Some(0) {
            let text = |i: usize| row.get::<&str, usize>(i).unwrap_or_default().to_string();
            let who = Who {
                user: text(3),
                login: text(4),
                database: text(5),
                babelfish: row.get::<i32, usize>(6) == Some(1),
            };
            let needed_for = format!("adding {} to {} (--grant)", grant.member, grant.role);
            let right = match row.get::<i32, usize>(2) == Some(1) {
                true => who.missing("ALTER ANY ROLE", "DATABASE", &who.database, needed_for),
                false => who.missing("ALTER", "ROLE", &grant.role, needed_for),
            };
            if !lacking.contains(&right) {
                lacking.push(right);
            }
            user = who.user;
        }
    }
    match lacking.is_empty() {
        true => Ok(()),
        false => Err(DeployError::Blocked(Blocker::MissingRights { user, rights: lacking })),
    }
}

/// Ensures each membership, in order, one round trip each. A user that does
/// not exist stops with an error naming it; memberships added before it stay.
pub async fn ensure_members(conn: &mut Connection, grants: &[Grant]) -> Result<Vec<GrantOutcome>, DeployError> {
    let mut outcomes = Vec::with_capacity(grants.len());
    for grant in grants {
        let context = format!("adding {} to {}", grant.member, grant.role);
        let row = conn
            .query(ENSURE_MEMBER, &[&grant.role.as_str(), &grant.member.as_str()])
            .await
            .map_err(DeployError::server(context.clone()))?
            .into_row()
            .await
            .map_err(DeployError::server(context.clone()))?;
        let outcome = row.as_ref().and_then(|r| r.get::<&str, usize>(0)).unwrap_or_default();
        let added = match outcome {
            "Added" => true,
            "AlreadyMember" => false,
            _ => {
                return Err(DeployError::NoSuchUser {
                    member: grant.member.clone(),
                    role: grant.role.clone(),
                });
            }
        };
        outcomes.push(GrantOutcome {
            role: grant.role.clone(),
            member: grant.member.clone(),
            added,
        });
    }
    Ok(outcomes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_names_a_fence_role_and_a_user() {
        assert_eq!(
            Grant::parse("fence_service=svc_reports"),
            Ok(Grant {
                role: "fence_service".into(),
                member: "svc_reports".into()
            })
        );
        assert!(Grant::parse("db_owner=svc").unwrap_err().contains("not a fence role"));
        assert!(Grant::parse("fence_service").unwrap_err().contains("ROLE=USER"));
        assert!(Grant::parse("fence_service=").is_err());
    }

    #[test]
    fn a_member_name_is_limited_to_a_sysnames_128_utf16_units_not_bytes() {
        let accented = "é".repeat(128);
        assert_eq!(
            Grant::parse(&format!("fence_service={accented}")).unwrap().member,
            accented
        );
        let too_long = "é".repeat(129);
        assert!(
            Grant::parse(&format!("fence_service={too_long}"))
                .unwrap_err()
                .contains("1 to 128 characters")
        );
    }
}
