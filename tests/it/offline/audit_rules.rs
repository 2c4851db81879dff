//! One fixture catalog per rule that trips it, one clean catalog that trips
//! none, and the catalogs that cannot be verified.

use crate::support;

use fencepost::audit::{
    Catalog, Finding, ObjectKind, PermissionState, Policy, Report, Rule, Securable, evaluate, shipped_grants,
};
use support::fixtures::*;

fn check(c: &Catalog) -> Report {
    evaluate(c, &Policy::default())
}

/// The findings of `report`, asserting they all belong to `rule`: an attack
/// must be named by its rule and must not spill into others.
fn only(report: &Report, rule: Rule) -> Vec<&Finding> {
    let others: Vec<&Finding> = report.findings.iter().filter(|f| f.rule != rule).collect();
    assert!(others.is_empty(), "unexpected findings of other rules: {others:#?}");
    assert!(
        report.cannot_verify.is_empty(),
        "unexpected cannot verify: {:#?}",
        report.cannot_verify
    );
    let found: Vec<&Finding> = report.findings_of(rule).collect();
    assert!(!found.is_empty(), "{} found nothing", rule.id());
    assert_eq!(report.exit_code(), 1);
    found
}

/// [`only`] for a catalog checked with the default policy.
fn found(c: &Catalog, rule: Rule) -> Vec<Finding> {
    only(&check(c), rule).into_iter().cloned().collect()
}

#[test]
fn the_clean_deployment_trips_no_rule() {
    let report = check(&clean());
    assert_eq!(report.findings, vec![], "{report:#?}");
    assert_eq!(report.cannot_verify, vec![]);
    assert_eq!(report.rules_checked, Rule::LIVE.to_vec());
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn a_catalog_survives_a_json_round_trip_so_fixtures_can_be_files() {
    let c = clean();
    let json = serde_json::to_string(&c).unwrap();
    assert_eq!(serde_json::from_str::<Catalog>(&json).unwrap(), c);
}

#[test]
fn fp001_a_service_user_in_db_datawriter() {
    let mut c = clean();
    c.memberships.push(member("db_datawriter", "orders_svc"));
    let f = found(&c, Rule::PrivilegedRole);
    assert_eq!(f[0].principal.as_deref(), Some("orders_svc"));
    assert_eq!(f[0].fix, "ALTER ROLE [db_datawriter] DROP MEMBER [orders_svc];");
}

#[test]
fn fp001_a_role_nested_between_a_service_and_db_owner() {
    let mut c = clean();
    c.memberships.push(member("app_admins", "fence_operator"));
    c.memberships.push(member("db_owner", "app_admins"));
    let f = found(&c, Rule::PrivilegedRole);
    assert_eq!(f[0].principal.as_deref(), Some("app_admins"));
    assert!(
        f[0].why.contains("fence_operator") && f[0].why.contains("oncall"),
        "{}",
        f[0].why
    );
}

#[test]
fn fp001_a_dba_in_db_owner_is_not_a_service_but_a_named_principal_is() {
    let mut policy = Policy::default();
    assert!(evaluate(&clean(), &policy).findings.is_empty());
    policy.add_principal("deployer");
    let report = evaluate(&clean(), &policy);
    // The fixture's deployer login is also sysadmin.
    let named: Vec<(&str, Option<&str>)> = report
        .findings
        .iter()
        .map(|f| (f.rule.id(), f.principal.as_deref()))
        .collect();
    assert_eq!(named, [("FP001", Some("deployer")), ("FP002", Some("deployer"))]);
}

#[test]
fn fp002_a_service_login_in_sysadmin() {
    let mut c = clean();
    c.server
        .as_mut()
        .unwrap()
        .role_members
        .push(member("sysadmin", "orders_svc"));
    let f = found(&c, Rule::ServerControl);
    assert_eq!(f[0].fix, "ALTER SERVER ROLE [sysadmin] DROP MEMBER [orders_svc];");
}

#[test]
fn fp002_control_server_through_a_server_role() {
    let mut c = clean();
    let server = c.server.as_mut().unwrap();
    server.role_members.push(member("app_ops", "oncall"));
    server.permissions.push(server_grant("app_ops", "CONTROL SERVER"));
    let f = found(&c, Rule::ServerControl);
    assert_eq!(f[0].principal.as_deref(), Some("oncall"));
    assert_eq!(f[0].fix, "REVOKE CONTROL SERVER FROM [app_ops];");
}

#[test]
fn fp002_without_a_server_permission_catalog_control_server_cannot_be_ruled_out_for_a_service_login() {
    // Babelfish: sysadmin members show, sys.server_permissions does not exist.
    let mut c = clean();
    c.server.as_mut().unwrap().permissions_unreadable =
        Some("Babelfish for PostgreSQL has no server permission catalog (sys.server_permissions)".into());
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(cannot_verify_rules(&report), ["FP002", "FP016"]);
    assert!(
        report.cannot_verify[0]
            .reason
            .ends_with("so CONTROL SERVER held by service logins dashboard, oncall, orders_svc cannot be ruled out"),
        "{report:#?}"
    );
    // A sysadmin member is still named.
    c.server
        .as_mut()
        .unwrap()
        .role_members
        .push(member("sysadmin", "orders_svc"));
    assert_eq!(check(&c).findings_of(Rule::ServerControl).count(), 1);
}

#[test]
fn fp002_without_a_server_permission_catalog_and_no_service_login_has_nothing_to_rule_out() {
    let mut c = clean();
    c.server.as_mut().unwrap().permissions_unreadable = Some("no catalog".into());
    for p in &mut c.principals {
        p.login = None;
    }
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn fp003_update_on_the_resource_table_to_fence_service() {
    // The deploy's DENY UPDATE on the fence schema to fence_service refuses
    // the grant: FP003 names it only once that DENY is gone.
    let mut c = clean();
    c.permissions
        .push(grant("fence_service", "UPDATE", object("fence", "Resource")));
    let report = check(&c);
    assert_eq!(report.findings, vec![], "{report:#?}");
    without_shipped_denies(&mut c);
    let f = found(&c, Rule::WriteAccess);
    assert_eq!(f[0].principal.as_deref(), Some("fence_service"));
    assert_eq!(f[0].object, "fence.Resource");
    assert_eq!(
        f[0].fix,
        "REVOKE UPDATE ON OBJECT::[fence].[Resource] FROM [fence_service];"
    );
}

#[test]
fn fp003_column_level_update_and_grantable_delete() {
    let mut c = clean();
    let column = Securable::Object {
        schema: "fence".into(),
        name: "Resource".into(),
        column: Some("Generation".into()),
    };
    // reporting is in no fence role, so no DENY of the deploy's refuses it.
    c.permissions.push(grant("reporting", "UPDATE", column));
    let mut delete = grant("someone_else", "DELETE", object("fence", "PublishedOperation"));
    delete.state = PermissionState::GrantWithGrantOption;
    c.permissions.push(delete);
    let report = check(&c);
    let fixes: Vec<&str> = only(&report, Rule::WriteAccess)
        .iter()
        .map(|f| f.fix.as_str())
        .collect();
    assert_eq!(
        fixes,
        [
            "REVOKE UPDATE ON OBJECT::[fence].[Resource] ([Generation]) FROM [reporting];",
            "REVOKE DELETE ON OBJECT::[fence].[PublishedOperation] FROM [someone_else] CASCADE;",
        ]
    );
}

#[test]
fn fp003_database_wide_insert_through_public_and_control_on_the_schema() {
    let mut c = clean();
    c.permissions.push(grant("public", "INSERT", Securable::Database));
    c.permissions.push(grant("reporting", "CONTROL", schema("fence")));
    let report = check(&c);
    let f = only(&report, Rule::WriteAccess);
    assert_eq!(f.len(), 2);
    assert!(
        f.iter()
            .any(|f| f.principal.as_deref() == Some("public") && f.fix == "REVOKE INSERT FROM [public];")
    );
    assert!(f.iter().any(|f| f.object == "SCHEMA::fence"));
}

#[test]
fn fp003_a_database_wide_grant_to_someone_outside_the_services_is_not_fp003s_but_fp027_names_it() {
    // FP003 judges database-wide grants to services; whoever else can write
    // the fence is FP027's, with the path.
    let mut c = clean();
    c.permissions.push(grant("reporting", "UPDATE", Securable::Database));
    let f = found(&c, Rule::ReachesFence);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].principal.as_deref(), Some("reporting"));
    assert_eq!(f[0].object, "fence.Resource");
    assert_eq!(
        f[0].path[0].step,
        "UPDATE on fence.Resource (by the hierarchy: UPDATE on DATABASE::orders implies UPDATE on fence.Resource)"
    );
    assert_eq!(f[0].fix, "REVOKE UPDATE FROM [reporting];");
}

#[test]
fn fp003_a_service_owning_a_fence_table() {
    let mut c = clean();
    object_mut(&mut c, "fence.Resource").owner = Some("orders_svc".into());
    let report = check(&c);
    // Owning the table also breaks the chain from every procedure to it.
    assert!(
        report
            .findings_of(Rule::WriteAccess)
            .any(|f| f.permission.as_deref() == Some("owner"))
    );
}

#[test]
fn fp004_select_on_the_tables_or_db_datareader() {
    let mut c = clean();
    // reporting is in no fence role, so no DENY of the deploy's refuses it.
    c.permissions
        .push(grant("reporting", "SELECT", object("fence", "Resource")));
    c.memberships.push(member("db_datareader", "fence_reader"));
    let report = check(&c);
    let f = only(&report, Rule::ReadAccess);
    assert_eq!(f.len(), 2);
    assert!(
        f.iter()
            .any(|f| f.fix == "ALTER ROLE [db_datareader] DROP MEMBER [fence_reader];")
    );
}

#[test]
fn fp005_create_procedure_or_alter_on_a_fence_schema() {
    let mut c = clean();
    c.permissions
        .push(grant("fence_service", "CREATE PROCEDURE", Securable::Database));
    c.permissions.push(grant("fence_service", "ALTER", schema("dbo")));
    c.permissions.push(grant("reporting", "ALTER", schema("fence_api")));
    c.permissions.push(grant("oncall", "ALTER", schema("dbo")));
    c.permissions
        .push(grant("dashboard", "ALTER", object("fence_api", "Publish")));
    let report = check(&c);
    let f = only(&report, Rule::CodeChange);
    let objects: Vec<&str> = f.iter().map(|f| f.object.as_str()).collect();
    assert_eq!(objects.len(), 5, "{objects:?}");
    let create = f
        .iter()
        .find(|f| f.permission.as_deref() == Some("CREATE PROCEDURE"))
        .unwrap();
    assert!(create.why.contains("add code to dbo"), "{}", create.why);
    assert!(
        objects.contains(&"SCHEMA::dbo"),
        "dbo is owned by the tables' owner: {objects:?}"
    );
}

#[test]
fn fp006_impersonate_and_alter_any_role() {
    let mut c = clean();
    c.permissions.push(grant(
        "orders_svc",
        "IMPERSONATE",
        Securable::Principal { name: "dbo".into() },
    ));
    c.permissions
        .push(grant("fence_operator", "ALTER ANY ROLE", Securable::Database));
    let report = check(&c);
    let fixes: Vec<&str> = only(&report, Rule::PrincipalControl)
        .iter()
        .map(|f| f.fix.as_str())
        .collect();
    assert!(
        fixes.contains(&"REVOKE IMPERSONATE ON USER::[dbo] FROM [orders_svc];"),
        "{fixes:?}"
    );
    assert!(
        fixes.contains(&"REVOKE ALTER ANY ROLE FROM [fence_operator];"),
        "{fixes:?}"
    );
}

#[test]
fn fp007_force_release_granted_to_fence_service() {
    let mut c = clean();
    c.permissions
        .push(grant("fence_service", "EXECUTE", object("fence_admin", "ForceRelease")));
    let f = found(&c, Rule::ExecuteBeyondRole);
    assert_eq!(
        f[0].fix,
        "REVOKE EXECUTE ON OBJECT::[fence_admin].[ForceRelease] FROM [fence_service];"
    );
    assert!(f[0].why.contains("orders_svc"), "{}", f[0].why);
}

#[test]
fn fp007_schema_wide_execute_and_acquire_to_a_reader() {
    let mut c = clean();
    c.permissions
        .push(grant("fence_reader", "EXECUTE", schema("fence_admin")));
    c.permissions
        .push(grant("dashboard", "EXECUTE", object("fence_api", "Acquire")));
    assert_eq!(found(&c, Rule::ExecuteBeyondRole).len(), 2);
}

#[test]
fn fp007_a_direct_grant_within_the_users_role_is_not_a_finding() {
    let mut c = clean();
    c.permissions
        .push(grant("orders_svc", "EXECUTE", object("fence_api", "Acquire")));
    assert!(check(&c).findings.is_empty());
}

#[test]
fn fp008_a_procedure_that_updates_the_resource_table_unconditionally() {
    let mut c = clean();
    c.objects.push(module(
        "dbo",
        "RepairLease",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.RepairLease AS UPDATE [fence].[Resource] SET Owner = NULL;",
    ));
    let f = found(&c, Rule::ForeignModule);
    assert_eq!(f[0].object, "dbo.RepairLease");
    assert_eq!(f[0].principal.as_deref(), Some("dbo"));
    assert_eq!(f[0].fix, "DROP PROCEDURE [dbo].[RepairLease];");
}

#[test]
fn fp008_found_by_dependency_trigger_or_synonym_as_well() {
    let mut c = clean();
    c.objects.push(module(
        "dbo",
        "Opaque",
        ObjectKind::Function,
        "CREATE FUNCTION dbo.Opaque() ...",
    ));
    c.dependencies.as_mut().unwrap().push(fencepost::audit::Dependency {
        referencing: "dbo.Opaque".into(),
        referenced: "fence.PublishedOperation".into(),
    });
    let mut trigger = module(
        "fence",
        "AuditResource",
        ObjectKind::Trigger,
        "CREATE TRIGGER ... AS SELECT 1",
    );
    trigger.parent = Some("fence.Resource".into());
    c.objects.push(trigger);
    c.objects
        .push(module("dbo", "R", ObjectKind::Synonym, "[fence].[Resource]"));
    let report = check(&c);
    let objects: Vec<&str> = only(&report, Rule::ForeignModule)
        .iter()
        .map(|f| f.object.as_str())
        .collect();
    assert_eq!(objects, ["dbo.Opaque", "dbo.R", "fence.AuditResource"]);
}

#[test]
fn fp009_a_shipped_procedure_owned_by_someone_else() {
    let mut c = clean();
    object_mut(&mut c, "fence_api.Publish").owner = Some("deployer".into());
    let f = found(&c, Rule::OwnershipChain);
    assert!(f.iter().all(|f| f.object == "fence_api.Publish"));
    assert!(
        f.iter()
            .any(|f| f.permission.as_deref().unwrap().contains("fence.Resource owned by dbo"))
    );
}

#[test]
fn fp010_dynamic_sql_or_execute_as_in_a_shipped_procedure() {
    let mut c = clean();
    let acquire = object_mut(&mut c, "fence_api.Acquire");
    let text = acquire
        .definition
        .clone()
        .unwrap()
        .replace("BEGIN TRANSACTION;", "EXEC (@Patch);\nBEGIN TRANSACTION;");
    acquire.definition = Some(text);
    object_mut(&mut c, "fence_api.Renew").execute_as = Some("dbo".into());
    // Both edits also change the definitions, but the hashes in this fixture
    // are left as deployed, so only FP010 can see them.
    let f = found(&c, Rule::DynamicSql);
    let what: Vec<(&str, &str)> = f
        .iter()
        .map(|f| (f.object.as_str(), f.permission.as_deref().unwrap()))
        .collect();
    assert_eq!(
        what,
        [
            ("fence_api.Acquire", "EXEC (string)"),
            ("fence_api.Renew", "EXECUTE AS dbo")
        ]
    );
}

#[test]
fn fp011_a_procedure_altered_by_hand_or_missing() {
    let mut c = clean();
    let release = object_mut(&mut c, "fence_api.Release");
    let edited = release
        .definition
        .clone()
        .unwrap()
        .replace("AND Generation = @Generation", "");
    release.definition_hash = Some(server_hash(&edited));
    release.definition = Some(edited);
    c.objects.retain(|o| !o.is("fence_api.GetOutcome"));
    let report = check(&c);
    let f: Vec<(&str, &str)> = only(&report, Rule::Drift)
        .iter()
        .map(|f| (f.object.as_str(), f.permission.as_deref().unwrap()))
        .collect();
    assert_eq!(
        f,
        [
            ("fence_api.GetOutcome", "missing"),
            ("fence_api.Release", "definition changed since deploy")
        ]
    );
}

/// Babelfish lists object names lower-cased (`fence_api.release`), while
/// the policy and the shipped files spell them `fence_api.Release`.
fn lower_cased_names(c: &mut Catalog) {
    for o in &mut c.objects {
        o.name = o.name.to_lowercase();
    }
}

#[test]
fn lower_cased_catalog_names_match_the_policy_as_the_default_collation_does() {
    let mut c = clean();
    lower_cased_names(&mut c);
    let report = check(&c);
    assert_eq!(report.findings, vec![], "{report:#?}");
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn fp011_drift_in_a_lower_cased_catalog_points_at_the_shipped_file() {
    let mut c = clean();
    lower_cased_names(&mut c);
    object_mut(&mut c, "fence_api.Release").definition_hash = Some(server_hash("ALTER PROCEDURE x AS SELECT 1"));
    let f = found(&c, Rule::Drift);
    assert_eq!(f[0].object, "fence_api.release");
    assert_eq!(
        f[0].fix,
        "fencepost migrate --overwrite-drift (it restores drifted procedures), or ALTER PROCEDURE [fence_api].[Release] with the \
         shipped text of procedures/fence_api.Release.sql"
    );
}

#[test]
fn fp012_fp013_database_options() {
    let mut c = clean();
    c.settings = Some(fencepost::audit::DatabaseSettings {
        trustworthy: false,
        db_chaining: true,
    });
    assert_eq!(
        found(&c, Rule::CrossDatabaseChaining)[0].fix,
        "ALTER DATABASE CURRENT SET DB_CHAINING OFF;"
    );
    c.settings = Some(fencepost::audit::DatabaseSettings {
        trustworthy: true,
        db_chaining: false,
    });
    assert_eq!(
        found(&c, Rule::Trustworthy)[0].fix,
        "ALTER DATABASE CURRENT SET TRUSTWORTHY OFF;"
    );
}

#[test]
fn fp014_guest_with_connect() {
    let mut c = clean();
    c.permissions.push(grant("guest", "CONNECT", Securable::Database));
    assert_eq!(found(&c, Rule::GuestConnect)[0].fix, "REVOKE CONNECT FROM [guest];");
}

fn cannot_verify_rules(report: &Report) -> Vec<&'static str> {
    report.cannot_verify.iter().map(|c| c.rule.id()).collect()
}

#[test]
fn an_empty_permission_catalog_cannot_be_verified_never_passes() {
    // Babelfish: sys.database_permissions is empty although the deploy's
    // EXECUTE grants exist.
    let mut c = clean();
    c.permissions.clear();
    let report = check(&c);
    assert!(report.findings.is_empty());
    // Who is a service is hidden too: the deployer, in db_owner and
    // sysadmin, may be one.
    assert_eq!(
        cannot_verify_rules(&report),
        [
            "FP001", "FP002", "FP003", "FP004", "FP005", "FP006", "FP007", "FP014", "FP016", "FP020", "FP021", "FP023",
            "FP027"
        ]
    );
    assert!(
        report
            .cannot_verify_of(Rule::WriteAccess)
            .next()
            .unwrap()
            .reason
            .contains("none of the 31 EXECUTE grants"),
        "{report:#?}"
    );
    assert!(
        report
            .cannot_verify_of(Rule::PrivilegedRole)
            .next()
            .unwrap()
            .reason
            .contains("deployer (in db_owner)"),
        "{report:#?}"
    );
    assert_eq!(report.exit_code(), 3);
}

#[test]
fn findings_outside_the_permission_catalog_still_show_when_it_is_empty() {
    let mut c = clean();
    c.permissions.clear();
    c.memberships.push(member("db_datawriter", "orders_svc"));
    let report = check(&c);
    assert_eq!(report.findings.len(), 1);
    assert_eq!(report.findings[0].rule, Rule::PrivilegedRole);
    assert_eq!(report.exit_code(), 1);
}

#[test]
fn an_engine_without_ownership_chaining_cannot_verify_the_chain() {
    let mut c = clean();
    c.engine.chains_ownership = false;
    c.engine.product = "Babelfish for PostgreSQL".into();
    let report = check(&c);
    assert_eq!(cannot_verify_rules(&report), ["FP009"]);
    assert!(
        report.cannot_verify[0]
            .reason
            .starts_with("Babelfish for PostgreSQL does not chain ownership")
    );
    assert_eq!(report.exit_code(), 3);
}

#[test]
fn hidden_server_facts_journal_and_definitions_cannot_be_verified() {
    let mut c = clean();
    c.server = None;
    c.deployed = None;
    c.settings = None;
    object_mut(&mut c, "dbo.ShipOrder").definition = None;
    object_mut(&mut c, "fence_api.Inspect").definition = None;
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(
        cannot_verify_rules(&report),
        ["FP002", "FP008", "FP010", "FP011", "FP012", "FP013", "FP016", "FP022"]
    );
    assert!(report.cannot_verify[1].reason.contains("dbo.ShipOrder"));
    assert!(report.cannot_verify[2].reason.contains("fence_api.Inspect"));
}

#[test]
fn a_procedure_without_a_recorded_hash_cannot_be_compared() {
    let mut c = clean();
    c.deployed.as_mut().unwrap()[0].definition_hash = None;
    let report = check(&c);
    assert_eq!(cannot_verify_rules(&report), ["FP011"]);
    assert!(
        report.cannot_verify[0]
            .reason
            .contains("fence_admin.ForceRelease (no hash recorded")
    );
}

#[test]
fn a_deny_does_not_count_as_a_grant() {
    let mut c = clean();
    for p in &mut c.permissions {
        p.state = PermissionState::Deny;
    }
    let report = check(&c);
    assert!(report.findings.is_empty());
    // With every EXECUTE denied, none of the deploy's grants shows.
    assert_eq!(report.exit_code(), 3);
}

#[test]
fn the_fixture_grants_are_the_permission_scripts_grants_and_the_policy_expects_each() {
    // The fixture builds its EXECUTE grants from permissions/*.sql; the
    // policy the live rules use must name the same ones, no more, no fewer.
    let mut from_scripts: Vec<(String, String)> = shipped_grants(&shipped_sources())
        .into_iter()
        .map(|p| {
            assert_eq!(p.permission, "EXECUTE", "{p:?}");
            let Securable::Object { schema, name, .. } = &p.on else {
                panic!("a shipped grant on something other than a procedure: {p:?}");
            };
            (p.grantee.to_lowercase(), format!("{schema}.{name}").to_lowercase())
        })
        .collect();
    let mut expected: Vec<(String, String)> = Policy::default()
        .expected_grants()
        .map(|(role, procedure)| (role.to_lowercase(), procedure.to_lowercase()))
        .collect();
    from_scripts.sort();
    expected.sort();
    assert_eq!(from_scripts, expected);
    assert_eq!(from_scripts.len(), 31);
    // And the clean fixture holds exactly those.
    let c = clean();
    let mut in_fixture: Vec<(String, String)> = c
        .permissions
        .iter()
        .filter(|p| p.permission == "EXECUTE" && p.state == PermissionState::Grant)
        .filter_map(|p| match &p.on {
            Securable::Object { schema, name, .. } => {
                Some((p.grantee.to_lowercase(), format!("{schema}.{name}").to_lowercase()))
            }
            _ => None,
        })
        .collect();
    in_fixture.sort();
    assert_eq!(in_fixture, expected);
}
