//! Indirect code (FP022), copies and side channels (FP023), Windows groups
//! the other way round, what the catalog model must read or leave
//! unverified, and the safe layouts that must stay clean.

mod audit_fixtures;

use audit_fixtures::*;
use fencepost::audit::{
    FenceTableFeature, LoginKind, ObjectKind, Principal, PrincipalKind, Rule, Securable, ServerTrigger, TableFeature,
};

#[test]
fn a_ddl_trigger_that_calls_a_procedure_running_sql_from_a_table_is_indirect_code() {
    let mut c = clean();
    c.objects.push(Object {
        definition: Some(
            "CREATE TRIGGER audit_ddl ON DATABASE FOR DDL_DATABASE_LEVEL_EVENTS AS EXEC dbo.LogDdl;".into(),
        ),
        ..module("", "audit_ddl", ObjectKind::DatabaseTrigger, "")
    });
    c.objects.push(module(
        "dbo",
        "LogDdl",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.LogDdl AS DECLARE @s nvarchar(max) = (SELECT TOP 1 Hook FROM dbo.Hooks); EXEC (@s);",
    ));
    let f = only(&check(&c), Rule::IndirectCode);
    assert_eq!(f[0].object, "audit_ddl");
    assert_eq!(f[0].permission.as_deref(), Some("calls dbo.LogDdl (EXEC (string))"));
    assert_eq!(f[0].fix, "DROP TRIGGER [audit_ddl] ON DATABASE;");
}

use fencepost::audit::Object;

#[test]
fn a_case_variant_beside_a_shipped_procedure_is_not_taken_for_it() {
    let mut c = clean();
    c.objects.push(module(
        "fence_api",
        "ACQUIRE",
        ObjectKind::Procedure,
        "CREATE PROCEDURE fence_api.ACQUIRE AS SELECT 1",
    ));
    // FP008 names it too: its text and the dependencies recorded for
    // fence_api.Acquire match it as the default collation compares names.
    let report = check(&c);
    let f: Vec<_> = report.findings_of(Rule::IndirectCode).collect();
    assert_eq!(f.len(), 1, "{report:#?}");
    assert_eq!(f[0].object, "fence_api.ACQUIRE");
    assert_eq!(f[0].fix, "DROP PROCEDURE [fence_api].[ACQUIRE];");
    // The shipped one is still the one the drift check compares.
    assert_eq!(report.findings_of(Rule::Drift).count(), 0);
}

#[test]
fn a_numbered_procedure_beside_a_shipped_one_shares_its_grants() {
    let mut c = clean();
    c.objects.push(module(
        "fence_api",
        "Acquire;2",
        ObjectKind::Procedure,
        "CREATE PROCEDURE fence_api.Acquire;2 AS SELECT 1",
    ));
    let f = only(&check(&c), Rule::IndirectCode);
    assert_eq!(
        f[0].permission.as_deref(),
        Some("numbered procedure 2 of fence_api.Acquire")
    );
}

#[test]
fn a_service_whose_default_schema_someone_else_owns_runs_what_they_decide() {
    let mut c = clean();
    c.principals.push(user("bob", Some("bob")));
    c.schemas.push(fencepost::audit::Schema {
        name: "bobs".into(),
        owner: "bob".into(),
    });
    c.principals
        .iter_mut()
        .find(|p| p.name == "orders_svc")
        .unwrap()
        .default_schema = Some("bobs".into());
    let f = only(&check(&c), Rule::IndirectCode);
    assert_eq!(f[0].fix, "ALTER USER [orders_svc] WITH DEFAULT_SCHEMA = [dbo];");
}

#[test]
fn a_server_trigger_that_builds_sql_is_a_finding_and_a_hidden_one_cannot_be_verified() {
    let mut c = clean();
    c.server.as_mut().unwrap().triggers = Some(vec![ServerTrigger {
        name: "on_logon".into(),
        definition: Some("CREATE TRIGGER on_logon ON ALL SERVER FOR LOGON AS EXEC (@x)".into()),
    }]);
    assert_eq!(
        only(&check(&c), Rule::IndirectCode)[0].fix,
        "DROP TRIGGER [on_logon] ON ALL SERVER;"
    );
    c.server.as_mut().unwrap().triggers = Some(vec![ServerTrigger {
        name: "on_logon".into(),
        definition: None,
    }]);
    assert_eq!(unverified(&check(&c)), ["FP022"]);
    c.server.as_mut().unwrap().triggers = None;
    assert_eq!(unverified(&check(&c)), ["FP022"]);
}

#[test]
fn backups_references_and_security_policy_rights_are_side_channels() {
    let mut c = clean();
    c.principals.push(role("db_backupoperator"));
    c.memberships.push(member("db_backupoperator", "orders_svc"));
    c.permissions
        .push(grant("reporting", "REFERENCES", object("fence", "Tenure")));
    c.permissions
        .push(grant("fence_service", "ALTER ANY SECURITY POLICY", Securable::Database));
    c.permissions
        .push(grant("oncall", "BACKUP DATABASE", Securable::Database));
    let fixes: Vec<String> = only(&check(&c), Rule::SideChannel).into_iter().map(|f| f.fix).collect();
    assert_eq!(
        fixes,
        [
            "REVOKE ALTER ANY SECURITY POLICY FROM [fence_service];",
            "REVOKE BACKUP DATABASE FROM [oncall];",
            "ALTER ROLE [db_backupoperator] DROP MEMBER [orders_svc];",
            "REVOKE REFERENCES ON OBJECT::[fence].[Tenure] FROM [reporting];",
        ]
    );
}

#[test]
fn history_tables_change_capture_and_security_policies_on_the_fence_are_copies() {
    let mut c = clean();
    c.fence_table_features = Some(vec![
        FenceTableFeature {
            table: "fence.Resource".into(),
            feature: TableFeature::SystemVersioned {
                history: "dbo.ResourceHistory".into(),
            },
        },
        FenceTableFeature {
            table: "fence.Resource".into(),
            feature: TableFeature::ChangeDataCapture,
        },
        FenceTableFeature {
            table: "fence.Tenure".into(),
            feature: TableFeature::SecurityPolicy {
                policy: "dbo.HideRows".into(),
            },
        },
    ]);
    let f = only(&check(&c), Rule::SideChannel);
    assert_eq!(f.len(), 3);
    assert!(f.iter().any(|f| f.fix == "DROP SECURITY POLICY [dbo].[HideRows];"));
    c.fence_table_features = None;
    assert_eq!(unverified(&check(&c)), ["FP023"]);
}

#[test]
fn a_group_in_db_owner_leaves_a_service_with_its_own_windows_login_unverified() {
    let mut c = clean();
    c.principals
        .iter_mut()
        .find(|p| p.name == "orders_svc")
        .unwrap()
        .login_kind = Some(LoginKind::Windows);
    c.principals.push(Principal {
        login: Some("CORP\\DBAs".into()),
        ..Principal::new("CORP\\DBAs", PrincipalKind::Group)
    });
    c.memberships.push(member("db_owner", "CORP\\DBAs"));
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(unverified(&report), ["FP001"]);
    assert!(
        report.cannot_verify[0].reason.contains("CORP\\DBAs (in db_owner)"),
        "{report:#?}"
    );
    // A SQL login carries no group's rights.
    c.principals
        .iter_mut()
        .find(|p| p.name == "orders_svc")
        .unwrap()
        .login_kind = Some(LoginKind::Sql);
    assert_eq!(check(&c).exit_code(), 0);
}

#[test]
fn a_group_login_in_sysadmin_leaves_a_windows_service_login_unverified() {
    let mut c = clean();
    c.principals
        .iter_mut()
        .find(|p| p.name == "orders_svc")
        .unwrap()
        .login_kind = Some(LoginKind::Windows);
    let server = c.server.as_mut().unwrap();
    server.group_logins.push("BUILTIN\\Administrators".into());
    server.role_members.push(member("sysadmin", "BUILTIN\\Administrators"));
    assert_eq!(unverified(&check(&c)), ["FP002", "FP016"]);
}

#[test]
fn control_of_a_signing_certificate_lends_its_users_rights() {
    let mut c = clean();
    c.permissions.push(grant(
        "orders_svc",
        "CONTROL",
        Securable::Key {
            key: "CERTIFICATE".into(),
            name: "signer".into(),
        },
    ));
    let f = only(&check(&c), Rule::RunsAsSomeoneElse);
    assert_eq!(f[0].fix, "REVOKE CONTROL ON CERTIFICATE::[signer] FROM [orders_svc];");
}

// The safe layouts: each is clean.

#[test]
fn create_procedure_for_a_service_that_owns_only_its_own_schema_is_clean() {
    let mut c = clean();
    c.schemas.push(fencepost::audit::Schema {
        name: "orders_svc".into(),
        owner: "orders_svc".into(),
    });
    c.permissions
        .push(grant("orders_svc", "CREATE PROCEDURE", Securable::Database));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn take_ownership_of_a_dbo_object_breaks_its_chain_and_is_clean() {
    let mut c = clean();
    c.permissions
        .push(grant("orders_svc", "TAKE OWNERSHIP", object("dbo", "Orders")));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn a_throw_message_that_names_the_fence_without_dynamic_sql_is_clean() {
    let mut c = clean();
    c.objects.push(module(
        "dbo",
        "Guard",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Guard AS THROW 50000, N'use fence_api, never fence.Resource', 1;",
    ));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn execute_as_a_user_without_rights_is_clean() {
    let mut c = clean();
    c.principals.push(user("nobody", None));
    let mut p = module(
        "dbo",
        "Stamp",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Stamp AS SELECT 1",
    );
    p.execute_as = Some("nobody".into());
    c.objects.push(p);
    c.permissions
        .push(grant("orders_svc", "EXECUTE", object("dbo", "Stamp")));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
    // Once that user holds something, it is a finding again.
    c.memberships.push(member("db_datareader", "nobody"));
    assert_eq!(only(&check(&c), Rule::RunsAsSomeoneElse).len(), 1);
}

#[test]
fn a_wrapper_over_inspect_granted_only_to_roles_that_hold_inspect_is_clean() {
    let mut c = clean();
    c.objects.push(module(
        "dbo",
        "InspectOrder",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.InspectOrder @Key nvarchar(256) AS EXEC fence_api.Inspect @ResourceKey = @Key;",
    ));
    c.permissions
        .push(grant("fence_reader", "EXECUTE", object("dbo", "InspectOrder")));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
    // Granted to someone who does not hold Inspect, it hands Inspect out.
    c.permissions
        .push(grant("reporting", "EXECUTE", object("dbo", "InspectOrder")));
    assert_eq!(only(&check(&c), Rule::ForeignModule).len(), 1);
}
