//! FP027 over the ways to take over one login or user, on layouts written
//! from Microsoft's documentation: ALTER on a login "confers the ability to
//! change the properties" of it, its password included, and is implied by
//! CONTROL on it and by ALTER ANY LOGIN ("GRANT Server Principal
//! Permissions", "ALTER LOGIN"); CREATE LOGIN's SID option "is used to
//! recreate a login" for SQL Server authentication, which adopts an
//! orphaned user ("CREATE LOGIN"); and ALTER USER, where "OLD_PASSWORD is
//! required to change a password, unless you have ALTER ANY USER
//! permission", so ALTER on one contained user resets nothing.

use crate::support;

use fencepost::audit::{Catalog, LoginKind, Securable, UserAuthentication};
use support::fixtures::*;

/// An ETL user in db_datawriter behind a SQL login of its own.
fn etl(c: &mut Catalog) {
    c.principals.push(user("etl", Some("etl")));
    c.memberships.push(member("db_datawriter", "etl"));
}

#[test]
fn alter_on_one_login_resets_its_password() {
    let mut c = clean();
    etl(&mut c);
    server_facts(&mut c)
        .permissions
        .push(on_login("helpdesk", "ALTER", "etl"));
    let f = reaching(&c, "login helpdesk");
    assert_eq!(f.len(), 1, "{:#?}", check(&c));
    assert_eq!(
        step_texts(&f[0])[..2],
        [
            "ALTER on LOGIN::etl: resets its password (ALTER LOGIN [etl] WITH PASSWORD = '...')",
            "enters the database as user etl"
        ]
    );
    assert_eq!(f[0].fix, "REVOKE ALTER ON LOGIN::[etl] FROM [helpdesk];");
}

#[test]
fn a_deny_of_impersonate_leaves_controls_password_reset_and_a_deny_of_alter_cuts_it() {
    let mut c = clean();
    etl(&mut c);
    server_facts(&mut c)
        .permissions
        .push(on_login("helpdesk", "CONTROL", "etl"));
    server_facts(&mut c)
        .denies
        .push(on_login("helpdesk", "IMPERSONATE", "etl"));
    let f = reaching(&c, "login helpdesk");
    assert_eq!(f.len(), 1, "{:#?}", check(&c));
    assert!(
        step_texts(&f[0])[0].starts_with("CONTROL on LOGIN::etl (implies ALTER): resets its password"),
        "{:#?}",
        f[0]
    );
    server_facts(&mut c).denies.push(on_login("helpdesk", "ALTER", "etl"));
    assert!(reaching(&c, "login helpdesk").is_empty(), "{:#?}", check(&c));
}

#[test]
fn alter_on_a_sysadmins_or_a_windows_login_resets_nothing() {
    // A sysadmin's password needs CONTROL SERVER; a Windows login has none
    // here. Each layout is clean.
    let mut c = clean();
    etl(&mut c);
    c.principals.last_mut().unwrap().login_kind = Some(LoginKind::Windows);
    server_facts(&mut c)
        .permissions
        .push(on_login("helpdesk", "ALTER", "sa"));
    server_facts(&mut c)
        .permissions
        .push(on_login("helpdesk", "ALTER", "etl"));
    let report = check(&c);
    assert!(reaching(&c, "login helpdesk").is_empty(), "{report:#?}");
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.path.iter().all(|s| !s.step.contains("resets"))),
        "{report:#?}"
    );
}

/// A user of a SQL login that was dropped: authentication INSTANCE, and no
/// login of its SID. Every other login of the fixture is a Windows login,
/// so that no other password reset is in the way.
fn orphan(c: &mut Catalog) {
    for p in c.principals.iter_mut().filter(|p| p.login.is_some()) {
        p.login_kind = Some(LoginKind::Windows);
    }
    let mut old = user("old_etl", None);
    old.authentication = Some(UserAuthentication::Instance);
    c.principals.push(old);
    c.memberships.push(member("db_datawriter", "old_etl"));
}

#[test]
fn alter_any_login_or_create_login_adopts_an_orphaned_user() {
    for permission in ["ALTER ANY LOGIN", "CREATE LOGIN"] {
        let mut c = clean();
        orphan(&mut c);
        server_facts(&mut c)
            .permissions
            .push(server_grant("helpdesk", permission));
        let f = reaching(&c, "login helpdesk");
        assert_eq!(f.len(), 1, "{permission}: {:#?}", check(&c));
        assert!(
            step_texts(&f[0])[0].starts_with(&format!(
                "{permission}: creates a SQL login with the SID of old_etl, a user no login has the SID of"
            )),
            "{:#?}",
            f[0]
        );
        assert_eq!(f[0].fix, "DROP USER [old_etl];");
    }
    // ##MS_LoginManager## holds both.
    let mut c = clean();
    orphan(&mut c);
    server_facts(&mut c)
        .role_members
        .push(member("##MS_LoginManager##", "helpdesk"));
    assert!(
        !reaching(&c, "server role ##MS_LoginManager##").is_empty(),
        "{:#?}",
        check(&c)
    );
}

#[test]
fn users_without_a_login_by_design_are_adopted_by_no_one() {
    // WITHOUT LOGIN (NONE), contained (DATABASE) and Windows users are no
    // orphans: CREATE LOGIN ... SID makes SQL logins for SQL users only.
    for kind in [
        UserAuthentication::NoLogin,
        UserAuthentication::Database,
        UserAuthentication::Windows,
    ] {
        let mut c = clean();
        orphan(&mut c);
        c.principals
            .iter_mut()
            .find(|p| p.name == "old_etl")
            .unwrap()
            .authentication = Some(kind);
        server_facts(&mut c)
            .permissions
            .push(server_grant("helpdesk", "CREATE LOGIN"));
        let report = check(&c);
        assert!(reaching(&c, "login helpdesk").is_empty(), "{kind:?}: {report:#?}");
    }
}

#[test]
fn alter_on_one_contained_user_resets_nothing_and_alter_any_user_does() {
    let mut c = clean();
    let mut w = user("etl_contained", None);
    w.authentication = Some(UserAuthentication::Database);
    c.principals.push(w);
    c.memberships.push(member("db_datawriter", "etl_contained"));
    c.principals.push(user("helpdesk", Some("helpdesk")));
    c.permissions.push(grant(
        "helpdesk",
        "ALTER",
        Securable::Principal {
            name: "etl_contained".into(),
        },
    ));
    let report = check(&c);
    assert!(reaching(&c, "helpdesk").is_empty(), "{report:#?}");
    c.permissions
        .push(grant("helpdesk", "ALTER ANY USER", Securable::Database));
    let f = reaching(&c, "helpdesk");
    assert!(
        f.iter()
            .any(|f| step_texts(f)[0].starts_with("resets the password of etl_contained")),
        "{f:#?}"
    );
}
