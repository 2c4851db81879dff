//! FP027: the audit as reachability, on layouts written from Microsoft's
//! documentation. Each layout below is one the rules before FP027 passed as
//! clean: `only` asserts that no other rule finds it (and those rules are
//! unchanged), so without FP027 the report would have been clean. Where an
//! older rule does name the principal, its finding keeps its text and gains
//! the path, and FP027 adds nothing.

use crate::support;

use fencepost::audit::{Catalog, Finding, ObjectKind, PermissionState, Policy, Rule, Securable, evaluate};
use support::fixtures::*;

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

fn grantable(grantee: &str, permission: &str, on: Securable) -> fencepost::audit::Permission {
    fencepost::audit::Permission {
        state: PermissionState::GrantWithGrantOption,
        ..grant(grantee, permission, on)
    }
}

// Class 1: principals that are not services. "Members of the db_datawriter
// fixed database role can add, delete, or change data in all user tables"
// (Database-level roles); "db_ddladmin can run any Data Definition Language
// (DDL) command in a database".

#[test]
fn class1_an_etl_login_in_db_datawriter_writes_the_fence() {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.memberships.push(member("db_datawriter", "etl"));
    let f = reach(&c);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].principal.as_deref(), Some("etl"));
    assert_eq!(f[0].object, "fence.Resource");
    assert_eq!(f[0].permission.as_deref(), Some("write the fence tables"));
    assert_eq!(
        steps(&f[0]),
        [
            "member of db_datawriter",
            "UPDATE on fence.Resource (by the hierarchy: db_datawriter holds UPDATE on the database, a fixed role's \
             documented right, which implies UPDATE on fence.Resource)"
        ]
    );
    assert!(
        f[0].why
            .starts_with("etl can write the fence tables other than through the shipped procedures"),
        "{}",
        f[0].why
    );
    assert_eq!(f[0].fix, "ALTER ROLE [db_datawriter] DROP MEMBER [etl];");
    assert_eq!(f[0].path[0].evidence, "sys.database_role_members: etl in db_datawriter");
}

#[test]
fn class1_a_migration_login_in_db_ddladmin_alters_the_fence_and_the_shipped_code() {
    let mut c = clean();
    c.principals.push(user("migrator", Some("migrator")));
    c.memberships.push(member("db_ddladmin", "migrator"));
    let f = reach(&c);
    let goal = |g: &str| f.iter().find(|f| f.permission.as_deref() == Some(g)).expect(g);
    // And a DDL trigger it creates runs as the deployer on the next migrate.
    assert_eq!(f.len(), 3, "{f:#?}");
    assert!(
        steps(goal("run fence_admin procedures"))[1].starts_with("ALTER ANY DATABASE DDL TRIGGER"),
        "{f:#?}"
    );
    assert!(f.iter().all(|f| f.principal.as_deref() == Some("migrator")));
    let write = goal("write the fence tables");
    assert!(steps(write)[1].starts_with("ALTER on fence.Resource"), "{write:#?}");
    assert!(
        steps(write)[1].contains("db_ddladmin holds ALTER ANY SCHEMA on the database"),
        "{write:#?}"
    );
    assert!(steps(goal("change the shipped procedures"))[1].starts_with("ALTER on SCHEMA::fence_api"));
}

#[test]
fn class1_alter_on_a_dbo_table_plants_a_trigger_that_runs_as_dbo() {
    // "CREATE TRIGGER requires ALTER permission on the table"; the trigger
    // is owned by the table's owner and ownership chaining skips the check
    // on dbo's fence tables. FP005 names the grant already: it keeps its
    // text and gains the path.
    let mut c = clean();
    c.permissions.push(grant("reporting", "ALTER", object("dbo", "Orders")));
    let report = check(&c);
    let f = only(&report, Rule::CodeChange);
    assert_eq!(f.len(), 1);
    assert!(
        steps(&f[0])[0].starts_with("ALTER on dbo.Orders, which dbo owns as it owns the fence tables: a trigger"),
        "{f:#?}"
    );
    assert_eq!(
        f[0].path[0].cut,
        "REVOKE ALTER ON OBJECT::[dbo].[Orders] FROM [reporting];"
    );
}

#[test]
fn class1_a_database_wide_insert_to_a_non_service_role_names_the_role_and_its_members() {
    let mut c = clean();
    c.principals.push(role("loaders"));
    c.principals.push(user("nightly", Some("nightly")));
    c.memberships.push(member("loaders", "nightly"));
    c.permissions.push(grant("loaders", "INSERT", Securable::Database));
    let f = reach(&c);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].principal.as_deref(), Some("loaders"));
    assert!(
        f[0].why.ends_with("; its members nightly hold the same path"),
        "{}",
        f[0].why
    );
    assert_eq!(f[0].fix, "REVOKE INSERT FROM [loaders];");
}

#[test]
fn class1_a_direct_update_on_the_resource_table_keeps_fp003s_finding_with_its_path() {
    let mut c = clean();
    c.permissions
        .push(grant("reporting", "UPDATE", object("fence", "Resource")));
    let f = only(&check(&c), Rule::WriteAccess);
    assert_eq!(f.len(), 1);
    assert_eq!(steps(&f[0]), ["UPDATE on fence.Resource"]);
    assert_eq!(
        f[0].path[0].evidence,
        "sys.database_permissions: GRANT UPDATE ON fence.Resource TO reporting"
    );
}

// Class 2: permissions that imply others ("Permissions (Database Engine)":
// CONTROL on a database implies all permissions on it and on every schema
// and object in it; GRANT Database Permissions: ALTER ANY USER is implied
// by ALTER, which CONTROL implies).

#[test]
fn class2_control_on_the_database_to_a_non_service_reaches_every_goal() {
    let mut c = clean();
    c.permissions.push(grant("reporting", "CONTROL", Securable::Database));
    let f = reach(&c);
    assert_eq!(f.len(), 3, "{f:#?}");
    assert!(f.iter().all(|f| f.principal.as_deref() == Some("reporting")));
    let write = f.iter().find(|f| f.object == "fence.Resource").expect("a write path");
    assert_eq!(
        steps(write),
        ["UPDATE on fence.Resource (by the hierarchy: CONTROL on DATABASE::orders implies UPDATE on fence.Resource)"]
    );
}

#[test]
fn class2_delete_on_the_database_and_control_on_a_writers_user() {
    // CONTROL on a user implies IMPERSONATE on it (GRANT Database Principal
    // Permissions): whoever holds it is that user, here a db_datawriter.
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.memberships.push(member("db_datawriter", "etl"));
    c.principals.push(user("auditor", Some("auditor")));
    c.permissions
        .push(grant("auditor", "CONTROL", Securable::Principal { name: "etl".into() }));
    let f = reach(&c);
    let auditor = named(&f, "auditor");
    assert_eq!(auditor.len(), 1, "{f:#?}");
    assert_eq!(
        steps(auditor[0])[..2],
        [
            "IMPERSONATE on USER::etl (by the hierarchy: CONTROL on USER::etl implies IMPERSONATE on USER::etl) \
             (EXECUTE AS USER = 'etl')",
            "member of db_datawriter"
        ]
    );
    assert_eq!(auditor[0].fix, "REVOKE CONTROL ON USER::[etl] FROM [auditor];");
    assert_eq!(named(&f, "etl").len(), 1);
}

#[test]
fn class2_control_on_an_admins_user_implies_impersonating_it() {
    // CONTROL on USER::deployer implies IMPERSONATE on it; deployer is in
    // db_owner. deployer is trusted, whoever may become it is not.
    let mut c = clean();
    c.permissions.push(grant(
        "reporting",
        "CONTROL",
        Securable::Principal {
            name: "deployer".into(),
        },
    ));
    let f = reach(&c);
    assert_eq!(f.len(), 3, "{f:#?}");
    assert!(f.iter().all(|f| f.principal.as_deref() == Some("reporting")));
    assert_eq!(steps(&f[0])[1], "member of db_owner");
    assert_eq!(f[0].fix, "REVOKE CONTROL ON USER::[deployer] FROM [reporting];");
}

#[test]
fn class2_execute_on_the_admin_schema_keeps_fp007s_finding_with_its_path() {
    // EXECUTE on a schema is EXECUTE on every procedure in it; FP007 names
    // the grant, and gains the path.
    let mut c = clean();
    c.permissions.push(grant("reporting", "EXECUTE", schema("fence_admin")));
    let report = check(&c);
    assert!(report.findings_of(Rule::ReachesFence).next().is_none(), "{report:#?}");
    let f: Vec<_> = report.findings_of(Rule::ExecuteBeyondRole).collect();
    assert_eq!(
        steps(f[0]),
        [
            "EXECUTE on fence_admin.ForceRelease (by the hierarchy: EXECUTE on SCHEMA::fence_admin implies EXECUTE on \
          fence_admin.ForceRelease)"
        ]
    );
}

// Class 3: role ownership and user kinds. ALTER ROLE: "Adding members to
// flexible database roles requires ... membership in the role that owns the
// role, ALTER ANY ROLE permission or ALTER permission on the role"; ALTER
// USER: a contained user's PASSWORD is set by whoever holds ALTER ANY USER.

fn writers_role(c: &mut Catalog, owner: &str) {
    let mut writers = role("etl_writers");
    writers.owner = Some(owner.into());
    c.principals.push(writers);
    c.permissions.push(grant("etl_writers", "UPDATE", Securable::Database));
}

#[test]
fn class3_the_owner_of_an_arbitrary_role_that_writes_can_join_it() {
    let mut c = clean();
    c.principals.push(user("team_lead", Some("team_lead")));
    writers_role(&mut c, "team_lead");
    let f = reach(&c);
    let lead = named(&f, "team_lead");
    assert_eq!(lead.len(), 1, "{f:#?}");
    assert_eq!(
        steps(lead[0])[0],
        "ALTER on ROLE::etl_writers (by the hierarchy: team_lead owns ROLE::etl_writers, which implies ALTER on \
         ROLE::etl_writers): may add itself to it (ALTER ROLE [etl_writers] ADD MEMBER)"
    );
    assert_eq!(lead[0].fix, "ALTER AUTHORIZATION ON ROLE::[etl_writers] TO [dbo];");
    assert_eq!(named(&f, "etl_writers").len(), 1);
}

#[test]
fn class3_a_member_of_an_owning_role_can_join_the_owned_role() {
    let mut c = clean();
    c.principals.push(role("leads"));
    c.principals.push(user("alice", Some("alice")));
    c.memberships.push(member("leads", "alice"));
    writers_role(&mut c, "leads");
    let f = reach(&c);
    let leads = named(&f, "leads");
    assert_eq!(leads.len(), 1, "{f:#?}");
    assert!(
        leads[0].why.ends_with("its members alice hold the same path"),
        "{}",
        leads[0].why
    );
    assert!(named(&f, "alice").is_empty(), "alice is in leads' finding: {f:#?}");
}

#[test]
fn class3_alter_any_user_resets_a_contained_writers_password() {
    let mut c = clean();
    // A contained user with a password: no login behind it.
    c.principals.push(user("etl_contained", None));
    c.memberships.push(member("db_datawriter", "etl_contained"));
    c.principals.push(user("helpdesk", Some("helpdesk")));
    c.permissions
        .push(grant("helpdesk", "ALTER ANY USER", Securable::Database));
    let f = reach(&c);
    let helpdesk = named(&f, "helpdesk");
    assert_eq!(helpdesk.len(), 1, "{f:#?}");
    assert!(
        steps(helpdesk[0])[0]
            .starts_with("resets the password of etl_contained (ALTER USER [etl_contained] WITH PASSWORD"),
        "{:#?}",
        helpdesk[0]
    );
    assert_eq!(helpdesk[0].fix, "REVOKE ALTER ANY USER FROM [helpdesk];");
    // A user with a login has no password of its own to reset.
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.memberships.push(member("db_datawriter", "etl"));
    c.permissions
        .push(grant("reporting", "ALTER ANY USER", Securable::Database));
    let f = reach(&c);
    assert!(named(&f, "reporting").is_empty(), "{f:#?}");
}

#[test]
fn class3_db_accessadmin_holds_alter_any_user() {
    let mut c = clean();
    c.principals.push(user("etl_contained", None));
    c.memberships.push(member("db_datawriter", "etl_contained"));
    c.principals.push(user("onboarding", Some("onboarding")));
    c.memberships.push(member("db_accessadmin", "onboarding"));
    c.principals.push(role("db_accessadmin"));
    let f = reach(&c);
    let onboarding = named(&f, "onboarding");
    assert_eq!(onboarding.len(), 1, "{f:#?}");
    assert_eq!(steps(onboarding[0])[0], "member of db_accessadmin");
    assert!(steps(onboarding[0])[1].contains("db_accessadmin holds ALTER ANY USER on the database"));
}

// Class 7: grant option ("GRANT ... WITH GRANT OPTION: the grantee will also
// be given the ability to grant the specified permission to other
// principals"), on a wrapper that ownership chaining lets call ForceRelease.

fn force_wrapper(c: &mut Catalog) {
    c.objects.push(module(
        "dbo",
        "Unstick",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Unstick @Key nvarchar(300) AS EXEC fence_admin.ForceRelease @ResourceKey = @Key;",
    ));
}

#[test]
fn class7_a_wrapper_over_force_release_granted_with_grant_option_to_the_operators() {
    // fence_operator holds ForceRelease already, so a plain grant of the
    // wrapper hands it nothing; with GRANT OPTION its members hand it to anyone.
    let mut c = clean();
    force_wrapper(&mut c);
    c.permissions
        .push(grantable("fence_operator", "EXECUTE", object("dbo", "Unstick")));
    let f = reach(&c);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].principal.as_deref(), Some("fence_operator"));
    assert_eq!(
        steps(&f[0]),
        [
            "EXECUTE on dbo.Unstick WITH GRANT OPTION, so it can hand it on to anyone",
            "dbo.Unstick calls fence_admin.ForceRelease and is owned by dbo, as fence_admin.ForceRelease is: \
             ownership chaining skips the permission check"
        ]
    );
    assert!(
        f[0].why.ends_with("its members oncall hold the same path"),
        "{}",
        f[0].why
    );
    assert_eq!(
        f[0].fix,
        "REVOKE EXECUTE ON OBJECT::[dbo].[Unstick] FROM [fence_operator] CASCADE;"
    );
    // The plain grant is the contained wrapper it always was.
    let mut c = clean();
    force_wrapper(&mut c);
    c.permissions
        .push(grant("fence_operator", "EXECUTE", object("dbo", "Unstick")));
    assert_eq!(check(&c).exit_code(), 0, "{:#?}", check(&c));
}

#[test]
fn class7_a_wrapper_over_lease_history_granted_with_grant_option_to_readers() {
    let mut c = clean();
    c.objects.push(module(
        "dbo",
        "History",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.History AS EXEC fence_admin.LeaseHistory;",
    ));
    c.permissions
        .push(grantable("fence_reader", "EXECUTE", object("dbo", "History")));
    let f = reach(&c);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].principal.as_deref(), Some("fence_reader"));
    assert_eq!(f[0].object, "fence_admin.LeaseHistory");
}

#[test]
fn class7_a_wrapper_granted_with_grant_option_to_a_non_service_role_keeps_fp008_with_the_path() {
    let mut c = clean();
    force_wrapper(&mut c);
    c.principals.push(role("ops_leads"));
    c.memberships.push(member("ops_leads", "reporting"));
    c.permissions
        .push(grantable("ops_leads", "EXECUTE", object("dbo", "Unstick")));
    let report = check(&c);
    // FP027 names the role that runs it, with its member.
    let reach: Vec<_> = report.findings_of(Rule::ReachesFence).collect();
    assert_eq!(reach.len(), 1, "{report:#?}");
    assert_eq!(reach[0].principal.as_deref(), Some("ops_leads"));
    assert!(reach[0].why.contains("reporting"), "{:#?}", reach[0]);
    let f: Vec<_> = report.findings_of(Rule::ForeignModule).collect();
    assert_eq!(f[0].object, "dbo.Unstick");
    assert_eq!(
        f[0].path[0].evidence,
        "sys.database_permissions: GRANT EXECUTE ON dbo.Unstick TO ops_leads WITH GRANT OPTION"
    );
}

// Trust: by name, shown in every report, never a finding; nothing held,
// nothing named.

#[test]
fn a_trusted_principal_is_listed_with_its_path_not_reported() {
    let mut c = clean();
    c.principals.push(user("dba", Some("dba")));
    c.permissions.push(grant("dba", "CONTROL", Securable::Database));
    assert_eq!(check(&c).exit_code(), 1);
    let mut policy = Policy::default();
    policy.add_trusted("dba");
    let report = evaluate(&c, &policy);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
    let dba = report
        .trusted
        .iter()
        .find(|t| t.principal == "dba")
        .expect("dba listed");
    assert_eq!(dba.trusted_as, "named by the policy");
    assert_eq!(dba.reaches.len(), 3);
    for format in [
        fencepost::audit::Format::Text,
        fencepost::audit::Format::Json,
        fencepost::audit::Format::Junit,
    ] {
        let out = fencepost::audit::render(&report, format);
        assert!(out.contains("dba"), "{format:?}: {out}");
    }
}

#[test]
fn the_clean_deployment_names_only_trusted_principals() {
    let report = check(&clean());
    assert!(report.findings.is_empty());
    let trusted: Vec<&str> = report.trusted.iter().map(|t| t.principal.as_str()).collect();
    assert_eq!(
        trusted,
        [
            "db_owner",
            "dbo",
            "deployer",
            "login deployer",
            "login sa",
            "server role sysadmin"
        ]
    );
    // Services, readers and users that hold nothing reach nothing.
    for nobody in [
        "orders_svc",
        "oncall",
        "dashboard",
        "reporting",
        "guest",
        "fence_operator",
    ] {
        assert!(!trusted.contains(&nobody), "{nobody}");
    }
}
