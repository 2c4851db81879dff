//! FP027 through other TRUSTWORTHY databases of the server, on layouts
//! written from Microsoft's documentation ("Extending Database Impersonation
//! by Using EXECUTE AS": a context made in a TRUSTWORTHY database is trusted
//! at server level when the database's owner holds AUTHENTICATE SERVER, and
//! in another database when the owner holds AUTHENTICATE there; "TRUSTWORTHY
//! database property"). None of the principals below is a service: no rule
//! before these edges named them.

use crate::support;

use fencepost::audit::{
    Catalog, Finding, OtherDatabase, OtherDatabaseUser, Rule, Securable, ServerFacts, ServerPermission,
};
use support::fixtures::*;

fn server(c: &mut Catalog) -> &mut ServerFacts {
    c.server.as_mut().unwrap()
}

/// A TRUSTWORTHY database `name` owned by `owner`, with `holders` as
/// `(user, login, right)` there.
fn trustworthy(c: &mut Catalog, name: &str, owner: &str, holders: &[(&str, &str, &str)]) {
    c.trustworthy_databases.as_mut().unwrap().push(OtherDatabase {
        name: name.into(),
        owner: Some(owner.into()),
        db_owners: Some(
            holders
                .iter()
                .map(|(user, login, right)| OtherDatabaseUser {
                    user: user.to_string(),
                    login: Some(login.to_string()),
                    via: user.to_string(),
                    right: right.to_string(),
                })
                .collect(),
        ),
    });
}

/// The FP027 findings naming `principal`.
fn named(c: &Catalog, principal: &str) -> Vec<Finding> {
    check(c)
        .findings
        .into_iter()
        .filter(|f| f.rule == Rule::ReachesFence && f.principal.as_deref() == Some(principal))
        .collect()
}

fn steps(f: &Finding) -> Vec<&str> {
    f.path.iter().map(|s| s.step.as_str()).collect()
}

#[test]
fn db_owner_of_a_trustworthy_database_whose_owner_holds_authenticate_server_acts_as_any_login() {
    // The owner is no sysadmin, but AUTHENTICATE SERVER makes every context
    // made there trusted at server level: a db_owner there maps a user to
    // the deployer's login and impersonates it.
    let mut c = clean();
    server(&mut c)
        .permissions
        .push(server_grant("reports_owner", "AUTHENTICATE SERVER"));
    trustworthy(
        &mut c,
        "reports",
        "reports_owner",
        &[("analyst", "analyst", "db_owner")],
    );
    let f = named(&c, "login analyst");
    assert!(!f.is_empty(), "{:#?}", check(&c));
    assert!(
        steps(&f[0])[0].starts_with("holds db_owner in TRUSTWORTHY database reports: CREATE USER ... FOR LOGIN"),
        "{:#?}",
        f[0]
    );
    assert_eq!(f[0].fix, "USE [reports]; ALTER ROLE [db_owner] DROP MEMBER [analyst];");
    // The owner itself reaches by the same right.
    assert!(!named(&c, "login reports_owner").is_empty());
}

#[test]
fn control_server_on_the_owner_implies_authenticate_server() {
    let mut c = clean();
    server(&mut c)
        .permissions
        .push(server_grant("reports_owner", "CONTROL SERVER"));
    trustworthy(
        &mut c,
        "reports",
        "reports_owner",
        &[("analyst", "analyst", "db_owner")],
    );
    assert!(!named(&c, "login analyst").is_empty(), "{:#?}", check(&c));
}

#[test]
fn db_ddladmin_of_a_trustworthy_database_acts_as_its_owner_only() {
    // db_ddladmin creates a module WITH EXECUTE AS OWNER, but creates no
    // users: it acts as the owner's login, which here is the fence
    // database's own owner.
    let mut c = clean();
    c.principals[0].login = Some("orders_owner".into());
    server(&mut c)
        .permissions
        .push(server_grant("orders_owner", "AUTHENTICATE SERVER"));
    trustworthy(
        &mut c,
        "staging",
        "orders_owner",
        &[("loader", "loader", "db_ddladmin")],
    );
    let f = named(&c, "login loader");
    assert!(!f.is_empty(), "{:#?}", check(&c));
    assert!(
        steps(&f[0])[0].contains("runs as login orders_owner at server level"),
        "{:#?}",
        f[0]
    );
    assert!(f.iter().all(|f| !steps(f)[0].contains("CREATE USER")), "{f:#?}");
}

#[test]
fn an_owner_that_holds_authenticate_here_lets_its_database_s_db_owners_in_as_any_user() {
    // Not at server level: the owner's user here holds AUTHENTICATE on this
    // database, so contexts made there are trusted here.
    let mut c = clean();
    c.principals.push(user("batch", Some("batch_owner")));
    c.permissions.push(grant("batch", "AUTHENTICATE", Securable::Database));
    trustworthy(&mut c, "batchdb", "batch_owner", &[("intern", "intern", "db_owner")]);
    let f = named(&c, "login intern");
    assert!(!f.is_empty(), "{:#?}", check(&c));
    assert!(steps(&f[0])[0].contains("enters this database as"), "{:#?}", f[0]);
}

#[test]
fn a_service_that_owns_a_trustworthy_database_and_holds_authenticate_here_becomes_any_user() {
    // The service's login owns a TRUSTWORTHY database: as its dbo it maps a
    // user there to the deployer's login and is trusted here as that user.
    let mut c = clean();
    c.permissions
        .push(grant("orders_svc", "AUTHENTICATE", Securable::Database));
    trustworthy(&mut c, "svcdb", "orders_svc", &[]);
    let report = check(&c);
    let f: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.principal.as_deref().is_some_and(|p| p.contains("orders_svc")) && !f.path.is_empty())
        .collect();
    assert!(
        f.iter().any(|f| f
            .path
            .iter()
            .any(|s| s.step.starts_with("owns TRUSTWORTHY database svcdb"))),
        "{report:#?}"
    );
}

#[test]
fn an_owner_holding_impersonate_any_login_counts_as_reaching_the_server() {
    let mut c = clean();
    server(&mut c)
        .permissions
        .push(server_grant("tools_owner", "IMPERSONATE ANY LOGIN"));
    trustworthy(
        &mut c,
        "tools",
        "tools_owner",
        &[("dev", "dev", "IMPERSONATE ON USER::dbo")],
    );
    let f = named(&c, "login dev");
    assert!(!f.is_empty(), "{:#?}", check(&c));
    assert!(steps(&f[0])[0].contains("IMPERSONATE ANY LOGIN"), "{:#?}", f[0]);
}

#[test]
fn trustworthy_databases_whose_owner_reaches_nothing_stay_clean() {
    // Safe layouts: an owner with no server right and no AUTHENTICATE here;
    // an owner whose AUTHENTICATE SERVER is denied; msdb owned by sa with
    // only its own dbo in db_owner (the clean fixture).
    let mut c = clean();
    trustworthy(&mut c, "plain", "plain_owner", &[("someone", "someone", "db_owner")]);
    server(&mut c)
        .permissions
        .push(server_grant("denied_owner", "AUTHENTICATE SERVER"));
    server(&mut c).denies.push(ServerPermission {
        on_login: None,
        ..server_grant("denied_owner", "AUTHENTICATE SERVER")
    });
    trustworthy(&mut c, "fenced", "denied_owner", &[("other", "other", "db_owner")]);
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

/// This database TRUSTWORTHY, owned by sa; auditor's login holds CONTROL
/// SERVER, and batch may impersonate auditor's user.
fn trustworthy_here(c: &mut Catalog) {
    c.settings.as_mut().unwrap().trustworthy = true;
    c.principals.push(user("auditor", Some("auditor")));
    server(c).permissions.push(server_grant("auditor", "CONTROL SERVER"));
    c.principals.push(user("batch", Some("batch")));
    c.permissions.push(grant(
        "batch",
        "IMPERSONATE",
        Securable::Principal { name: "auditor".into() },
    ));
}

#[test]
fn this_database_trustworthy_lends_an_impersonated_users_login_its_server_rights() {
    // The owner (sa) is sysadmin: EXECUTE AS USER = 'auditor' here is
    // trusted at server level as login auditor, which holds CONTROL SERVER.
    let mut c = clean();
    trustworthy_here(&mut c);
    let f = named(&c, "batch");
    assert!(!f.is_empty(), "{:#?}", check(&c));
    assert_eq!(
        steps(&f[0])[0],
        "IMPERSONATE on USER::auditor (EXECUTE AS USER = 'auditor')"
    );
    assert!(
        steps(&f[0])[1].starts_with(
            "a context of user auditor here (EXECUTE AS USER = 'auditor') is trusted at server level as login auditor"
        ),
        "{:#?}",
        f[0]
    );
    assert_eq!(f[0].path[1].cut, "ALTER DATABASE [orders] SET TRUSTWORTHY OFF;");
    // auditor's own user is not named for its own login: the login is.
    assert!(named(&c, "auditor").is_empty(), "{:#?}", check(&c));
}

#[test]
fn impersonating_a_user_stays_in_the_database_when_it_is_not_trustworthy_or_its_owner_authenticates_nothing() {
    let mut c = clean();
    trustworthy_here(&mut c);
    c.settings.as_mut().unwrap().trustworthy = false;
    assert!(named(&c, "batch").is_empty(), "{:#?}", check(&c));
    // TRUSTWORTHY, but owned by a login with no server right.
    let mut c = clean();
    trustworthy_here(&mut c);
    c.principals[0].login = Some("orders_owner".into());
    c.principals[0].login_kind = Some(fencepost::audit::LoginKind::Windows);
    assert!(named(&c, "batch").is_empty(), "{:#?}", check(&c));
}

#[test]
fn publics_rights_in_a_trustworthy_database_owned_by_a_privileged_login_cannot_be_followed() {
    // Every login with a user there holds public's grants: which logins
    // those are, the reader does not list. An unprivileged owner's database
    // lends no one anything.
    for (owner, unverified) in [("sa", true), ("plain_owner", false)] {
        let mut c = clean();
        c.trustworthy_databases.as_mut().unwrap().push(OtherDatabase {
            name: "tools".into(),
            owner: Some(owner.into()),
            db_owners: Some(vec![OtherDatabaseUser {
                user: "public".into(),
                login: None,
                via: "public".into(),
                right: "CONTROL ON SCHEMA::dbo".into(),
            }]),
        });
        let report = check(&c);
        let reasons: Vec<&str> = report
            .cannot_verify
            .iter()
            .filter(|u| u.rule == Rule::ReachesFence)
            .map(|u| u.reason.as_str())
            .collect();
        assert_eq!(!reasons.is_empty(), unverified, "{owner}: {report:#?}");
        if unverified {
            assert!(
                reasons[0].starts_with(
                    "public holds CONTROL ON SCHEMA::dbo in TRUSTWORTHY database tools, owned by the privileged login sa"
                ),
                "{}",
                reasons[0]
            );
            assert!(
                reasons[0].ends_with("(USE [tools]; REVOKE CONTROL ON SCHEMA::dbo FROM [public];)"),
                "{}",
                reasons[0]
            );
        }
    }
}

/// A TRUSTWORTHY database `reports` whose owner holds AUTHENTICATE SERVER,
/// with analyst in its db_owner, and here only `writer` (of `kind`) in
/// db_datawriter: every other user with a login is left out, so that the
/// only way analyst can reach the fence is by acting as writer's login.
fn only_writer_has_a_login(writer: &str, kind: fencepost::audit::LoginKind) -> Catalog {
    let mut c = clean();
    c.principals.retain(|p| p.login.is_none() || p.name == "dbo");
    c.principals[0].login = None;
    c.memberships.retain(|m| m.member != "deployer");
    let principal_kind = if kind.is_group() {
        fencepost::audit::PrincipalKind::Group
    } else {
        fencepost::audit::PrincipalKind::User
    };
    c.principals.push(fencepost::audit::Principal {
        login: Some(writer.into()),
        login_kind: Some(kind),
        ..fencepost::audit::Principal::new(writer, principal_kind)
    });
    c.memberships.push(member("db_datawriter", writer));
    if kind.is_group() {
        server(&mut c).group_logins.push(writer.into());
    }
    server(&mut c)
        .permissions
        .push(server_grant("reports_owner", "AUTHENTICATE SERVER"));
    trustworthy(
        &mut c,
        "reports",
        "reports_owner",
        &[("analyst", "analyst", "db_owner")],
    );
    c
}

#[test]
fn db_owner_of_a_trustworthy_database_acts_as_a_writers_sql_login() {
    let c = only_writer_has_a_login("etl", fencepost::audit::LoginKind::Sql);
    let f = named(&c, "login analyst");
    assert!(
        f.iter()
            .any(|f| steps(f)[0].contains("CREATE USER ... FOR LOGIN [etl]")),
        "{:#?}",
        check(&c)
    );
}

/// "EXECUTE AS (Transact-SQL)": the name "must be a singleton account, and
/// cannot be a group", but "CREATE USER" makes a user for a Windows account
/// that enters through a group login without one of its own, and the token
/// of a Windows user acted as carries its groups: the group's rights here
/// are reached through any member.
#[test]
fn db_owner_of_a_trustworthy_database_acts_as_a_group_login_through_a_member() {
    let c = only_writer_has_a_login("CORP\\etl-operators", fencepost::audit::LoginKind::WindowsGroup);
    let f = named(&c, "login analyst");
    assert!(
        f.iter()
            .any(|f| steps(f)[0].contains("CREATE USER for a member of the group [CORP\\etl-operators]")),
        "{:#?}",
        check(&c)
    );
}

/// A certificate-mapped login is no account at all: no one acts as it.
#[test]
fn db_owner_of_a_trustworthy_database_cannot_act_as_a_certificate_login() {
    let c = only_writer_has_a_login("cert_login", fencepost::audit::LoginKind::Key);
    assert!(named(&c, "login analyst").is_empty(), "{:#?}", check(&c));
}
