//! Permissions that imply the ones a rule looks for: SQL Server's
//! permission hierarchy (sys.fn_builtin_permissions) gives a covering or
//! parent permission the power of every permission beneath it, so each
//! layout here holds no permission a rule names and still reaches the fence.
//! Each was clean while the rules matched permission names.

use crate::support;

use fencepost::audit::{Catalog, Finding, ObjectKind, Permission, PermissionState, Report, Rule, Schema, Securable};
use support::fixtures::*;

fn of(report: &Report, rule: Rule) -> Vec<&Finding> {
    report.findings_of(rule).collect()
}

fn rule_ids(report: &Report) -> Vec<&'static str> {
    let mut ids: Vec<&'static str> = report.findings.iter().map(|f| f.rule.id()).collect();
    ids.dedup();
    ids
}

/// A user outside the services and the administrators: an ETL or migration
/// login with a database right and nothing else.
fn with_etl(c: &mut Catalog) {
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
}

fn server(c: &mut Catalog) -> &mut fencepost::audit::ServerFacts {
    c.server.as_mut().unwrap()
}

#[test]
fn alter_any_schema_held_by_a_service_is_alter_on_the_fence_tables() {
    // GRANT Schema Permissions: ALTER on a schema is implied by ALTER ANY
    // SCHEMA; GRANT Object Permissions: ALTER on a table by ALTER on its
    // schema. ALTER on a fence table adds a trigger or a column to it.
    // The deploy's DENY ALTER on the fence schema to fence_service refuses
    // it on the fence tables, to its members too: only without it does
    // FP003 name the grant.
    for (grantee, through) in [("fence_service", "orders_svc"), ("orders_svc", "")] {
        let mut c = clean();
        c.permissions
            .push(grant(grantee, "ALTER ANY SCHEMA", Securable::Database));
        assert!(of(&check(&c), Rule::WriteAccess).is_empty(), "{:#?}", check(&c));
        without_shipped_denies(&mut c);
        let report = check(&c);
        let write = of(&report, Rule::WriteAccess);
        assert_eq!(write.len(), 1, "{report:#?}");
        assert_eq!(write[0].permission.as_deref(), Some("ALTER ANY SCHEMA"));
        assert!(
            write[0].why.contains("it implies ALTER on every fence table"),
            "{}",
            write[0].why
        );
        assert!(write[0].why.contains(through), "{}", write[0].why);
        assert_eq!(write[0].fix, format!("REVOKE ALTER ANY SCHEMA FROM [{grantee}];"));
    }
}

#[test]
fn alter_any_schema_through_a_nested_role_is_found_on_the_role() {
    let mut c = clean();
    c.principals.push(role("app_ddl"));
    c.memberships.push(member("app_ddl", "orders_svc"));
    c.permissions
        .push(grant("app_ddl", "ALTER ANY SCHEMA", Securable::Database));
    let report = check(&c);
    let write = of(&report, Rule::WriteAccess);
    assert_eq!(write.len(), 1, "{report:#?}");
    assert_eq!(write[0].principal.as_deref(), Some("app_ddl"));
    assert!(write[0].why.contains("orders_svc"), "{}", write[0].why);
}

#[test]
fn alter_any_schema_held_by_anyone_but_an_administrator_is_alter_on_the_shipped_procedures() {
    // Not a service, and no service reaches its grant: ALTER on every schema
    // is still ALTER on fence_api and fence_admin, whose procedures run with
    // the fence tables' owner's rights.
    let mut c = clean();
    with_etl(&mut c);
    c.permissions
        .push(grant("etl", "ALTER ANY SCHEMA", Securable::Database));
    let f = only(&check(&c), Rule::CodeChange);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].principal.as_deref(), Some("etl"));
    assert!(f[0].why.contains("fence_api"), "{}", f[0].why);
    assert_eq!(f[0].fix, "REVOKE ALTER ANY SCHEMA FROM [etl];");
}

#[test]
fn alter_on_the_database_is_alter_any_schema_role_and_user_for_anyone_but_an_administrator() {
    // GRANT Database Permissions: ALTER ANY SCHEMA, ALTER ANY ROLE, ALTER ANY
    // USER and ALTER ANY APPLICATION ROLE are implied by ALTER.
    let mut c = clean();
    with_etl(&mut c);
    c.permissions.push(grant("etl", "ALTER", Securable::Database));
    let report = check(&c);
    assert_eq!(rule_ids(&report), ["FP005", "FP021"], "{report:#?}");
    let become_service = of(&report, Rule::BecomeService);
    assert!(
        become_service[0]
            .why
            .starts_with("ALTER (it implies ALTER ANY ROLE on the database) lets etl add itself to"),
        "{}",
        become_service[0].why
    );
    assert!(report.findings.iter().all(|f| f.fix == "REVOKE ALTER FROM [etl];"));
}

#[test]
fn alter_on_the_database_held_by_a_service_manages_principals_and_adds_code() {
    let mut c = clean();
    c.permissions.push(grant("orders_svc", "ALTER", Securable::Database));
    let report = check(&c);
    // The deploy's DENY ALTER on the fence schema is made to fence_service,
    // which orders_svc may leave: ALTER on the database implies ALTER ANY
    // ROLE, so the DENY is no cut and FP003 names the grant too.
    assert_eq!(rule_ids(&report), ["FP003", "FP005", "FP006"], "{report:#?}");
    let writes = of(&report, Rule::WriteAccess);
    assert!(
        writes[0]
            .path
            .iter()
            .any(|s| s.step.contains("DROP MEMBER [orders_svc]")),
        "{:#?}",
        writes[0].path
    );
    let principals = of(&report, Rule::PrincipalControl);
    assert!(
        principals[0].why.contains("it implies ALTER ANY USER on the database"),
        "{}",
        principals[0].why
    );
}

#[test]
fn alter_any_schema_is_alter_on_a_schema_holding_code_of_the_fence_tables_owner() {
    // A schema owned by a role, holding a procedure dbo owns: whoever may
    // alter the schema may rewrite the procedure, which keeps its owner and
    // chains to the fence tables (FP020). ALTER ANY SCHEMA is ALTER on it.
    let mut c = clean();
    with_etl(&mut c);
    c.principals.push(role("tool_owners"));
    c.schemas.push(Schema {
        name: "tools".into(),
        owner: "tool_owners".into(),
    });
    let mut purge = module(
        "tools",
        "Purge",
        ObjectKind::Procedure,
        "CREATE PROCEDURE tools.Purge AS SELECT 1;",
    );
    purge.owner = Some("dbo".into());
    c.objects.push(purge);
    // Its control of the shipped schemas is FP005's; the tools schema is
    // FP020's, found only through the hierarchy.
    c.permissions
        .push(grant("etl", "ALTER ANY SCHEMA", Securable::Database));
    let report = check(&c);
    let schema_code = of(&report, Rule::SchemaCode);
    let by_etl: Vec<&&Finding> = schema_code
        .iter()
        .filter(|f| f.principal.as_deref() == Some("etl"))
        .collect();
    assert_eq!(by_etl.len(), 1, "{report:#?}");
    assert!(by_etl[0].why.contains("tools.Purge"), "{}", by_etl[0].why);
}

#[test]
fn connect_replication_lets_guest_in() {
    // GRANT Database Permissions: CONNECT is implied by CONNECT REPLICATION.
    let mut c = clean();
    c.permissions
        .push(grant("guest", "CONNECT REPLICATION", Securable::Database));
    let f = only(&check(&c), Rule::GuestConnect);
    assert_eq!(f[0].fix, "REVOKE CONNECT REPLICATION FROM [guest];");
}

#[test]
fn alter_server_state_held_by_a_service_login_is_view_server_state() {
    // GRANT Server Permissions: VIEW SERVER STATE is implied by ALTER SERVER
    // STATE, and shows every running request's parameters.
    let mut c = clean();
    server(&mut c)
        .permissions
        .push(server_grant("orders_svc", "ALTER SERVER STATE"));
    let f = only(&check(&c), Rule::ServerPrivilege);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(
        f[0].permission.as_deref(),
        Some("ALTER SERVER STATE (implies VIEW SERVER STATE)")
    );
    assert_eq!(f[0].fix, "REVOKE ALTER SERVER STATE FROM [orders_svc];");
}

#[test]
fn rights_below_the_ones_that_reach_the_fence_stay_clean() {
    // VIEW DEFINITION implies no write, SELECT on another schema no right on
    // the fence, CREATE TABLE no schema to put it in, SHOWPLAN and VIEW
    // SERVER STATE held by a login that is not a service judge nobody, and a
    // denied covering permission gives nothing.
    let mut c = clean();
    with_etl(&mut c);
    for p in ["VIEW DEFINITION", "CREATE TABLE", "SHOWPLAN"] {
        c.permissions.push(grant("etl", p, Securable::Database));
    }
    c.permissions.push(grant("etl", "SELECT", schema("dbo")));
    c.permissions
        .push(grant("reporting", "VIEW DEFINITION", schema("fence_api")));
    c.permissions.push(Permission {
        state: PermissionState::Deny,
        ..grant("etl", "ALTER ANY SCHEMA", Securable::Database)
    });
    c.permissions.push(Permission {
        state: PermissionState::Deny,
        ..grant("etl", "CONTROL", Securable::Database)
    });
    server(&mut c)
        .permissions
        .push(server_grant("etl", "VIEW SERVER STATE"));
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0);
}
