//! `check` against a real engine for the layouts of the wider permission
//! model: each test deploys a fresh database, makes the layout with real
//! T-SQL and expects the rule that names it. Where Babelfish cannot make the
//! layout at all, the test reports a skip with the engine's own refusal,
//! matched exactly (code and message), never any error; it asks before it
//! deploys (support::refusal), so such a skip costs no deploy.

use crate::support;

use fencepost::audit::{Policy, Report, Rule, evaluate, read_catalog};
use support::refusal::{Refusal, deployed_unless_refused, deployed_unless_refused_by_a_user, is_known, run};
use support::{TestDatabase, skip, user_of};

/// Babelfish 4.2's refusals of the layouts it cannot make, exactly as it
/// answers them: its code for errors without a SQL Server number, and the
/// whole message.
const BABELFISH_REFUSALS: [Refusal; 7] = [
    (
        33557097,
        "'ALTER AUTHORIZATION on object types other than DATABASE::' is not currently supported in Babelfish",
    ),
    // Numbered procedures (`name;2`) are not in its grammar.
    (33557097, "syntax error at or near \";\""),
    (33557097, "role \"db_backupoperator\" does not exist"),
    // Linked servers need PostgreSQL's tds_fdw, which it does not ship.
    (33557097, "foreign-data wrapper \"tds_fdw\" does not exist"),
    (33557097, "'CREATE QUEUE' is not currently supported in Babelfish"),
    // No SQL Server Agent: msdb has neither its procedures nor its tables.
    (
        33557097,
        "procedure msdb_dbo.sp_add_job(@job_name => nvarchar, @owner_login_name => nvarchar) does not exist",
    ),
    (33557097, "'CREATE SERVER ROLE' is not currently supported in Babelfish"),
];

/// Runs `sql`. False, after reporting the skip, only when the engine is
/// Babelfish and refuses it with one of its known refusals, word for word.
async fn make(test: &str, db: &TestDatabase, sql: &str) -> bool {
    let Err(e) = run(db, sql).await else { return true };
    assert!(
        is_known(&BABELFISH_REFUSALS, db, &e) && db.is_babelfish().await,
        "the layout `{sql}` was refused, and not as Babelfish is known to refuse it: {e}"
    );
    skip(test, &format!("Babelfish refuses `{sql}`: {e}"));
    false
}

async fn report(db: &TestDatabase) -> Report {
    let catalog = read_catalog(&mut db.connect().await).await.expect("read the catalog");
    evaluate(&catalog, &Policy::default())
}

fn expect(report: &Report, rule: Rule, object: &str, principal: &str) {
    assert!(
        report.findings_of(rule).any(|f| f.object.eq_ignore_ascii_case(object)
            && f.principal
                .as_deref()
                .is_some_and(|p| p.eq_ignore_ascii_case(principal))),
        "{} did not name {principal} on {object}:\n{report:#?}",
        rule.id()
    );
    assert_ne!(report.exit_code(), 0);
}

#[tokio::test]
async fn a_service_whose_default_schema_another_user_owns_is_named() {
    let test = "a_service_whose_default_schema_another_user_owns_is_named";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let service = user_of(&db.login_in_role(Some("fence_service")).await);
    let other = user_of(&db.login_in_role(None).await);
    db.exec(&format!("CREATE SCHEMA tools AUTHORIZATION [{other}];")).await;
    db.exec(&format!("ALTER USER [{service}] WITH DEFAULT_SCHEMA = tools;"))
        .await;
    expect(&report(&db).await, Rule::IndirectCode, "SCHEMA::tools", &service);
    db.drop().await;
}

#[tokio::test]
async fn a_service_owning_a_schema_that_holds_a_dbo_owned_procedure_is_named() {
    let test = "a_service_owning_a_schema_that_holds_a_dbo_owned_procedure_is_named";
    let probe = "ALTER AUTHORIZATION ON OBJECT::dbo.Purge TO dbo;";
    let Some(mut db) = deployed_unless_refused(test, &BABELFISH_REFUSALS, probe).await else {
        return;
    };
    let service = user_of(&db.login_in_role(Some("fence_service")).await);
    db.exec(&format!("CREATE SCHEMA tools AUTHORIZATION [{service}];"))
        .await;
    db.exec("CREATE PROCEDURE tools.Purge AS SELECT 1;").await;
    if make(test, &db, "ALTER AUTHORIZATION ON OBJECT::tools.Purge TO dbo;").await {
        expect(&report(&db).await, Rule::SchemaCode, "SCHEMA::tools", &service);
    }
    db.drop().await;
}

#[tokio::test]
async fn a_numbered_procedure_beside_acquire_is_named() {
    let test = "a_numbered_procedure_beside_acquire_is_named";
    let numbered = "CREATE PROCEDURE fence_api.Acquire;2 AS SELECT 1;";
    let Some(db) = deployed_unless_refused(test, &BABELFISH_REFUSALS, numbered).await else {
        return;
    };
    if make(test, &db, numbered).await {
        let report = report(&db).await;
        assert!(
            report
                .findings_of(Rule::IndirectCode)
                .any(|f| f.object.eq_ignore_ascii_case("fence_api.Acquire;2")),
            "{report:#?}"
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_service_in_db_backupoperator_is_named() {
    let test = "a_service_in_db_backupoperator_is_named";
    let probe = |user: &str| format!("ALTER ROLE db_backupoperator ADD MEMBER [{user}];");
    let Some(mut db) = deployed_unless_refused_by_a_user(test, &BABELFISH_REFUSALS, probe).await else {
        return;
    };
    let service = user_of(&db.login_in_role(Some("fence_service")).await);
    if make(
        test,
        &db,
        &format!("ALTER ROLE db_backupoperator ADD MEMBER [{service}];"),
    )
    .await
    {
        expect(
            &report(&db).await,
            Rule::SideChannel,
            "ROLE::db_backupoperator",
            &service,
        );
    }
    db.drop().await;
}

/// A server object: dropped before (a run that panicked left it) and after.
const LOOPBACK_DROP: &str = "IF EXISTS (SELECT 1 FROM sys.servers WHERE name = N'fencepost_test_loopback')
         EXEC sp_dropserver @server = N'fencepost_test_loopback', @droplogins = 'droplogins';";

#[tokio::test]
async fn a_linked_server_back_to_this_server_is_named() {
    let test = "a_linked_server_back_to_this_server_is_named";
    let add = "DECLARE @here sysname = @@SERVERNAME;
         EXEC sp_addlinkedserver @server = N'fencepost_test_loopback', @srvproduct = N'', @provider = N'MSOLEDBSQL',
              @datasrc = @here;";
    let Some(db) = deployed_unless_refused(test, &BABELFISH_REFUSALS, add).await else {
        return;
    };
    if !db.is_babelfish().await {
        db.exec(LOOPBACK_DROP).await;
    }
    if make(test, &db, add).await {
        let report = report(&db).await;
        db.exec(LOOPBACK_DROP).await;
        assert!(
            report
                .findings_of(Rule::LinkedServer)
                .any(|f| f.object == "LINKED SERVER::fencepost_test_loopback"),
            "{report:#?}"
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn a_queue_activating_a_procedure_that_writes_the_fence_is_named() {
    let test = "a_queue_activating_a_procedure_that_writes_the_fence_is_named";
    let probe = "CREATE QUEUE dbo.Intake WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = dbo.ProcessIntake,
                                                  MAX_QUEUE_READERS = 1, EXECUTE AS OWNER);";
    let Some(db) = deployed_unless_refused(test, &BABELFISH_REFUSALS, probe).await else {
        return;
    };
    db.exec("CREATE PROCEDURE dbo.ProcessIntake AS DELETE FROM fence.Tenure WHERE 1 = 0;")
        .await;
    if make(
        test,
        &db,
        "CREATE QUEUE dbo.Intake WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = dbo.ProcessIntake,
                                                  MAX_QUEUE_READERS = 1, EXECUTE AS OWNER);
         CREATE SERVICE IntakeService ON QUEUE dbo.Intake ([DEFAULT]);
         CREATE USER intake WITHOUT LOGIN;
         GRANT SEND ON SERVICE::IntakeService TO intake;",
    )
    .await
    {
        expect(&report(&db).await, Rule::QueueActivation, "QUEUE::dbo.Intake", "intake");
    }
    db.drop().await;
}

#[tokio::test]
async fn a_login_that_may_write_msdbs_job_tables_is_named() {
    let test = "a_login_that_may_write_msdbs_job_tables_is_named";
    // Named after a user of this run, so a job the probe made is known as
    // this run's.
    let probe =
        |user: &str| format!("EXEC msdb.dbo.sp_add_job @job_name = N'{user}_prune', @owner_login_name = N'sa';");
    let Some(mut db) = deployed_unless_refused_by_a_user(test, &BABELFISH_REFUSALS, probe).await else {
        return;
    };
    // Server-wide names, unique to this database.
    let job = format!("{}_prune", db.name);
    let login = user_of(&db.login_in_role(None).await);
    let cleanup = format!(
        "IF EXISTS (SELECT 1 FROM msdb.dbo.sysjobs WHERE name = N'{job}') EXEC msdb.dbo.sp_delete_job @job_name = N'{job}';
         USE msdb;
         IF USER_ID(N'{login}') IS NOT NULL DROP USER [{login}];"
    );
    // A harmless step, owned by sa, so run as the Agent's sysadmin login.
    if make(
        test,
        &db,
        &format!(
            "EXEC msdb.dbo.sp_add_job @job_name = N'{job}', @owner_login_name = N'sa';
             EXEC msdb.dbo.sp_add_jobstep @job_name = N'{job}', @step_name = N'prune', @subsystem = N'TSQL',
                  @database_name = N'{db}', @command = N'EXEC fence_api.PruneTenure @OlderThanDays = 30;';",
            db = db.name
        ),
    )
    .await
    {
        let made = make(
            test,
            &db,
            &format!(
                "USE msdb; CREATE USER [{login}] FOR LOGIN [{login}]; ALTER ROLE [db_datawriter] ADD MEMBER [{login}];"
            ),
        )
        .await;
        let report = if made { Some(report(&db).await) } else { None };
        // On a session of its own: its USE would outlast the batch.
        support::exec(&mut db.connect().await, &cleanup).await;
        if let Some(report) = report {
            expect(&report, Rule::AgentJob, "DATABASE::msdb", &login);
        }
    }
    db.drop().await;
}

#[tokio::test]
async fn alter_any_server_role_with_an_empty_role_holding_control_server_is_named() {
    let test = "alter_any_server_role_with_an_empty_role_holding_control_server_is_named";
    let probe = |user: &str| format!("CREATE SERVER ROLE [{user}_ops];");
    let Some(mut db) = deployed_unless_refused_by_a_user(test, &BABELFISH_REFUSALS, probe).await else {
        return;
    };
    let role = format!("{}_ops", db.name);
    let login = user_of(&db.login_in_role(Some("fence_service")).await);
    if make(
        test,
        &db,
        &format!("CREATE SERVER ROLE [{role}]; GRANT CONTROL SERVER TO [{role}];"),
    )
    .await
    {
        db.exec(&format!("GRANT ALTER ANY SERVER ROLE TO [{login}];")).await;
        let report = report(&db).await;
        db.exec(&format!(
            "REVOKE ALTER ANY SERVER ROLE FROM [{login}]; DROP SERVER ROLE [{role}];"
        ))
        .await;
        assert!(
            report.findings_of(Rule::ServerPrivilege).any(|f| {
                f.principal.as_deref().is_some_and(|p| p.eq_ignore_ascii_case(&login))
                    && f.permission.as_deref() == Some("ALTER ANY SERVER ROLE")
                    && f.why.contains(&role)
            }),
            "FP016 did not name {login}'s ALTER ANY SERVER ROLE with the empty role {role}:\n{report:#?}"
        );
    }
    db.drop().await;
}

#[tokio::test]
async fn the_owner_of_a_table_a_fence_key_references_on_delete_set_null_is_named() {
    // Ownership rather than a GRANT: Babelfish shows no grants, and an
    // owner may DELETE what it owns on every engine.
    let test = "the_owner_of_a_table_a_fence_key_references_on_delete_set_null_is_named";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let other = user_of(&db.login_in_role(None).await);
    db.exec(&format!("CREATE SCHEMA tenants AUTHORIZATION [{other}];"))
        .await;
    db.exec("CREATE TABLE tenants.Tenants (TenantId int NOT NULL PRIMARY KEY);")
        .await;
    db.exec("ALTER TABLE fence.Resource ADD TenantId int NULL;").await;
    db.exec(
        "ALTER TABLE fence.Resource ADD CONSTRAINT FK_Resource_Tenant FOREIGN KEY (TenantId) \
         REFERENCES tenants.Tenants (TenantId) ON DELETE SET NULL;",
    )
    .await;
    let catalog = read_catalog(&mut db.connect().await).await.expect("read the catalog");
    let key = catalog
        .foreign_keys
        .iter()
        .flatten()
        .find(|k| k.name.eq_ignore_ascii_case("FK_Resource_Tenant"))
        .unwrap_or_else(|| panic!("the key is read: {:#?}", catalog.foreign_keys));
    assert_eq!(key.on_delete, fencepost::audit::ReferentialAction::SetNull);
    assert!(key.referenced.eq_ignore_ascii_case("tenants.Tenants"), "{key:?}");
    assert!(key.table.eq_ignore_ascii_case("fence.Resource"), "{key:?}");
    assert!(
        key.referenced_columns.len() == 1 && key.referenced_columns[0].eq_ignore_ascii_case("TenantId"),
        "{key:?}"
    );
    let report = evaluate(&catalog, &Policy::default());
    // Babelfish spells every name in lower case; another rule may name the
    // owner first and carry the path.
    let named = report.findings.iter().any(|f| {
        f.principal.as_deref().is_some_and(|p| p.eq_ignore_ascii_case(&other))
            && f.path
                .iter()
                .any(|s| s.step.to_lowercase().contains("foreign key fk_resource_tenant"))
    });
    assert!(named, "{other} not named through the key:\n{report:#?}");
    db.drop().await;
}
