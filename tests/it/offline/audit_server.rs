//! Server scope: server roles and permissions of service logins (fixed
//! roles' permissions included, which no catalog row shows), cross-database
//! paths, Azure SQL Database, and fixes that work.

use crate::support;

use fencepost::audit::{Catalog, OtherDatabase, OtherDatabaseUser, Rule, ServerPermission, ServerSettings};
use support::fixtures::*;

fn server(c: &mut Catalog) -> &mut fencepost::audit::ServerFacts {
    c.server.as_mut().expect("the clean fixture shows server facts")
}

/// (permission path, fix) of each FP016 finding about orders_svc.
fn fp016(c: &Catalog) -> Vec<(String, String)> {
    only(&check(c), Rule::ServerPrivilege)
        .into_iter()
        .map(|f| {
            assert_eq!(f.principal.as_deref(), Some("orders_svc"));
            (f.permission.unwrap(), f.fix)
        })
        .collect()
}

#[test]
fn securityadmin_counts_as_sysadmin() {
    let mut c = clean();
    server(&mut c).role_members.push(member("securityadmin", "orders_svc"));
    assert_eq!(
        fp016(&c),
        [(
            "member of securityadmin".to_string(),
            "ALTER SERVER ROLE [securityadmin] DROP MEMBER [orders_svc];".to_string()
        )]
    );
}

#[test]
fn fixed_role_permissions_count_though_no_permission_row_shows_them() {
    let mut c = clean();
    server(&mut c)
        .role_members
        .push(member("##MS_DatabaseManager##", "orders_svc"));
    server(&mut c)
        .role_members
        .push(member("##MS_LoginManager##", "orders_svc"));
    let found = fp016(&c);
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "ALTER ANY DATABASE as member of ##MS_DatabaseManager##",
            "ALTER ANY LOGIN as member of ##MS_LoginManager##",
        ]
    );
    assert_eq!(
        found[0].1,
        "ALTER SERVER ROLE [##MS_DatabaseManager##] DROP MEMBER [orders_svc];"
    );
}

#[test]
fn server_permissions_that_reach_the_fence_are_named_with_their_revoke() {
    let mut c = clean();
    server(&mut c).role_members.push(member("app_ops", "orders_svc"));
    for p in [
        "ALTER ANY DATABASE",
        "IMPERSONATE ANY LOGIN",
        "ALTER ANY LOGIN",
        "SELECT ALL USER SECURABLES",
    ] {
        server(&mut c).permissions.push(server_grant("app_ops", p));
    }
    let fixes: Vec<String> = fp016(&c).into_iter().map(|(_, fix)| fix).collect();
    assert_eq!(
        fixes,
        [
            "REVOKE ALTER ANY DATABASE FROM [app_ops];",
            "REVOKE ALTER ANY LOGIN FROM [app_ops];",
            "REVOKE IMPERSONATE ANY LOGIN FROM [app_ops];",
            "REVOKE SELECT ALL USER SECURABLES FROM [app_ops];",
        ]
    );
}

#[test]
fn impersonate_or_control_on_a_privileged_login_is_a_finding_on_another_is_not() {
    let mut c = clean();
    let on = |permission: &str, login: &str| ServerPermission {
        grantee: "orders_svc".into(),
        permission: permission.into(),
        on_login: Some(login.into()),
    };
    server(&mut c).permissions.push(on("IMPERSONATE", "sa"));
    server(&mut c).permissions.push(on("CONTROL", "deployer"));
    server(&mut c).permissions.push(on("IMPERSONATE", "reporting"));
    let found = fp016(&c);
    let fixes: Vec<&str> = found.iter().map(|(_, f)| f.as_str()).collect();
    assert_eq!(
        fixes,
        [
            "REVOKE CONTROL ON LOGIN::[deployer] FROM [orders_svc];",
            "REVOKE IMPERSONATE ON LOGIN::[sa] FROM [orders_svc];",
        ]
    );
}

#[test]
fn sa_is_never_asked_to_leave_sysadmin() {
    let mut c = clean();
    c.principals.push(user("svc_as_sa", Some("sa")));
    c.memberships.push(member("fence_service", "svc_as_sa"));
    let f = only(&check(&c), Rule::ServerControl);
    assert_eq!(
        f[0].fix,
        "connect the service with a login of its own that holds only the fence_service role ([sa] cannot leave \
         sysadmin)"
    );
}

#[test]
fn the_server_option_for_cross_database_chaining_is_a_finding() {
    let mut c = clean();
    c.server_settings = Some(ServerSettings {
        cross_db_ownership_chaining: true,
        common_criteria_compliance: Some(false),
    });
    let f = only(&check(&c), Rule::CrossDatabaseChaining);
    assert_eq!(
        f[0].fix,
        "EXEC sp_configure 'cross db ownership chaining', 0; RECONFIGURE;"
    );
    c.server_settings = None;
    assert_eq!(unverified(&check(&c)), ["FP012"]);
}

fn msdb_owner(c: &mut Catalog, user: &str, login: &str, via: &str) {
    let msdb = &mut c.trustworthy_databases.as_mut().unwrap()[0];
    msdb.db_owners.as_mut().unwrap().push(OtherDatabaseUser {
        user: user.into(),
        login: Some(login.into()),
        via: via.into(),
        right: "db_owner".into(),
    });
}

#[test]
fn a_service_in_db_owner_of_msdb_which_is_trustworthy_and_owned_by_sa_is_a_finding() {
    let mut c = clean();
    msdb_owner(&mut c, "orders_svc", "orders_svc", "jobs_admins");
    let f = only(&check(&c), Rule::TrustworthyElsewhere);
    assert_eq!(f[0].object, "DATABASE::msdb");
    assert_eq!(f[0].fix, "USE [msdb]; ALTER ROLE [db_owner] DROP MEMBER [jobs_admins];");
}

#[test]
fn a_trustworthy_database_owned_by_an_unprivileged_login_is_not_a_path() {
    let mut c = clean();
    c.trustworthy_databases.as_mut().unwrap().push(OtherDatabase {
        name: "scratch".into(),
        owner: Some("reporting".into()),
        db_owners: Some(vec![OtherDatabaseUser {
            user: "orders_svc".into(),
            login: Some("orders_svc".into()),
            via: "orders_svc".into(),
            right: "db_owner".into(),
        }]),
    });
    assert_eq!(check(&c).exit_code(), 0);
}

#[test]
fn an_unreadable_trustworthy_database_or_list_cannot_be_verified() {
    let mut c = clean();
    c.trustworthy_databases.as_mut().unwrap()[0].db_owners = None;
    let report = check(&c);
    assert_eq!(unverified(&report), ["FP018"]);
    assert!(report.cannot_verify[0].reason.contains("TRUSTWORTHY database msdb"));
    c.trustworthy_databases = None;
    assert_eq!(unverified(&check(&c)), ["FP018"]);
}

#[test]
fn on_azure_sql_database_there_is_no_sysadmin_to_look_at_and_the_admins_enter_as_dbo() {
    let mut c = clean();
    c.engine.azure_database = true;
    c.engine.product = "Azure SQL Database".into();
    let report = check(&c);
    assert!(report.findings.is_empty());
    assert_eq!(unverified(&report), ["FP002", "FP015"]);
    // A service in ##MS_DatabaseManager## is still named.
    server(&mut c)
        .role_members
        .push(member("##MS_DatabaseManager##", "orders_svc"));
    assert_eq!(check(&c).findings_of(Rule::ServerPrivilege).count(), 1);
}

#[test]
fn hidden_server_facts_leave_the_server_rules_unverified_naming_an_accepted_permission() {
    let mut c = clean();
    c.server = None;
    let report = check(&c);
    assert_eq!(unverified(&report), ["FP002", "FP016", "FP022"]);
    assert!(
        report.cannot_verify[0]
            .reason
            .contains("(it needs VIEW ANY DEFINITION, or to be sysadmin)"),
        "{report:#?}"
    );
}

#[test]
fn fp009_re_owns_the_table_when_the_table_left_its_schema_owner() {
    let mut c = clean();
    object_mut(&mut c, "fence.Resource").owner = Some("deployer".into());
    let report = check(&c);
    let fixes: Vec<&str> = report
        .findings_of(Rule::OwnershipChain)
        .map(|f| f.fix.as_str())
        .collect();
    assert!(!fixes.is_empty());
    assert!(
        fixes
            .iter()
            .all(|f| *f == "ALTER AUTHORIZATION ON OBJECT::[fence].[Resource] TO SCHEMA OWNER;"),
        "{fixes:?}"
    );
}

#[test]
fn fp009_re_owns_the_code_schema_when_the_schemas_have_different_owners() {
    let mut c = clean();
    c.schemas.iter_mut().find(|s| s.name == "fence_admin").unwrap().owner = "deployer".into();
    let fixes: Vec<String> = only(&check(&c), Rule::OwnershipChain)
        .into_iter()
        .map(|f| f.fix)
        .collect();
    assert!(
        fixes
            .iter()
            .all(|f| f == "ALTER AUTHORIZATION ON SCHEMA::[fence_admin] TO [dbo];"),
        "{fixes:?}"
    );
}
