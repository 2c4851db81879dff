//! The fixed database roles and their documented rights ("Permissions of
//! Fixed Database Roles", and "Database-level roles" for what no permission
//! names): the catalog lists their members, never their rights, so each is
//! a right here as if granted on the database.

use super::super::catalog::{Permission, PermissionState, Securable};
use super::super::rules::Context;
use super::right::Right;

/// Every fixed database role, whose membership only db_owner's members
/// change (sp_addrolemember: "adding members to fixed database roles
/// requires membership in the db_owner fixed database role").
const FIXED: [&str; 9] = [
    "db_owner",
    "db_securityadmin",
    "db_accessadmin",
    "db_backupoperator",
    "db_ddladmin",
    "db_datawriter",
    "db_datareader",
    "db_denydatawriter",
    "db_denydatareader",
];

/// The database-level permissions each fixed role is granted.
const RIGHTS: [(&str, &[&str]); 5] = [
    // Granted with GRANT option: CONTROL.
    ("db_owner", &["CONTROL"]),
    (
        "db_securityadmin",
        &[
            "ALTER ANY APPLICATION ROLE",
            "ALTER ANY ROLE",
            "CREATE SCHEMA",
            "VIEW DEFINITION",
        ],
    ),
    // Granted with GRANT option: CONNECT.
    ("db_accessadmin", &["ALTER ANY USER", "CREATE SCHEMA", "CONNECT"]),
    ("db_datawriter", &["DELETE", "INSERT", "UPDATE"]),
    (
        "db_ddladmin",
        &[
            "ALTER ANY ASSEMBLY",
            "ALTER ANY ASYMMETRIC KEY",
            "ALTER ANY CERTIFICATE",
            "ALTER ANY CONTRACT",
            "ALTER ANY DATABASE DDL TRIGGER",
            "ALTER ANY DATABASE EVENT NOTIFICATION",
            "ALTER ANY DATASPACE",
            "ALTER ANY FULLTEXT CATALOG",
            "ALTER ANY MESSAGE TYPE",
            "ALTER ANY REMOTE SERVICE BINDING",
            "ALTER ANY ROUTE",
            "ALTER ANY SCHEMA",
            "ALTER ANY SERVICE",
            "ALTER ANY SYMMETRIC KEY",
            "CHECKPOINT",
            "CREATE AGGREGATE",
            "CREATE DEFAULT",
            "CREATE FUNCTION",
            "CREATE PROCEDURE",
            "CREATE QUEUE",
            "CREATE RULE",
            "CREATE SYNONYM",
            "CREATE TABLE",
            "CREATE TYPE",
            "CREATE VIEW",
            "CREATE XML SCHEMA COLLECTION",
            "REFERENCES",
        ],
    ),
];

/// Whether `name` is a fixed database role.
pub(crate) fn is_fixed(name: &str) -> bool {
    FIXED.iter().any(|f| f.eq_ignore_ascii_case(name))
}

/// db_securityadmin "can modify role membership for custom roles only and
/// manage permissions": it may GRANT what no permission row shows.
pub(crate) fn manages_permissions(name: &str) -> bool {
    name.eq_ignore_ascii_case("db_securityadmin")
}

/// The documented rights of the fixed roles the catalog has.
pub(super) fn rights(ctx: &Context, rights: &mut Vec<Right>) {
    for (role, permissions) in RIGHTS {
        let Some(spelled) = ctx.principal(role).map(|p| p.name.clone()) else {
            continue;
        };
        let listed = permissions.join(", ");
        for permission in permissions {
            rights.push(Right {
                holder: spelled.clone(),
                permission: Permission {
                    grantee: spelled.clone(),
                    permission: (*permission).into(),
                    state: PermissionState::Grant,
                    on: Securable::Database,
                },
                held: Some(format!(
                    "{spelled} holds {permission} on the database, a fixed role's documented right"
                )),
                evidence: format!("fixed database role {spelled}: its documented rights ({listed})"),
                cut: format!("(a fixed role's rights cannot be revoked: take its members out of {spelled})"),
                plain_grant: false,
                login: false,
                undeniable: false,
                taken: false,
            });
        }
    }
}

/// The database-level DENYs the deny roles stand for ("db_denydatawriter:
/// cannot add, modify, or delete any data in the user tables";
/// db_denydatareader: cannot read them), as rows the DENY check weighs.
pub(super) fn denies() -> Vec<Permission> {
    let deny = |role: &str, permission: &str| Permission {
        grantee: role.into(),
        permission: permission.into(),
        state: PermissionState::Deny,
        on: Securable::Database,
    };
    vec![
        deny("db_denydatawriter", "INSERT"),
        deny("db_denydatawriter", "UPDATE"),
        deny("db_denydatawriter", "DELETE"),
        deny("db_denydatareader", "SELECT"),
    ]
}
