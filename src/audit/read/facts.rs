//! The answers about the checking login and the server: what the login can
//! see, server roles and permissions, and the other TRUSTWORTHY databases.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{
    Catalog, Membership, OtherDatabase, OtherDatabaseUser, ServerFacts, ServerPermission, Visibility,
};
use super::rows::{int, required, text};

/// What the checking login sees. A `listed` row says fn_my_permissions ran
/// (an empty list there is an answer: the login lacks both); an `exists` row
/// says the engine has VIEW SECURITY DEFINITION at all.
pub(super) fn visibility(rows: &[Row], what: &'static str) -> Result<Visibility, AuditError> {
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
    Ok(v)
}

/// Server role members and permissions; the marker row of an engine without
/// a server permission catalog makes an empty list of permissions unknown.
pub(super) fn server(rows: &[Row], what: &'static str, catalog: &Catalog) -> Result<ServerFacts, AuditError> {
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
            Some("group") => facts.group_logins.push(required(row, 1, what)?),
            Some("role") => facts.roles.push(required(row, 1, what)?),
            Some("no permission catalog") => {
                facts.permissions_unreadable = Some(format!(
                    "{} has no server permission catalog (sys.server_permissions)",
                    catalog.engine.product
                ));
            }
            _ => {}
        }
    }
    Ok(facts)
}

/// One row per TRUSTWORTHY database and db_owner member (or one row with no
/// member when the checking login could not read them).
pub(super) fn trustworthy(rows: &[Row], what: &'static str) -> Result<Vec<OtherDatabase>, AuditError> {
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

/// The marker row saying the login can see every login's server roles.
pub(super) fn is_visible_marker(row: &Row, what: &'static str) -> bool {
    matches!((text(row, 0, what), text(row, 1, what)), (Ok(Some(k)), Ok(Some(v))) if k == "visible" && v == "1")
}
