//! `check` against a real engine for the ways a service reaches the fence
//! that the catalog alone once hid: each test deploys a fresh database, makes
//! the path with real T-SQL and expects the rule that names it. A test may
//! skip only on Babelfish, and only for the reason it names: the engine
//! refuses the statement as unsupported, or its catalog cannot show the rule
//! (the check then says "cannot verify", never clean).

mod support;

use std::io::Write;

use fencepost::audit::{Catalog, Policy, Report, Rule, evaluate, read_catalog, read_catalog_counted};
use support::{TestDatabase, connect_ado};

const BABELFISH: &str = "Babelfish for PostgreSQL";

fn say(line: &str) {
    // Past the harness's capture: a skip must be seen.
    let _ = writeln!(std::io::stderr(), "{line}");
}

async fn catalog(db: &TestDatabase) -> Catalog {
    read_catalog(&mut db.connect().await).await.expect("read the catalog")
}

/// The user (and login) name in an ADO string made by the support module.
fn user_of(ado: &str) -> String {
    ado.split(';')
        .find_map(|kv| kv.strip_prefix("User ID="))
        .expect("the support module names the user")
        .to_string()
}

/// Makes a path to the fence. Only Babelfish may refuse, and only as
/// unsupported; then the test reports itself skipped. Anything else fails.
async fn attack(test: &str, db: &TestDatabase, sql: &str) -> bool {
    let mut conn = db.connect().await;
    let result = match conn.simple_query(sql).await {
        Ok(stream) => stream.into_results().await.map(drop),
        Err(e) => Err(e),
    };
    let Err(e) = result else { return true };
    let message = e.to_string();
    let unsupported = [
        "not currently supported in Babelfish",
        "does not exist",
        "only sysadmin role is supported",
    ];
    assert!(
        db.is_babelfish().await && unsupported.iter().any(|m| message.contains(m)),
        "the engine refused `{sql}`: {message}"
    );
    say(&format!("{test}: skipped: Babelfish refuses `{sql}`: {message}"));
    false
}

/// `rule` names `who` in a finding; or, on Babelfish only, the rule is
/// "cannot verify" for a reason containing `babelfish_reason`, which the
/// test reports as a skip. Anything else fails.
fn expect_named(test: &str, catalog: &Catalog, report: &Report, rule: Rule, who: &str, babelfish_reason: &str) {
    assert_ne!(
        report.exit_code(),
        0,
        "a path to the fence was reported clean:\n{report:#?}"
    );
    let named = report
        .findings_of(rule)
        .any(|f| f.principal.as_deref().is_some_and(|p| p.contains(who)) || f.object.contains(who));
    if named {
        return;
    }
    let unverified = report
        .cannot_verify_of(rule)
        .find(|c| c.reason.contains(babelfish_reason));
    match unverified {
        Some(c) if catalog.engine.product == BABELFISH => say(&format!(
            "{test}: skipped: {} cannot be verified on Babelfish: {}",
            rule.id(),
            c.reason
        )),
        _ => panic!("{} did not name {who}:\n{report:#?}", rule.id()),
    }
}

#[tokio::test]
async fn the_catalog_read_shows_what_the_checking_login_sees_in_one_batch() {
    let test = "the_catalog_read_shows_what_the_checking_login_sees_in_one_batch";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let (catalog, round_trips) = read_catalog_counted(&mut db.connect().await)
        .await
        .expect("read the catalog");
    assert_eq!(
        round_trips, 1,
        "the catalog batch failed and fell back to one query at a time"
    );
    let visibility = catalog.visibility.expect("the checking login's view is read");
    assert!(
        catalog.trustworthy_databases.is_some(),
        "the TRUSTWORTHY databases are listed"
    );
    assert_eq!(catalog.signatures_unreadable, None);
    // Linked servers are read everywhere; queues are read, or (Babelfish,
    // which has no Service Broker) known to be none.
    assert!(catalog.linked_servers.is_some(), "linked servers are read");
    assert!(catalog.activated_queues.is_some(), "activated queues are read");
    let report = evaluate(&catalog, &Policy::default());
    assert_eq!(report.findings, vec![], "{report:#?}");
    if catalog.engine.product == BABELFISH {
        // The deploy login is sysadmin; the engine has no fn_my_permissions.
        assert!(visibility.sysadmin, "{visibility:?}");
        for c in &report.cannot_verify {
            let known = c.reason.contains("sys.database_permissions")
                || c.reason.contains("does not chain ownership")
                || c.reason
                    .contains("(sys.server_triggers) could not be read on Babelfish")
                || c.reason
                    .contains("has no security policy catalog (sys.security_predicates)")
                || c.reason
                    .contains("has no SQL Server Agent catalog (msdb.dbo.sysjobsteps)")
                || c.reason == fencepost::deploy::identity::CANNOT_VERIFY_REASON;
            assert!(known, "an unexpected cannot verify on Babelfish: {c:?}");
            say(&format!(
                "{test}: cannot verify {} on Babelfish: {}",
                c.rule.id(),
                c.reason
            ));
        }
    } else {
        assert!(
            visibility.sysadmin || visibility.view_definition == Some(true),
            "{visibility:?}"
        );
        assert_eq!(report.exit_code(), 0, "{report:#?}");
    }
    db.drop().await;
}

#[tokio::test]
async fn a_user_who_may_run_the_fence_api_is_a_service_though_in_no_fence_role() {
    let test = "a_user_who_may_run_the_fence_api_is_a_service_though_in_no_fence_role";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let user = user_of(&db.login_in_role(None).await);
    db.exec(&format!("GRANT EXECUTE ON SCHEMA::fence_api TO [{user}];"))
        .await;
    if attack(test, &db, &format!("ALTER ROLE [db_datawriter] ADD MEMBER [{user}];")).await {
        let catalog = catalog(&db).await;
        let report = evaluate(&catalog, &Policy::default());
        expect_named(test, &catalog, &report, Rule::PrivilegedRole, &user, &user);
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
        say(&format!("{test}: skipped: Babelfish maps no login to dbo by SID"));
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
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let create = "CREATE PROCEDURE dbo.Purge @What sysname WITH EXECUTE AS OWNER AS
                  BEGIN
                      DECLARE @sql nvarchar(max) = N'DELETE FROM ' + @What;
                      EXEC (@sql);
                  END;";
    if attack(test, &db, create).await {
        db.exec("GRANT EXECUTE ON dbo.Purge TO fence_service;").await;
        let catalog = catalog(&db).await;
        let report = evaluate(&catalog, &Policy::default());
        expect_named(
            test,
            &catalog,
            &report,
            Rule::RunsAsSomeoneElse,
            "dbo.Purge",
            "dbo.Purge",
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn alter_on_a_table_of_the_fence_tables_owner_held_by_a_service_is_named() {
    let test = "alter_on_a_table_of_the_fence_tables_owner_held_by_a_service_is_named";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    db.exec("CREATE TABLE dbo.Orders (Id int NOT NULL PRIMARY KEY);").await;
    if attack(test, &db, "GRANT ALTER ON dbo.Orders TO fence_service;").await {
        let catalog = catalog(&db).await;
        let report = evaluate(&catalog, &Policy::default());
        expect_named(
            test,
            &catalog,
            &report,
            Rule::CodeChange,
            "fence_service",
            "sys.database_permissions",
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_ddl_trigger_that_writes_the_fence_is_named() {
    let test = "a_ddl_trigger_that_writes_the_fence_is_named";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let create = "CREATE TRIGGER ResetOnDdl ON DATABASE FOR CREATE_TABLE AS
                  UPDATE fence.Resource SET Owner = NULL, LeaseUntilUtc = NULL;";
    if attack(test, &db, create).await {
        let catalog = catalog(&db).await;
        let report = evaluate(&catalog, &Policy::default());
        expect_named(test, &catalog, &report, Rule::ForeignModule, "ResetOnDdl", "ResetOnDdl");
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
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
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
        expect_named(test, &catalog, &report, Rule::ServerPrivilege, &login, &login);
        db.exec(&format!("ALTER SERVER ROLE [securityadmin] DROP MEMBER [{login}];"))
            .await;
    }
    db.drop().await;
}

#[tokio::test]
async fn an_application_role_holds_what_every_service_holds() {
    let test = "an_application_role_holds_what_every_service_holds";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let create = "CREATE APPLICATION ROLE reporting_app WITH PASSWORD = 'Ap#pl1cation-role';";
    if attack(test, &db, create).await {
        db.exec("GRANT UPDATE TO reporting_app;").await;
        let catalog = catalog(&db).await;
        let report = evaluate(&catalog, &Policy::default());
        expect_named(
            test,
            &catalog,
            &report,
            Rule::WriteAccess,
            "reporting_app",
            "sys.database_permissions",
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
        Err(e) => say(&format!("{test}: the catalog read failed, as it may: {e}")),
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
