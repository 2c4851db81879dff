//! FP027 over server permissions that imply database permissions, on
//! layouts written from Microsoft's documentation ("Server-level roles":
//! the permissions of server-level roles "can propagate to database
//! permissions", and "for the permissions to be effectively useful at the
//! database level, a login needs to be a member of ##MS_DatabaseConnector##
//! ..., or have a user account in the individual databases"; the hierarchy
//! of `sys.fn_builtin_permissions`: ALTER on a database is implied by ALTER
//! ANY DATABASE; dbcreator "can create, alter, drop, and restore any
//! database"). No one below is a service: no rule but FP027 names them.

use crate::support;

use fencepost::audit::{Catalog, Securable, ServerPermission};
use support::fixtures::*;

/// An operations login with a user here that holds nothing but CONNECT.
fn ops(c: &mut Catalog) {
    c.principals.push(user("ops", Some("ops")));
    c.permissions.push(grant("ops", "CONNECT", Securable::Database));
}

#[test]
fn alter_any_database_granted_to_a_login_with_a_user_here_is_alter_on_this_database() {
    let mut c = clean();
    ops(&mut c);
    assert!(check(&c).findings.is_empty(), "{:#?}", check(&c));
    server_facts(&mut c)
        .permissions
        .push(server_grant("ops", "ALTER ANY DATABASE"));
    let f = reaching(&c, "ops");
    // ALTER on the database is ALTER ANY SCHEMA: the fence tables and the
    // shipped procedures' schemas; ALTER ANY ROLE: the fence roles.
    let goals: Vec<&str> = f.iter().filter_map(|f| f.permission.as_deref()).collect();
    assert!(goals.contains(&"write the fence tables"), "{f:#?}");
    assert!(goals.contains(&"change the shipped procedures"), "{f:#?}");
    let write = f
        .iter()
        .find(|f| f.permission.as_deref() == Some("write the fence tables"))
        .unwrap();
    assert!(
        step_texts(write)[0]
            .contains("login ops holds ALTER ANY DATABASE on the server, which implies ALTER on every database"),
        "{write:#?}"
    );
    assert_eq!(write.fix, "REVOKE ALTER ANY DATABASE FROM [ops];");
    // The login is the user: it is not named a second time.
    assert!(reaching(&c, "login ops").is_empty(), "{:#?}", check(&c));
}

#[test]
fn the_database_manager_and_dbcreator_roles_hold_alter_any_database() {
    for role in ["##MS_DatabaseManager##", "dbcreator"] {
        let mut c = clean();
        ops(&mut c);
        server_facts(&mut c).role_members.push(member(role, "ops"));
        let report = check(&c);
        let f = reaching(&c, "ops");
        assert!(
            f.iter()
                .any(|f| step_texts(f)[0].contains(&format!("ALTER ANY DATABASE through server role {role}"))),
            "{role}: {report:#?}"
        );
        assert_eq!(report.exit_code(), 1, "{role}");
    }
}

#[test]
fn dbcreator_restores_over_the_database_whoever_its_members_are() {
    // RESTORE over an existing database: sysadmin, dbcreator and its owner.
    let mut c = clean();
    server_facts(&mut c).role_members.push(member("dbcreator", "restorer"));
    let f = reaching(&c, "server role dbcreator");
    assert_eq!(f.len(), 1, "{:#?}", check(&c));
    assert_eq!(f[0].object, "the fence's generations");
    assert!(step_texts(&f[0])[0].starts_with("may restore an older backup over this database"));
    assert!(f[0].why.contains("its members login restorer"), "{:#?}", f[0]);
}

#[test]
fn a_login_without_a_user_here_enters_by_connect_any_database_or_as_guest() {
    // Without a user, CONNECT ANY DATABASE or guest lets it in, and its
    // ALTER ANY DATABASE comes with it.
    let mut c = clean();
    server_facts(&mut c)
        .permissions
        .push(server_grant("ops", "ALTER ANY DATABASE"));
    let report = check(&c);
    assert!(report.findings.is_empty(), "no way in: {report:#?}");
    assert_eq!(report.exit_code(), 0);

    let mut connector = c.clone();
    server_facts(&mut connector)
        .role_members
        .push(member("##MS_DatabaseConnector##", "ops"));
    let f = reaching(&connector, "login ops");
    assert!(!f.is_empty(), "{:#?}", check(&connector));
    assert!(
        step_texts(&f[0])[0].contains("it enters this one as it holds CONNECT ANY DATABASE"),
        "{:#?}",
        f[0]
    );

    let mut guest = c.clone();
    guest.permissions.push(grant("guest", "CONNECT", Securable::Database));
    let f = reaching(&guest, "login ops");
    assert!(!f.is_empty(), "{:#?}", check(&guest));
    assert!(
        step_texts(&f[0])[0].contains("as guest, which may connect here"),
        "{:#?}",
        f[0]
    );
}

#[test]
fn server_permissions_that_imply_nothing_that_reaches_stay_clean_and_a_deny_cuts_the_rest() {
    // VIEW SERVER STATE is VIEW DATABASE STATE here: it writes nothing.
    let mut c = clean();
    ops(&mut c);
    server_facts(&mut c)
        .permissions
        .push(server_grant("ops", "VIEW SERVER STATE"));
    server_facts(&mut c)
        .role_members
        .push(member("##MS_DatabaseConnector##", "ops"));
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0);
    // A DENY of ALTER ANY DATABASE to the login cuts what it implies.
    let mut c = clean();
    ops(&mut c);
    server_facts(&mut c)
        .permissions
        .push(server_grant("ops", "ALTER ANY DATABASE"));
    server_facts(&mut c).denies.push(ServerPermission {
        on_login: None,
        ..server_grant("ops", "ALTER ANY DATABASE")
    });
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
}
