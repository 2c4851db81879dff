//! Paths to the fence the catalog shows only when read as a whole: schemas
//! holding the tables' owner's code (FP020), server rights beyond sysadmin
//! (FP016, FP018), principals that can become services (FP021).

use crate::support;

use fencepost::audit::{Catalog, ObjectKind, OtherDatabaseUser, PermissionState, Rule, Schema, Securable};
use support::fixtures::*;

/// A schema `tools` owned by `owner`, holding `tools.Purge`, whose owner
/// was set to dbo.
fn tools(c: &mut Catalog, owner: &str) {
    c.schemas.push(Schema {
        name: "tools".into(),
        owner: owner.into(),
    });
    let mut purge = module(
        "tools",
        "Purge",
        ObjectKind::Procedure,
        "CREATE PROCEDURE tools.Purge AS SELECT 1",
    );
    purge.owner = Some("dbo".into());
    c.objects.push(purge);
}

#[test]
fn a_service_that_owns_a_schema_holding_a_dbo_owned_procedure_may_rewrite_it() {
    let mut c = clean();
    tools(&mut c, "orders_svc");
    let f = only(&check(&c), Rule::SchemaCode);
    assert_eq!(f[0].principal.as_deref(), Some("orders_svc"));
    assert_eq!(f[0].object, "SCHEMA::tools");
    assert_eq!(
        f[0].fix,
        "ALTER AUTHORIZATION ON OBJECT::[tools].[Purge] TO SCHEMA OWNER;"
    );
}

#[test]
fn a_role_owning_the_schema_or_alter_on_a_foreign_owned_schema_is_the_same_path() {
    let mut c = clean();
    c.principals.push(role("app_devs"));
    c.memberships.push(member("app_devs", "orders_svc"));
    tools(&mut c, "app_devs");
    let f = only(&check(&c), Rule::SchemaCode);
    assert!(f[0].why.contains("orders_svc"), "{}", f[0].why);

    let mut c = clean();
    c.principals.push(user("bob", Some("bob")));
    tools(&mut c, "bob");
    c.permissions.push(grant("dashboard", "ALTER", schema("tools")));
    let f = only(&check(&c), Rule::SchemaCode);
    let fixes: Vec<&str> = f.iter().map(|f| f.fix.as_str()).collect();
    assert!(
        fixes.contains(&"REVOKE ALTER ON SCHEMA::[tools] FROM [dashboard];"),
        "{fixes:?}"
    );
    // bob owns it too, and is no administrator.
    assert!(f.iter().any(|f| f.principal.as_deref() == Some("bob")), "{f:#?}");
}

#[test]
fn alter_on_a_procedure_in_the_fence_schema_itself_is_a_code_change() {
    let mut c = clean();
    c.objects.push(module(
        "fence",
        "Helper",
        ObjectKind::Procedure,
        "CREATE PROCEDURE fence.Helper AS SELECT 1",
    ));
    c.permissions
        .push(grant("orders_svc", "ALTER", object("fence", "Helper")));
    let f = only(&check(&c), Rule::CodeChange);
    assert_eq!(f[0].fix, "REVOKE ALTER ON OBJECT::[fence].[Helper] FROM [orders_svc];");
}

#[test]
fn take_ownership_of_a_dbo_schema_holding_an_explicitly_dbo_owned_module_is_schema_code() {
    let mut c = clean();
    object_mut(&mut c, "dbo.ShipOrder").owner = Some("dbo".into());
    c.permissions.push(grant("orders_svc", "TAKE OWNERSHIP", schema("dbo")));
    let f = only(&check(&c), Rule::SchemaCode);
    assert!(f[0].why.contains("dbo.ShipOrder"), "{}", f[0].why);
}

fn server(c: &mut Catalog) -> &mut fencepost::audit::ServerFacts {
    c.server.as_mut().unwrap()
}

fn fp016_paths(c: &Catalog) -> Vec<String> {
    only(&check(c), Rule::ServerPrivilege)
        .into_iter()
        .map(|f| f.permission.unwrap())
        .collect()
}

#[test]
fn impersonating_a_login_that_is_db_owner_here_or_owns_the_database_reaches_the_fence() {
    let mut c = clean();
    server(&mut c).role_members.retain(|m| m.member != "deployer");
    let mut imp = server_grant("orders_svc", "IMPERSONATE");
    imp.on_login = Some("deployer".into());
    server(&mut c).permissions.push(imp);
    assert_eq!(fp016_paths(&c), ["IMPERSONATE ON LOGIN::deployer"]);

    let mut c = clean();
    server(&mut c).role_members.retain(|m| m.member != "sa");
    c.principals[0].login = Some("owner_login".into());
    let mut control = server_grant("orders_svc", "CONTROL");
    control.on_login = Some("owner_login".into());
    server(&mut c).permissions.push(control);
    let f = only(&check(&c), Rule::ServerPrivilege);
    assert!(f[0].why.contains("owns this database"), "{}", f[0].why);
    assert_eq!(f[0].fix, "REVOKE CONTROL ON LOGIN::[owner_login] FROM [orders_svc];");
}

#[test]
fn fixed_server_roles_beyond_sysadmin_reach_the_fence() {
    for (role, path) in [
        ("dbcreator", "member of dbcreator"),
        ("serveradmin", "member of serveradmin"),
        ("bulkadmin", "member of bulkadmin"),
        ("##MS_ServerStateReader##", "member of ##MS_ServerStateReader##"),
    ] {
        let mut c = clean();
        server(&mut c).role_members.push(member(role, "orders_svc"));
        let paths = fp016_paths(&c);
        assert!(paths.iter().any(|p| p == path), "{role}: {paths:?}");
    }
}

#[test]
fn server_permissions_that_watch_or_widen_are_read_and_named() {
    for permission in [
        "ALTER SETTINGS",
        "ALTER TRACE",
        "ALTER ANY EVENT SESSION",
        "VIEW SERVER STATE",
        "ADMINISTER BULK OPERATIONS",
        "AUTHENTICATE SERVER",
        "UNSAFE ASSEMBLY",
    ] {
        let mut c = clean();
        server(&mut c).permissions.push(server_grant("orders_svc", permission));
        assert_eq!(fp016_paths(&c), [permission], "{permission}");
    }
}

#[test]
fn alter_any_server_role_reaches_the_fence_only_when_a_server_role_does() {
    let mut c = clean();
    server(&mut c)
        .permissions
        .push(server_grant("orders_svc", "ALTER ANY SERVER ROLE"));
    assert_eq!(check(&c).exit_code(), 0, "no server role to join holds anything");
    server(&mut c).role_members.push(member("ops", "someone"));
    server(&mut c).permissions.push(server_grant("ops", "CONTROL SERVER"));
    assert_eq!(fp016_paths(&c), ["ALTER ANY SERVER ROLE"]);
    // ALTER on that one role is the same path.
    let mut c = clean();
    server(&mut c).role_members.push(member("ops", "someone"));
    server(&mut c).permissions.push(server_grant("ops", "ALTER ANY LOGIN"));
    let mut alter = server_grant("orders_svc", "ALTER");
    alter.on_login = Some("ops".into());
    server(&mut c).permissions.push(alter);
    let report = check(&c);
    let f: Vec<_> = report.findings_of(Rule::ServerPrivilege).cloned().collect();
    // ops itself resets a fence reader's password (ALTER ANY LOGIN): FP027
    // names the role, whoever the service is.
    let others: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.rule != Rule::ServerPrivilege)
        .collect();
    assert!(
        others
            .iter()
            .all(|f| f.rule == Rule::ReachesFence && f.principal.as_deref() == Some("server role ops")),
        "{others:#?}"
    );
    assert_eq!(f[0].permission.as_deref(), Some("ALTER ON SERVER ROLE::ops"));
    assert!(f[0].why.contains("add members to the server role ops"), "{}", f[0].why);
    assert_eq!(f[0].fix, "REVOKE ALTER ON SERVER ROLE::[ops] FROM [orders_svc];");
}

#[test]
fn a_server_role_without_members_is_still_joined_and_named_as_a_role_not_a_login() {
    // ops has no member yet: only sys.server_principals shows it is a role.
    let mut c = clean();
    server(&mut c).roles.push("ops".into());
    server(&mut c).permissions.push(server_grant("ops", "CONTROL SERVER"));
    server(&mut c)
        .permissions
        .push(server_grant("orders_svc", "ALTER ANY SERVER ROLE"));
    let f = only(&check(&c), Rule::ServerPrivilege);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].principal.as_deref(), Some("orders_svc"));
    assert_eq!(f[0].object, "LOGIN::orders_svc");
    assert_eq!(f[0].permission.as_deref(), Some("ALTER ANY SERVER ROLE"));
    assert!(
        f[0].why.contains("and ops holds rights that reach the fence"),
        "{}",
        f[0].why
    );
    assert_eq!(f[0].fix, "REVOKE ALTER ANY SERVER ROLE FROM [orders_svc];");

    // ALTER on the empty role that holds CONTROL SERVER: a role's statement,
    // not a login's; and IMPERSONATE means nothing on a role.
    let mut c = clean();
    server(&mut c).roles.push("ops".into());
    server(&mut c).permissions.push(server_grant("ops", "CONTROL SERVER"));
    let mut alter = server_grant("orders_svc", "ALTER");
    alter.on_login = Some("ops".into());
    server(&mut c).permissions.push(alter.clone());
    let f = only(&check(&c), Rule::ServerPrivilege);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].permission.as_deref(), Some("ALTER ON SERVER ROLE::ops"));
    assert!(f[0].why.contains("add members to ops"), "{}", f[0].why);
    assert_eq!(f[0].fix, "REVOKE ALTER ON SERVER ROLE::[ops] FROM [orders_svc];");
    let mut c = clean();
    server(&mut c).roles.push("ops".into());
    server(&mut c).permissions.push(server_grant("ops", "CONTROL SERVER"));
    alter.permission = "IMPERSONATE".into();
    server(&mut c).permissions.push(alter);
    assert_eq!(check(&c).exit_code(), 0, "no IMPERSONATE on a server role");

    // The same grant on a login that is db_owner here names the login.
    let mut c = clean();
    server(&mut c).role_members.retain(|m| m.member != "deployer");
    let mut alter = server_grant("orders_svc", "ALTER");
    alter.on_login = Some("deployer".into());
    server(&mut c).permissions.push(alter);
    let f = only(&check(&c), Rule::ServerPrivilege);
    assert_eq!(f[0].permission.as_deref(), Some("ALTER ON LOGIN::deployer"));
    assert!(f[0].why.contains("act as the login deployer"), "{}", f[0].why);
    assert_eq!(f[0].fix, "REVOKE ALTER ON LOGIN::[deployer] FROM [orders_svc];");
}

#[test]
fn a_trustworthy_database_owned_by_this_databases_owner_is_a_path_and_ddladmin_there_is_too() {
    let mut c = clean();
    server(&mut c).role_members.retain(|m| m.member != "sa");
    c.principals[0].login = Some("app_owner".into());
    c.trustworthy_databases
        .as_mut()
        .unwrap()
        .push(fencepost::audit::OtherDatabase {
            name: "tools_db".into(),
            owner: Some("app_owner".into()),
            db_owners: Some(vec![OtherDatabaseUser {
                user: "orders_svc".into(),
                login: Some("orders_svc".into()),
                via: "orders_svc".into(),
                right: "db_ddladmin".into(),
            }]),
        });
    let f = only(&check(&c), Rule::TrustworthyElsewhere);
    assert_eq!(
        f[0].fix,
        "USE [tools_db]; ALTER ROLE [db_ddladmin] DROP MEMBER [orders_svc];"
    );
}

#[test]
fn a_reader_that_can_impersonate_a_service_or_join_its_role_can_become_one() {
    let mut c = clean();
    c.permissions.push(grant(
        "reporting",
        "IMPERSONATE",
        Securable::Principal {
            name: "orders_svc".into(),
        },
    ));
    c.permissions.push(grant(
        "reporting",
        "ALTER",
        Securable::Principal {
            name: "fence_service".into(),
        },
    ));
    c.permissions
        .push(grant("reporting", "ALTER ANY ROLE", Securable::Database));
    let fixes: Vec<String> = only(&check(&c), Rule::BecomeService)
        .into_iter()
        .map(|f| f.fix)
        .collect();
    assert_eq!(
        fixes,
        [
            "REVOKE ALTER ANY ROLE FROM [reporting];",
            "REVOKE ALTER ON ROLE::[fence_service] FROM [reporting];",
            "REVOKE IMPERSONATE ON USER::[orders_svc] FROM [reporting];",
        ]
    );
}

#[test]
fn db_securityadmin_or_owning_a_fence_role_is_becoming_a_service() {
    let mut c = clean();
    c.principals.push(role("db_securityadmin"));
    c.memberships.push(member("db_securityadmin", "reporting"));
    let f = only(&check(&c), Rule::BecomeService);
    assert_eq!(f[0].fix, "ALTER ROLE [db_securityadmin] DROP MEMBER [reporting];");

    let mut c = clean();
    c.principals
        .iter_mut()
        .find(|p| p.name == "fence_operator")
        .unwrap()
        .owner = Some("reporting".into());
    let f = only(&check(&c), Rule::BecomeService);
    assert_eq!(f[0].fix, "ALTER AUTHORIZATION ON ROLE::[fence_operator] TO [dbo];");
}

#[test]
fn a_non_service_with_alter_on_a_dbo_table_adds_a_chaining_trigger() {
    let mut c = clean();
    c.permissions.push(grant("reporting", "ALTER", object("dbo", "Orders")));
    let f = only(&check(&c), Rule::CodeChange);
    assert_eq!(f[0].principal.as_deref(), Some("reporting"));
    // An administrator holding it is not named.
    let mut c = clean();
    c.permissions.push(grant("deployer", "ALTER", object("dbo", "Orders")));
    assert_eq!(check(&c).exit_code(), 0);
}

#[test]
fn with_grant_option_on_force_release_is_execute_beyond_the_role() {
    let mut c = clean();
    let p = c
        .permissions
        .iter_mut()
        .find(|p| {
            p.grantee == "fence_operator" && matches!(&p.on, Securable::Object { name, .. } if name == "ForceRelease")
        })
        .unwrap();
    p.state = PermissionState::GrantWithGrantOption;
    let f = only(&check(&c), Rule::ExecuteBeyondRole);
    assert_eq!(
        f[0].fix,
        "REVOKE EXECUTE ON OBJECT::[fence_admin].[ForceRelease] FROM [fence_operator] CASCADE;"
    );
}

#[test]
fn alter_any_user_for_a_non_service_that_may_put_code_in_a_schema_redirects_a_service() {
    let mut c = clean();
    c.permissions
        .push(grant("reporting", "ALTER ANY USER", Securable::Database));
    // No schema it may put code in: the default schemas it could set hold
    // only what others put there (FP022 weighs those).
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0);
    // A schema of its own, but no module there and no right to create one.
    let mut owns = c.clone();
    owns.schemas.push(Schema {
        name: "rpt".into(),
        owner: "reporting".into(),
    });
    let report = check(&owns);
    assert!(report.findings.is_empty(), "{report:#?}");
    for how in ["owns", "ALTER"] {
        let mut c = c.clone();
        if how == "owns" {
            c.schemas.push(Schema {
                name: "rpt".into(),
                owner: "reporting".into(),
            });
            c.permissions
                .push(grant("reporting", "CREATE PROCEDURE", Securable::Database));
        } else {
            c.principals.push(role("rpt_owners"));
            c.schemas.push(Schema {
                name: "rpt".into(),
                owner: "rpt_owners".into(),
            });
            c.permissions.push(grant("reporting", "ALTER", schema("rpt")));
            // A module already there, which ALTER on the schema rewrites.
            c.objects.push(module(
                "rpt",
                "Acquire",
                ObjectKind::Procedure,
                "CREATE PROCEDURE rpt.Acquire AS SELECT 1;",
            ));
        }
        let f = only(&check(&c), Rule::BecomeService);
        assert_eq!(f.len(), 1, "{how}: {f:#?}");
        assert_eq!(f[0].principal.as_deref(), Some("reporting"));
        assert!(
            f[0].why.contains("ALTER USER [dashboard] WITH DEFAULT_SCHEMA = [rpt]"),
            "{how}: {}",
            f[0].why
        );
        assert_eq!(f[0].fix, "REVOKE ALTER ANY USER FROM [reporting];");
    }
}

/// `reporting` holds EXECUTE on the fence_admin schema (FP007's finding)
/// and UPDATE on a dbo view over fence.Resource: two goals, two paths.
/// FP007's finding keeps the path that ends at the procedure it names, and
/// the write through the view is named apart with its own path.
#[test]
fn an_existing_finding_gains_the_path_to_the_goal_it_names() {
    let mut c = clean();
    c.permissions.push(grant("reporting", "EXECUTE", schema("fence_admin")));
    c.objects.push(module(
        "dbo",
        "LeaseView",
        ObjectKind::View,
        "CREATE VIEW dbo.LeaseView AS SELECT ResourceId, Owner FROM fence.Resource;",
    ));
    c.permissions
        .push(grant("reporting", "UPDATE", object("dbo", "LeaseView")));
    let report = check(&c);
    let execute: Vec<_> = report.findings_of(Rule::ExecuteBeyondRole).collect();
    assert_eq!(execute.len(), 1, "{report:#?}");
    let path = step_texts(execute[0]);
    assert!(
        path.last().is_some_and(|s| s.contains("EXECUTE on fence_admin.")),
        "{path:#?} {:#?}",
        report
            .findings
            .iter()
            .map(|f| (f.rule, &f.object, step_texts(f)))
            .collect::<Vec<_>>()
    );
    let writes: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.principal.as_deref() == Some("reporting") && step_texts(f).join(" | ").contains("dbo.LeaseView"))
        .collect();
    assert_eq!(writes.len(), 1, "{report:#?}");
}

/// Control: with EXECUTE alone, FP007's finding is the only one, with its
/// path.
#[test]
fn an_existing_finding_with_one_goal_keeps_its_path_alone() {
    let mut c = clean();
    c.permissions.push(grant("reporting", "EXECUTE", schema("fence_admin")));
    let report = check(&c);
    assert!(report.findings_of(Rule::ReachesFence).next().is_none(), "{report:#?}");
    let execute: Vec<_> = report.findings_of(Rule::ExecuteBeyondRole).collect();
    assert!(
        step_texts(execute[0])
            .last()
            .is_some_and(|s| s.contains("EXECUTE on fence_admin."))
    );
}
