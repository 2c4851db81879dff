//! `check` against a real engine for the ways a service reaches the fence
//! that the catalog alone once hid: each test deploys a fresh database, makes
//! the path with real T-SQL and expects the rule that names it. A test may
//! skip only on Babelfish, and only for the reason it names: the engine
//! refuses the statement as unsupported, or its catalog cannot show the rule
//! (the check then says "cannot verify", never clean).

use crate::support;

use std::io::Write;

use fencepost::audit::{AuditError, Catalog, Policy, Report, Rule, evaluate, read_catalog};
use support::refusal::{Refusal, deployed_unless_refused, deployed_unless_refused_by_a_user, is_known, run};
use support::{TestDatabase, connect_ado, skip, user_of};

const BABELFISH: &str = "Babelfish for PostgreSQL";

/// Babelfish 4.2's refusals of the attacks below, each as it answers it
/// (error code, message), recorded by running the attack: the engine lacks
/// the feature, so no check could see the path it makes.
const BABELFISH_REFUSALS: [Refusal; 6] = [
    (33557097, "role \"db_datawriter\" does not exist"),
    (
        33557097,
        "'EXECUTE AS SELF|OWNER|<user>|<login>' is not currently supported in Babelfish",
    ),
    (
        33557097,
        "'GRANT PERMISSION ALTER' is not currently supported in Babelfish",
    ),
    (33557097, "'DDL trigger' is not currently supported in Babelfish"),
    (
        33557097,
        "only sysadmin role is supported in ALTER SERVER ROLE statement",
    ),
    (
        33557097,
        "'CREATE APPLICATION ROLE' is not currently supported in Babelfish",
    ),
];

/// The engine-limit pieces of a "cannot verify" reason that let a test skip
/// on Babelfish, as the check words them.
const PERMISSION_CATALOG: &str = "the permission catalog (sys.database_permissions) shows none of the";
const SERVER_PERMISSION_CATALOG: &str = "has no server permission catalog (sys.server_permissions)";

fn say(line: &str) {
    // Past the harness's capture: what the engine showed must be seen.
    let _ = writeln!(std::io::stderr(), "{line}");
}

async fn catalog(db: &TestDatabase) -> Catalog {
    read_catalog(&mut db.connect().await).await.expect("read the catalog")
}

/// Makes a path to the fence. Only Babelfish may refuse, and only with one
/// of its recorded refusals; then the test reports itself skipped. Anything
/// else fails.
async fn attack(test: &str, db: &TestDatabase, sql: &str) -> bool {
    let Err(e) = run(db, sql).await else { return true };
    assert!(
        db.is_babelfish().await && is_known(&BABELFISH_REFUSALS, db, &e),
        "the engine refused `{sql}`, not with a refusal Babelfish is known to give: {e}"
    );
    skip(test, &format!("Babelfish refuses `{sql}`: {e}"));
    false
}

/// The rules `report` leaves unverified, in order, each once.
fn unverified(report: &Report) -> Vec<Rule> {
    let mut rules: Vec<Rule> = report.cannot_verify.iter().map(|c| c.rule).collect();
    rules.dedup();
    rules
}

/// `rule` names `who` in a finding; or, on Babelfish only, nothing changed
/// from the clean deploy (`clean`, its unverified rules): `rule` was and is
/// unverified, for the engine limit `limit` (an exact piece of the reason),
/// and no other rule joined it. The test then reports a skip naming that
/// limit. Anything else fails.
fn expect_named(test: &str, catalog: &Catalog, clean: &[Rule], report: &Report, rule: Rule, who: &str, limit: &str) {
    let named = report
        .findings_of(rule)
        .any(|f| f.principal.as_deref().is_some_and(|p| p.contains(who)) || f.object.contains(who));
    if named {
        assert_eq!(report.exit_code(), 1, "{report:#?}");
        return;
    }
    let reason = report.cannot_verify_of(rule).find(|c| c.reason.contains(limit));
    match reason {
        Some(c) if catalog.engine.product == BABELFISH && clean.contains(&rule) && unverified(report) == clean => skip(
            test,
            &format!(
                "{} cannot be verified on Babelfish ({limit}), as on a clean deploy: {}",
                rule.id(),
                c.reason
            ),
        ),
        _ => panic!(
            "{} did not name {who} (a clean deploy leaves {clean:?} unverified):\n{report:#?}",
            rule.id()
        ),
    }
}

/// The rules a clean deploy of `db` leaves unverified: what an attack's
/// report is compared with.
async fn clean_unverified(db: &TestDatabase) -> Vec<Rule> {
    let report = evaluate(&catalog(db).await, &Policy::default());
    assert_eq!(report.findings, vec![], "{report:#?}");
    unverified(&report)
}

#[tokio::test]
async fn a_user_who_may_run_the_fence_api_is_a_service_though_in_no_fence_role() {
    let test = "a_user_who_may_run_the_fence_api_is_a_service_though_in_no_fence_role";
    let probe = |user: &str| format!("ALTER ROLE [db_datawriter] ADD MEMBER [{user}];");
    let Some(mut db) = deployed_unless_refused_by_a_user(test, &BABELFISH_REFUSALS, probe).await else {
        return;
    };
    let clean = clean_unverified(&db).await;
    let user = user_of(&db.login_in_role(None).await);
    db.exec(&format!("GRANT EXECUTE ON SCHEMA::fence_api TO [{user}];"))
        .await;
    if attack(test, &db, &format!("ALTER ROLE [db_datawriter] ADD MEMBER [{user}];")).await {
        let catalog = catalog(&db).await;
        let report = evaluate(&catalog, &Policy::default());
        expect_named(
            test,
            &catalog,
            &clean,
            &report,
            Rule::PrivilegedRole,
            &user,
            PERMISSION_CATALOG,
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_service_named_dbo_enters_as_dbo() {
    let test = "a_service_named_dbo_enters_as_dbo";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let mut policy = Policy::default();
    policy.add_principal("dbo");
    let report = evaluate(&catalog(&db).await, &policy);
    let f: Vec<_> = report.findings_of(Rule::ServiceIsDbo).collect();
    assert_eq!(f.len(), 1, "{report:#?}");
    assert!(
        !report.findings.iter().any(|f| f.fix.contains("DROP MEMBER [dbo]")),
        "{report:#?}"
    );
    db.drop().await;
}

#[tokio::test]
async fn the_login_that_owns_the_database_named_as_a_service_enters_as_dbo() {
    let test = "the_login_that_owns_the_database_named_as_a_service_enters_as_dbo";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let catalog = catalog(&db).await;
    let Some(owner) = catalog.owner_login().map(str::to_string) else {
        assert_eq!(catalog.engine.product, BABELFISH, "dbo's login is hidden: {catalog:#?}");
        skip(test, "Babelfish maps no login to dbo by SID");
        db.drop().await;
        return;
    };
    let mut policy = Policy::default();
    policy.add_principal(&owner);
    let report = evaluate(&catalog, &policy);
    let f = report
        .findings_of(Rule::ServiceIsDbo)
        .next()
        .expect("FP015 names the owner");
    assert_eq!(f.principal.as_deref(), Some(owner.as_str()));
    db.drop().await;
}

#[tokio::test]
async fn a_principal_named_by_its_login_is_found_by_sid_and_an_unknown_name_is_an_error() {
    let test = "a_principal_named_by_its_login_is_found_by_sid_and_an_unknown_name_is_an_error";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let login = user_of(&db.login_in_role(Some("fence_service")).await);
    db.exec(&format!("ALTER USER [{login}] WITH NAME = [svc_alias];")).await;
    let catalog = catalog(&db).await;
    let mut policy = Policy::default();
    policy.add_principal(&login);
    assert_eq!(policy.unknown_principals(&catalog), Vec::<&str>::new());
    assert_eq!(
        catalog.principal_or_login(&login).map(|p| p.name.to_lowercase()),
        Some("svc_alias".to_string())
    );
    let out = support::binary::fencepost_on(&db.ado(), ["check", "--principal", "nobody_by_that_name"])
        .output()
        .expect("run fencepost");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("service principal nobody_by_that_name (from --principal"),
        "{stderr}"
    );
    db.drop().await;
}

#[tokio::test]
async fn a_procedure_that_runs_as_its_owner_and_a_service_can_run_is_named() {
    let test = "a_procedure_that_runs_as_its_owner_and_a_service_can_run_is_named";
    let create = "CREATE PROCEDURE dbo.Purge @What sysname WITH EXECUTE AS OWNER AS
                  BEGIN
                      DECLARE @sql nvarchar(max) = N'DELETE FROM ' + @What;
                      EXEC (@sql);
                  END;";
    let Some(db) = deployed_unless_refused(test, &BABELFISH_REFUSALS, create).await else {
        return;
    };
    let clean = clean_unverified(&db).await;
    if attack(test, &db, create).await {
        db.exec("GRANT EXECUTE ON dbo.Purge TO fence_service;").await;
        let catalog = catalog(&db).await;
        let report = evaluate(&catalog, &Policy::default());
        expect_named(
            test,
            &catalog,
            &clean,
            &report,
            Rule::RunsAsSomeoneElse,
            "dbo.Purge",
            PERMISSION_CATALOG,
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn alter_on_a_table_of_the_fence_tables_owner_held_by_a_service_is_named() {
    let test = "alter_on_a_table_of_the_fence_tables_owner_held_by_a_service_is_named";
    let probe = "CREATE TABLE dbo.Orders (Id int NOT NULL PRIMARY KEY); CREATE ROLE fence_service;
                 GRANT ALTER ON dbo.Orders TO fence_service;";
    let Some(db) = deployed_unless_refused(test, &BABELFISH_REFUSALS, probe).await else {
        return;
    };
    let clean = clean_unverified(&db).await;
    db.exec("CREATE TABLE dbo.Orders (Id int NOT NULL PRIMARY KEY);").await;
    if attack(test, &db, "GRANT ALTER ON dbo.Orders TO fence_service;").await {
        let catalog = catalog(&db).await;
        let report = evaluate(&catalog, &Policy::default());
        expect_named(
            test,
            &catalog,
            &clean,
            &report,
            Rule::CodeChange,
            "fence_service",
            PERMISSION_CATALOG,
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_ddl_trigger_that_writes_the_fence_is_named() {
    let test = "a_ddl_trigger_that_writes_the_fence_is_named";
    let create = "CREATE TRIGGER ResetOnDdl ON DATABASE FOR CREATE_TABLE AS
                  UPDATE fence.Resource SET Owner = NULL, LeaseUntilUtc = NULL;";
    let Some(db) = deployed_unless_refused(test, &BABELFISH_REFUSALS, create).await else {
        return;
    };
    let clean = clean_unverified(&db).await;
    if attack(test, &db, create).await {
        let catalog = catalog(&db).await;
        let report = evaluate(&catalog, &Policy::default());
        expect_named(
            test,
            &catalog,
            &clean,
            &report,
            Rule::ForeignModule,
            "ResetOnDdl",
            PERMISSION_CATALOG,
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_wrapper_over_force_release_is_named() {
    let test = "a_wrapper_over_force_release_is_named";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    db.exec(
        "CREATE PROCEDURE dbo.Unstick @Key nvarchar(300) AS
         BEGIN
             EXEC fence_admin.ForceRelease @ResourceKey = @Key;
         END;",
    )
    .await;
    db.exec("GRANT EXECUTE ON dbo.Unstick TO fence_service;").await;
    let catalog = catalog(&db).await;
    let report = evaluate(&catalog, &Policy::default());
    let f = report
        .findings_of(Rule::ForeignModule)
        .find(|f| f.object.eq_ignore_ascii_case("dbo.Unstick"))
        .unwrap_or_else(|| panic!("FP008 did not name dbo.Unstick:\n{report:#?}"));
    assert!(f.why.to_lowercase().contains("fence_admin.forcerelease"), "{}", f.why);
    db.drop().await;
}

#[tokio::test]
async fn a_service_login_in_securityadmin_is_named() {
    let test = "a_service_login_in_securityadmin_is_named";
    // A login that does not exist: Babelfish refuses the role first.
    let probe = "ALTER SERVER ROLE [securityadmin] ADD MEMBER [fp_probe_login];";
    let Some(mut db) = deployed_unless_refused(test, &BABELFISH_REFUSALS, probe).await else {
        return;
    };
    let clean = clean_unverified(&db).await;
    let login = user_of(&db.login_in_role(Some("fence_service")).await);
    if attack(
        test,
        &db,
        &format!("ALTER SERVER ROLE [securityadmin] ADD MEMBER [{login}];"),
    )
    .await
    {
        let catalog = catalog(&db).await;
        let report = evaluate(&catalog, &Policy::default());
        expect_named(
            test,
            &catalog,
            &clean,
            &report,
            Rule::ServerPrivilege,
            &login,
            SERVER_PERMISSION_CATALOG,
        );
        db.exec(&format!("ALTER SERVER ROLE [securityadmin] DROP MEMBER [{login}];"))
            .await;
    }
    db.drop().await;
}

#[tokio::test]
async fn an_application_role_holds_what_every_service_holds() {
    let test = "an_application_role_holds_what_every_service_holds";
    let create = "CREATE APPLICATION ROLE reporting_app WITH PASSWORD = 'Ap#pl1cation-role';";
    let Some(db) = deployed_unless_refused(test, &BABELFISH_REFUSALS, create).await else {
        return;
    };
    let clean = clean_unverified(&db).await;
    if attack(test, &db, create).await {
        db.exec("GRANT UPDATE TO reporting_app;").await;
        let catalog = catalog(&db).await;
        let report = evaluate(&catalog, &Policy::default());
        expect_named(
            test,
            &catalog,
            &clean,
            &report,
            Rule::WriteAccess,
            "reporting_app",
            PERMISSION_CATALOG,
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_checking_login_that_cannot_see_everything_never_says_clean() {
    let test = "a_checking_login_that_cannot_see_everything_never_says_clean";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let plain = db.login_in_role(None).await;
    match read_catalog(&mut connect_ado(&plain).await).await {
        // A view the login may not read fails the read: no report at all.
        // Only a permission refusal may: SQL Server's 229 (the SELECT
        // permission was denied), or Babelfish's PostgreSQL refusal.
        Err(AuditError::Query {
            what,
            source: tiberius::error::Error::Server(token),
        }) if token.code() == 229
            || (token.code() == 33557097 && token.message().starts_with("permission denied for ")) =>
        {
            say(&format!(
                "{test}: reading {what} was refused, as it may be: {} (code {})",
                token.message(),
                token.code()
            ))
        }
        Err(e) => panic!("the catalog read failed, and not for a permission the login lacks: {e}"),
        Ok(catalog) => {
            let report = evaluate(&catalog, &Policy::default());
            assert_ne!(report.exit_code(), 0, "{report:#?}");
            for rule in Rule::LIVE {
                assert!(
                    report.findings_of(rule).next().is_some() || report.cannot_verify_of(rule).next().is_some(),
                    "{} passed for a login that cannot see everything:\n{report:#?}",
                    rule.id()
                );
            }
        }
    }
    db.drop().await;
}

#[tokio::test]
async fn update_on_a_dbo_owned_view_over_a_fence_table_writes_it_and_names_the_grantee() {
    // SQL Server checks an UPDATE through a view on the view only when the
    // view and its table have one owner (ownership chaining); PostgreSQL,
    // under Babelfish, checks the table as the view's owner. Either way the
    // grantee writes fence.Resource, which it may not update directly.
    let test = "update_on_a_dbo_owned_view_over_a_fence_table_writes_it_and_names_the_grantee";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let clean = clean_unverified(&db).await;
    let ado = db.login_in_role(None).await;
    let user = user_of(&ado);
    db.exec("CREATE VIEW dbo.OpenLeases AS SELECT ResourceKey, Generation FROM fence.Resource;")
        .await;
    db.exec(&format!("GRANT SELECT, UPDATE ON dbo.OpenLeases TO [{user}];"))
        .await;
    let mut session = connect_ado(&ado).await;
    let write = |table: &str| format!("UPDATE {table} SET Generation = Generation + 1 WHERE 1 = 0;");
    let refused = match session.simple_query(write("fence.Resource")).await {
        Ok(stream) => stream.into_results().await.is_err(),
        Err(_) => true,
    };
    assert!(refused, "{user} updated fence.Resource directly");
    session
        .simple_query(write("dbo.OpenLeases"))
        .await
        .expect("the grantee may update through the view")
        .into_results()
        .await
        .expect("the grantee may update through the view");
    drop(session);
    let catalog = catalog(&db).await;
    let report = evaluate(&catalog, &Policy::default());
    expect_named(
        test,
        &catalog,
        &clean,
        &report,
        Rule::ReachesFence,
        &user,
        PERMISSION_CATALOG,
    );
    // Where it is named, it is named with the route through the view.
    for f in report
        .findings_of(Rule::ReachesFence)
        .filter(|f| f.principal.as_deref() == Some(user.as_str()))
    {
        assert!(
            f.path[0].step.to_lowercase().starts_with("update on dbo.openleases"),
            "{f:#?}"
        );
    }
    db.drop().await;
}
