//! FP027 over server principals, on layouts written from Microsoft's
//! documentation ("Permissions of Fixed Server Roles", "GRANT Server
//! Permissions", ALTER LOGIN, ALTER SERVER ROLE, ALTER AVAILABILITY GROUP).
//! Each is a login or server role that no service is behind: no rule before
//! these edges named it.

use crate::support;

use fencepost::audit::{AvailabilityGroupPermission, Catalog, Finding, LoginKind, Rule, ServerFacts, ServerRoleOwner};
use support::fixtures::*;

fn server(c: &mut Catalog) -> &mut ServerFacts {
    c.server.as_mut().unwrap()
}

fn reach(c: &Catalog) -> Vec<Finding> {
    only(&check(c), Rule::ReachesFence)
}

fn named<'f>(findings: &'f [Finding], principal: &str) -> Vec<&'f Finding> {
    findings
        .iter()
        .filter(|f| f.principal.as_deref() == Some(principal))
        .collect()
}

fn steps(f: &Finding) -> Vec<&str> {
    f.path.iter().map(|s| s.step.as_str()).collect()
}

/// An ETL user in db_datawriter whose login is a SQL login.
fn etl(c: &mut Catalog) {
    let mut etl = user("etl", Some("etl"));
    etl.login_kind = Some(LoginKind::Sql);
    c.principals.push(etl);
    c.memberships.push(member("db_datawriter", "etl"));
}

#[test]
fn impersonate_any_login_acts_as_a_sysadmin() {
    // "IMPERSONATE ANY LOGIN: ... can impersonate any login", sa included.
    let mut c = clean();
    server(&mut c)
        .permissions
        .push(server_grant("monitor", "IMPERSONATE ANY LOGIN"));
    let f = reach(&c);
    let monitor = named(&f, "login monitor");
    assert_eq!(monitor.len(), 3, "{f:#?}");
    assert!(
        steps(monitor[0])[0].starts_with("IMPERSONATE ANY LOGIN (EXECUTE AS LOGIN = '"),
        "{:#?}",
        monitor[0]
    );
    assert_eq!(monitor[0].fix, "REVOKE IMPERSONATE ANY LOGIN FROM [monitor];");
}

#[test]
fn alter_any_login_resets_a_writers_sql_login_but_not_a_sysadmins() {
    // ALTER LOGIN: ALTER ANY LOGIN resets a password; a sysadmin's or a
    // CONTROL SERVER grantee's needs CONTROL SERVER too.
    let mut c = clean();
    etl(&mut c);
    server(&mut c)
        .permissions
        .push(server_grant("helpdesk", "ALTER ANY LOGIN"));
    let f = reach(&c);
    let helpdesk: Vec<_> = named(&f, "login helpdesk")
        .into_iter()
        .filter(|f| f.permission.as_deref() == Some("write the fence tables"))
        .collect();
    assert_eq!(helpdesk.len(), 1, "{f:#?}");
    assert_eq!(
        steps(helpdesk[0])[..2],
        [
            "ALTER ANY LOGIN: resets the password of etl (ALTER LOGIN [etl] WITH PASSWORD = '...')",
            "enters the database as user etl"
        ]
    );
    assert!(
        f.iter().all(|f| !f
            .path
            .iter()
            .any(|s| s.step.contains("password of sa") || s.step.contains("password of deployer"))),
        "{f:#?}"
    );
    // A Windows login has no password here to reset.
    let mut c = clean();
    etl(&mut c);
    c.principals.last_mut().unwrap().login_kind = Some(LoginKind::Windows);
    server(&mut c)
        .permissions
        .push(server_grant("helpdesk", "ALTER ANY LOGIN"));
    let report = check(&c);
    assert!(
        named(&report.findings, "login helpdesk")
            .iter()
            .all(|f| f.permission.as_deref() != Some("write the fence tables")),
        "{report:#?}"
    );
}

#[test]
fn alter_any_login_resets_the_database_owners_login_and_so_becomes_dbo() {
    // The database is owned by a SQL login that is not sysadmin: whoever
    // resets its password enters as dbo.
    let mut c = clean();
    c.principals[0].login = Some("orders_owner".into());
    c.principals[0].login_kind = Some(LoginKind::Sql);
    server(&mut c)
        .permissions
        .push(server_grant("helpdesk", "ALTER ANY LOGIN"));
    let f = reach(&c);
    let helpdesk = named(&f, "login helpdesk");
    assert_eq!(helpdesk.len(), 3, "{f:#?}");
    assert_eq!(
        steps(helpdesk[0])[..2],
        [
            "ALTER ANY LOGIN: resets the password of orders_owner (ALTER LOGIN [orders_owner] WITH PASSWORD = '...')",
            "enters the database as user dbo"
        ]
    );
}

#[test]
fn securityadmin_grants_itself_control_server() {
    // "The securityadmin role should be treated as equivalent to the
    // sysadmin role": its members may grant server permissions.
    let mut c = clean();
    server(&mut c).role_members.push(member("securityadmin", "secops"));
    let f = reach(&c);
    let role = named(&f, "server role securityadmin");
    assert_eq!(role.len(), 3, "{f:#?}");
    assert!(
        role[0].why.ends_with("its members login secops hold the same path"),
        "{}",
        role[0].why
    );
    assert!(
        f.iter()
            .any(|f| steps(f).iter().any(|s| s.starts_with("may GRANT server permissions"))),
        "{f:#?}"
    );
}

#[test]
fn control_server_is_trusted_as_sysadmin_and_listed() {
    // CONTROL SERVER passes every permission check: an administrator,
    // trusted as sysadmin is, and listed with its path, never silently.
    let mut c = clean();
    server(&mut c).permissions.push(server_grant("dba", "CONTROL SERVER"));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
    let dba = report
        .trusted
        .iter()
        .find(|t| t.principal == "login dba")
        .expect("login dba listed as trusted");
    assert_eq!(dba.reaches.len(), 3);
    assert!(dba.trusted_as.starts_with("CONTROL SERVER"), "{dba:#?}");
}

#[test]
fn impersonating_a_control_server_login_is_a_finding() {
    let mut c = clean();
    server(&mut c).permissions.push(server_grant("dba", "CONTROL SERVER"));
    let mut imp = server_grant("support", "IMPERSONATE");
    imp.on_login = Some("dba".into());
    server(&mut c).permissions.push(imp);
    let f = reach(&c);
    let support = named(&f, "login support");
    assert_eq!(support.len(), 3, "{f:#?}");
    assert_eq!(
        steps(support[0])[..2],
        [
            "IMPERSONATE on LOGIN::dba (EXECUTE AS LOGIN = 'dba')",
            "CONTROL SERVER: passes every permission check, as sysadmin does"
        ]
    );
}

/// A user-defined server role `ops` that holds CONTROL SERVER.
fn ops(c: &mut Catalog) {
    server(c).roles.push("ops".into());
    server(c).role_members.push(member("ops", "alice"));
    server(c).permissions.push(server_grant("ops", "CONTROL SERVER"));
}

#[test]
fn the_owner_of_a_server_role_that_controls_the_server_joins_it() {
    // ALTER SERVER ROLE ... ADD MEMBER: "membership in the role that owns
    // the role, ALTER on the role or ALTER ANY SERVER ROLE".
    let mut c = clean();
    ops(&mut c);
    server(&mut c).role_owners.push(ServerRoleOwner {
        role: "ops".into(),
        owner: "team_lead".into(),
    });
    let f = reach(&c);
    let lead = named(&f, "login team_lead");
    assert_eq!(lead.len(), 3, "{f:#?}");
    assert_eq!(
        steps(lead[0])[0],
        "owns server role ops: may add itself to it (ALTER SERVER ROLE [ops] ADD MEMBER)"
    );
    assert_eq!(lead[0].fix, "ALTER AUTHORIZATION ON SERVER ROLE::[ops] TO [sa];");
    // ops' members are administrators, trusted as sysadmin.
    assert!(named(&f, "login alice").is_empty(), "{f:#?}");
}

#[test]
fn alter_any_server_role_joins_a_role_that_controls_the_server() {
    let mut c = clean();
    ops(&mut c);
    server(&mut c)
        .permissions
        .push(server_grant("roles_admin", "ALTER ANY SERVER ROLE"));
    let f = reach(&c);
    let admin = named(&f, "login roles_admin");
    assert_eq!(admin.len(), 3, "{f:#?}");
    assert_eq!(
        steps(admin[0])[..2],
        [
            "ALTER ANY SERVER ROLE: may add itself to server role ops (ALTER SERVER ROLE [ops] ADD MEMBER)",
            "CONTROL SERVER: passes every permission check, as sysadmin does"
        ]
    );
}

#[test]
fn alter_any_availability_group_forces_a_failover_that_takes_generations_back() {
    // ALTER AVAILABILITY GROUP ... FORCE_FAILOVER_ALLOW_DATA_LOSS needs
    // ALTER AVAILABILITY GROUP, which ALTER ANY AVAILABILITY GROUP covers.
    let mut c = clean();
    server(&mut c)
        .permissions
        .push(server_grant("ha_operator", "ALTER ANY AVAILABILITY GROUP"));
    let f = reach(&c);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].principal.as_deref(), Some("login ha_operator"));
    assert_eq!(f[0].object, "the fence's generations");
    assert!(steps(&f[0])[0].contains("FORCE_FAILOVER_ALLOW_DATA_LOSS"), "{f:#?}");
    assert_eq!(f[0].fix, "REVOKE ALTER ANY AVAILABILITY GROUP FROM [ha_operator];");
}

#[test]
fn a_service_logins_impersonate_any_login_keeps_fp016_with_the_path() {
    let mut c = clean();
    server(&mut c)
        .permissions
        .push(server_grant("orders_svc", "IMPERSONATE ANY LOGIN"));
    let f = only(&check(&c), Rule::ServerPrivilege);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(
        steps(&f[0])[0].starts_with("IMPERSONATE ANY LOGIN (EXECUTE AS LOGIN"),
        "{f:#?}"
    );
}

#[test]
fn alter_any_login_resets_a_securityadmin_member_without_a_user_here() {
    // securityadmin holds ALTER ANY LOGIN; its member secadm has no user in
    // this database, yet helpdesk may reset its password and act as it.
    let mut c = clean();
    for p in c.principals.iter_mut().filter(|p| p.login.is_some()) {
        p.login_kind = Some(fencepost::audit::LoginKind::Windows);
    }
    let server = c.server.as_mut().unwrap();
    server.role_members.push(member("securityadmin", "secadm"));
    server.permissions.push(server_grant("helpdesk", "ALTER ANY LOGIN"));
    let report = check(&c);
    assert!(
        report.findings.iter().any(|f| f.rule == fencepost::audit::Rule::ReachesFence
            && f.principal.as_deref() == Some("login helpdesk")),
        "{report:#?}"
    );
}

/// A permission on availability group `ag_orders` ("GRANT Availability
/// Group Permissions"), granted or denied.
fn on_group(grantee: &str, permission: &str, denied: bool) -> AvailabilityGroupPermission {
    AvailabilityGroupPermission {
        grantee: grantee.into(),
        permission: permission.into(),
        group: "ag_orders".into(),
        denied,
        owner: false,
    }
}

/// `login` owns availability group `ag_orders`, as
/// `sys.availability_replicas.owner_sid` shows.
fn owns_group(login: &str) -> AvailabilityGroupPermission {
    AvailabilityGroupPermission {
        owner: true,
        ..on_group(login, "CONTROL", false)
    }
}

#[test]
fn the_owner_of_an_availability_group_forces_a_failover() {
    // "ALTER AUTHORIZATION": ALTER AUTHORIZATION ON AVAILABILITY GROUP::ag
    // TO app_login makes app_login the owner, which holds CONTROL on the
    // group with no row in sys.server_permissions; "ALTER AVAILABILITY
    // GROUP": CONTROL lets it FORCE_FAILOVER_ALLOW_DATA_LOSS. An owner is
    // bound by no DENY on what it owns.
    let mut c = clean();
    server(&mut c).availability_groups.push(owns_group("app_login"));
    server(&mut c)
        .availability_groups
        .push(on_group("app_login", "CONTROL", true));
    let f = reach(&c);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].principal.as_deref(), Some("login app_login"));
    let step = steps(&f[0])[0];
    assert!(step.contains("owns AVAILABILITY GROUP::ag_orders"), "{f:#?}");
    assert!(step.contains("FORCE_FAILOVER_ALLOW_DATA_LOSS"), "{f:#?}");
    assert!(
        f[0].fix
            .starts_with("ALTER AUTHORIZATION ON AVAILABILITY GROUP::[ag_orders]"),
        "{f:#?}"
    );
}

#[test]
fn control_an_availability_group_owned_by_a_sysadmin_forces_nothing_new() {
    // sa, the group's owner here, is sysadmin and trusted already.
    let mut c = clean();
    server(&mut c).availability_groups.push(owns_group("sa"));
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
}

#[test]
fn alter_control_or_take_ownership_on_one_availability_group_forces_a_failover() {
    // "ALTER AVAILABILITY GROUP": FORCE_FAILOVER_ALLOW_DATA_LOSS "requires
    // ALTER AVAILABILITY GROUP permission on the availability group, CONTROL
    // AVAILABILITY GROUP permission, ALTER ANY AVAILABILITY GROUP
    // permission, or CONTROL SERVER permission"; TAKE OWNERSHIP makes the
    // grantee the owner, who holds CONTROL.
    for permission in ["ALTER", "CONTROL", "TAKE OWNERSHIP"] {
        let mut c = clean();
        server(&mut c)
            .availability_groups
            .push(on_group("ha_operator", permission, false));
        let f = reach(&c);
        assert_eq!(f.len(), 1, "{permission}: {f:#?}");
        assert_eq!(f[0].principal.as_deref(), Some("login ha_operator"));
        assert_eq!(f[0].object, "the fence's generations");
        let step = steps(&f[0])[0];
        assert!(
            step.starts_with(&format!("{permission} on AVAILABILITY GROUP::ag_orders")),
            "{f:#?}"
        );
        assert!(step.contains("FORCE_FAILOVER_ALLOW_DATA_LOSS"), "{f:#?}");
        assert_eq!(
            f[0].fix,
            format!("REVOKE {permission} ON AVAILABILITY GROUP::[ag_orders] FROM [ha_operator];")
        );
    }
}

#[test]
fn control_view_definition_or_a_denied_alter_on_an_availability_group_forces_nothing() {
    // VIEW DEFINITION and CONNECT fail over nothing; a DENY of ALTER on the
    // same group refuses the grant of ALTER ("DENY Availability Group
    // Permissions").
    for grants in [
        vec![on_group("ha_operator", "VIEW DEFINITION", false)],
        vec![on_group("ha_operator", "CONNECT", false)],
        vec![
            on_group("ha_operator", "ALTER", false),
            on_group("ha_operator", "ALTER", true),
        ],
        vec![
            on_group("ha_operator", "CONTROL", false),
            on_group("ha_operator", "CONTROL", true),
        ],
    ] {
        let mut c = clean();
        server(&mut c).availability_groups.extend(grants.clone());
        let report = check(&c);
        assert!(report.findings.is_empty(), "{grants:?}: {report:#?}");
    }
}
