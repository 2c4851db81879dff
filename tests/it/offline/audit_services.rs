//! Who is a service, and whether the catalog shows enough to tell: a check
//! never says clean while a principal that can run the fence procedures
//! also holds a way past them, or while the catalog hides what it would
//! need to see.

use crate::support;

use fencepost::audit::{Policy, PrincipalKind, Rule, Securable, Visibility, evaluate};
use support::fixtures::*;

#[test]
fn a_user_granted_execute_on_the_fence_api_schema_is_a_service_though_in_no_fence_role() {
    let mut c = clean();
    c.principals.push(user("app", Some("app")));
    c.permissions.push(grant("app", "EXECUTE", schema("fence_api")));
    c.memberships.push(member("db_datawriter", "app"));
    let report = check(&c);
    let f: Vec<(&str, Option<&str>, &str)> = report
        .findings
        .iter()
        .map(|f| (f.rule.id(), f.principal.as_deref(), f.fix.as_str()))
        .collect();
    assert_eq!(
        f,
        [
            ("FP001", Some("app"), "ALTER ROLE [db_datawriter] DROP MEMBER [app];"),
            (
                "FP007",
                Some("app"),
                "REVOKE EXECUTE ON SCHEMA::[fence_api] FROM [app];"
            ),
        ],
        "{report:#?}"
    );
}

#[test]
fn a_role_granted_one_shipped_procedure_makes_its_members_services() {
    let mut c = clean();
    c.principals.push(role("ops"));
    c.principals.push(user("batch", Some("batch")));
    c.memberships.push(member("ops", "batch"));
    c.permissions
        .push(grant("ops", "EXECUTE", object("fence_admin", "ForceRelease")));
    c.memberships.push(member("db_owner", "batch"));
    let report = check(&c);
    let fp001: Vec<_> = report.findings_of(Rule::PrivilegedRole).collect();
    assert_eq!(fp001.len(), 1, "{report:#?}");
    assert_eq!(fp001[0].principal.as_deref(), Some("batch"));
    assert_eq!(fp001[0].fix, "ALTER ROLE [db_owner] DROP MEMBER [batch];");
}

#[test]
fn a_service_named_by_the_login_that_owns_the_database_enters_as_dbo() {
    let mut c = clean();
    c.principals[0].login = Some("orders_app".into());
    let mut policy = Policy::default();
    policy.add_principal("orders_app");
    let report = evaluate(&c, &policy);
    let f = only(&report, Rule::ServiceIsDbo);
    assert_eq!(f[0].principal.as_deref(), Some("orders_app"));
    assert_eq!(f[0].object, "USER::dbo");
    assert_eq!(
        f[0].fix,
        "ALTER AUTHORIZATION ON DATABASE::[orders] TO [sa]; CREATE USER [orders_app] FOR LOGIN [orders_app]; \
         ALTER ROLE [fence_service] ADD MEMBER [orders_app];"
    );
}

#[test]
fn a_service_named_dbo_is_a_finding_and_no_fix_drops_dbo_from_db_owner() {
    let mut policy = Policy::default();
    policy.add_principal("dbo");
    let report = evaluate(&clean(), &policy);
    // sa is dbo's login here, and sa is sysadmin: both are named, and
    // neither fix asks the impossible (error 15405, or sa leaving sysadmin).
    let rules: Vec<&str> = report.findings.iter().map(|f| f.rule.id()).collect();
    assert_eq!(rules, ["FP002", "FP015"], "{report:#?}");
    for f in &report.findings {
        assert!(!f.fix.contains("DROP MEMBER [dbo]"), "{}", f.fix);
        assert!(!f.fix.contains("DROP MEMBER [sa]"), "{}", f.fix);
    }
    assert!(report.findings[0].fix.contains("[sa] cannot leave sysadmin"));
}

#[test]
fn a_principal_name_that_matches_nothing_leaves_every_rule_unverified() {
    let mut policy = Policy::default();
    policy.add_principal("ordres_svc");
    let report = evaluate(&clean(), &policy);
    assert!(report.findings.is_empty());
    assert_eq!(report.cannot_verify.len(), Rule::LIVE.len());
    assert!(
        report.cannot_verify[0]
            .reason
            .contains("ordres_svc is neither a principal")
    );
    assert_eq!(report.exit_code(), 3);
}

#[test]
fn a_principal_named_by_its_login_is_found_by_sid() {
    let mut c = clean();
    c.principals.push(user("batch_user", Some("CORP\\batch")));
    c.memberships.push(member("db_datawriter", "batch_user"));
    let mut policy = Policy::default();
    policy.add_principal("CORP\\batch");
    let f = only(&evaluate(&c, &policy), Rule::PrivilegedRole);
    assert_eq!(f[0].principal.as_deref(), Some("batch_user"));
}

#[test]
fn a_windows_group_in_a_fence_role_leaves_its_members_other_groups_unverified() {
    let mut c = clean();
    c.principals.push(fencepost::audit::Principal {
        login: Some("CORP\\AppServers".into()),
        ..fencepost::audit::Principal::new("CORP\\AppServers", PrincipalKind::Group)
    });
    c.memberships.push(member("fence_service", "CORP\\AppServers"));
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(unverified(&report), ["FP001", "FP002", "FP016"]);
    assert!(
        report.cannot_verify[0]
            .reason
            .contains("CORP\\AppServers is a Windows or Microsoft Entra group")
    );
    assert_eq!(report.exit_code(), 3);
}

#[test]
fn an_application_role_holds_what_every_service_holds() {
    let mut c = clean();
    c.principals.push(fencepost::audit::Principal::new(
        "reporting_app",
        PrincipalKind::ApplicationRole,
    ));
    c.permissions
        .push(grant("reporting_app", "UPDATE", Securable::Database));
    let f = only(&check(&c), Rule::WriteAccess);
    assert_eq!(f[0].principal.as_deref(), Some("reporting_app"));
    assert_eq!(f[0].fix, "REVOKE UPDATE FROM [reporting_app];");
    assert!(
        f[0].why.contains("every service that knows its password"),
        "{}",
        f[0].why
    );
}

#[test]
fn without_view_definition_on_the_database_no_rule_passes() {
    let mut c = clean();
    c.visibility = Some(Visibility {
        sysadmin: false,
        view_definition: Some(false),
        view_security_definition: Some(false),
    });
    let report = check(&c);
    assert_eq!(report.cannot_verify.len(), Rule::LIVE.len(), "{report:#?}");
    assert_eq!(
        report.cannot_verify[0].reason,
        "the checking login lacks VIEW DEFINITION and VIEW SECURITY DEFINITION on the database \
         (fn_my_permissions), so the catalog leaves out what it has no right on; check with a login that holds \
         VIEW DEFINITION and VIEW SECURITY DEFINITION on the database (db_owner and CONTROL include them) or is \
         sysadmin"
    );
    assert_eq!(report.exit_code(), 3);
    // sysadmin sees everything, also where permissions cannot be listed.
    c.visibility = Some(Visibility {
        sysadmin: true,
        view_definition: None,
        view_security_definition: None,
    });
    assert_eq!(check(&c).exit_code(), 0);
    c.visibility = Some(Visibility {
        sysadmin: false,
        view_definition: None,
        view_security_definition: None,
    });
    let report = check(&c);
    assert!(
        report.cannot_verify[0]
            .reason
            .contains("the one standing accepted instead")
    );
}

#[test]
fn view_security_definition_is_required_only_where_the_engine_has_it() {
    let mut c = clean();
    c.visibility = Some(Visibility {
        sysadmin: false,
        view_definition: Some(true),
        view_security_definition: Some(false),
    });
    let report = check(&c);
    assert_eq!(report.exit_code(), 3);
    assert!(
        report.cannot_verify[0]
            .reason
            .starts_with("the checking login lacks VIEW SECURITY DEFINITION on")
    );
    // SQL Server 2019 has no such permission: VIEW DEFINITION covers it.
    c.visibility = Some(Visibility {
        sysadmin: false,
        view_definition: Some(true),
        view_security_definition: None,
    });
    assert_eq!(check(&c).exit_code(), 0);
}

#[test]
fn unread_visibility_or_a_missing_dbo_row_leaves_every_rule_unverified_but_findings_stand() {
    let mut c = clean();
    c.visibility = None;
    c.memberships.push(member("db_datawriter", "orders_svc"));
    let report = check(&c);
    assert_eq!(report.exit_code(), 1, "a proven way past the fence still counts");
    assert_eq!(report.cannot_verify.len(), Rule::LIVE.len());
    let mut c = clean();
    c.memberships.retain(|m| m.member != "dbo");
    let report = check(&c);
    assert_eq!(report.exit_code(), 3);
    assert!(report.cannot_verify[0].reason.contains("do not show dbo in db_owner"));
}

#[test]
fn seeing_some_of_the_deploy_grants_is_not_enough() {
    let mut c = clean();
    c.permissions.retain(|p| {
        !(p.permission == "EXECUTE" && matches!(&p.on, Securable::Object { name, .. } if name != "Provision"))
    });
    c.permissions.push(grant("app", "UPDATE", Securable::Database));
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    let reason = &report.cannot_verify_of(Rule::WriteAccess).next().unwrap().reason;
    assert!(reason.contains("shows 1 of the 31 EXECUTE grants"), "{reason}");
    assert!(
        reason.contains("EXECUTE on fence_admin.ForceRelease to fence_operator"),
        "{reason}"
    );
    assert_eq!(report.exit_code(), 3);
}
