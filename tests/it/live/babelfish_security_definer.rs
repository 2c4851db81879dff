//! Live tests of `fencepost script --target babelfish-postgres`, run with psql
//! on the PostgreSQL side of the Babelfish that FENCEPOST_TEST_MSSQL names
//! (FENCEPOST_TEST_POSTGRES). Each makes its own database.

use crate::support;

use fencepost::Client;
use fencepost::client::Provision;
use fencepost::deploy::{SecurityDefiner, Sources, read_security_definer};
use support::TestDatabase;
use support::babelfish_postgres::{postgres_or_skip, procedures_not_security_definer, run_security_definer_script};

/// Every fence procedure, as PostgreSQL names it.
fn all_fence_procedures() -> Vec<String> {
    let mut names: Vec<String> = Sources::embedded()
        .unwrap()
        .procedures()
        .iter()
        .map(|p| p.qualified_name().to_lowercase())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn the_script_makes_every_fence_procedure_security_definer_and_a_second_run_changes_nothing() {
    const TEST: &str = "the_script_makes_every_fence_procedure_security_definer_and_a_second_run_changes_nothing";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    if !db.is_babelfish().await {
        support::skip(TEST, "the engine is not Babelfish (SQL Server chains ownership)");
        db.drop().await;
        return;
    }
    let Some(postgres) = postgres_or_skip(TEST) else {
        db.drop().await;
        return;
    };
    let shipped = all_fence_procedures();
    assert_eq!(procedures_not_security_definer(&postgres, &db.name), shipped);

    let first = run_security_definer_script(&postgres, &db.name);
    let count = shipped.len();
    assert!(
        first.contains(&format!("{count} procedure(s) made SECURITY DEFINER, 0 already were")),
        "{first}"
    );
    assert_eq!(
        procedures_not_security_definer(&postgres, &db.name),
        Vec::<String>::new()
    );

    let second = run_security_definer_script(&postgres, &db.name);
    assert!(
        second.contains(&format!("0 procedure(s) made SECURITY DEFINER, {count} already were")),
        "{second}"
    );
    db.drop().await;
}

#[tokio::test]
async fn the_script_refuses_a_database_without_the_fence_and_changes_nothing() {
    const TEST: &str = "the_script_refuses_a_database_without_the_fence_and_changes_nothing";
    let Some(db) = TestDatabase::new(TEST).await else {
        return;
    };
    if !db.is_babelfish().await {
        support::skip(TEST, "the engine is not Babelfish (SQL Server chains ownership)");
        db.drop().await;
        return;
    }
    let Some(postgres) = postgres_or_skip(TEST) else {
        db.drop().await;
        return;
    };
    let refused = std::panic::catch_unwind(|| run_security_definer_script(&postgres, &db.name))
        .expect_err("the script ran on a database without the fence");
    let message = refused.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(message.contains("run fencepost migrate first"), "{message}");
    db.drop().await;
}

/// `fencepost status` on `db`: its exit status and what it printed.
fn status(db: &TestDatabase) -> (Option<i32>, String) {
    let output = support::binary::fencepost_on(&db.ado(), ["status"])
        .output()
        .expect("run fencepost status");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// What `fencepost check` says of FP009 on `db`: its outcome, and its
/// reason when it cannot verify.
fn fp009(db: &TestDatabase) -> (String, String) {
    let output = support::binary::fencepost_on(&db.ado(), ["check", "--format", "json"])
        .output()
        .expect("run fencepost check");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("check's JSON");
    let field = |list: &str, key: &str, value: &str| {
        report[list]
            .as_array()
            .into_iter()
            .flatten()
            .find(|entry| entry["id"] == "FP009" || entry["rule"] == "FP009")
            .map(|entry| entry[key].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|| value.to_owned())
    };
    (
        field("rules", "outcome", "absent"),
        field("cannot_verify", "reason", ""),
    )
}

/// The shipped sources with fence_api.Inspect changed, as a newer
/// fencepost would ship it: `migrate` deploys it with ALTER PROCEDURE.
fn inspect_changed() -> Sources {
    let shipped = Sources::embedded().unwrap();
    let inspect = shipped
        .procedures()
        .iter()
        .find(|p| p.qualified_name() == "fence_api.Inspect")
        .unwrap()
        .text()
        .replacen("SET NOCOUNT ON;", "SET NOCOUNT ON; -- (newer)", 1);
    shipped.with_procedure("fence_api.Inspect.sql", &inspect).unwrap()
}

#[tokio::test]
async fn a_redeployed_procedure_loses_security_definer_until_the_script_runs_again() {
    const TEST: &str = "a_redeployed_procedure_loses_security_definer_until_the_script_runs_again";
    let Some(mut db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    if !db.is_babelfish().await {
        support::skip(TEST, "the engine is not Babelfish (SQL Server chains ownership)");
        db.drop().await;
        return;
    }
    let Some(postgres) = postgres_or_skip(TEST) else {
        db.drop().await;
        return;
    };
    let definer = async |db: &TestDatabase| read_security_definer(&mut *db.session().await).await.unwrap();
    let gap = |names: &[&str]| SecurityDefiner::Babelfish {
        not_security_definer: names.iter().map(|n| n.to_string()).collect(),
    };
    let after_migrate = SecurityDefiner::Babelfish {
        not_security_definer: all_fence_procedures(),
    };
    assert_eq!(definer(&db).await, after_migrate);
    // Deployed and current, yet services cannot run the fence: status says so.
    let (code, text) = status(&db);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("everything is current")
            && text.contains(&format!(
                "{} fence procedure(s) are not SECURITY DEFINER",
                all_fence_procedures().len()
            )),
        "{text}"
    );

    run_security_definer_script(&postgres, &db.name);
    assert_eq!(definer(&db).await, gap(&[]));
    let (code, text) = status(&db);
    assert_eq!(code, Some(0), "{text}");
    // Running as their owner stands in for chaining: FP009 checks owners.
    assert_eq!(fp009(&db).0, "passed");
    let service = Client::connect(&db.login_in_role(Some("fence_service")).await)
        .await
        .unwrap();
    let key = format!("report:{}", uuid::Uuid::new_v4());
    assert_eq!(service.provision(&key).await.unwrap(), Provision::Created);
    service.inspect(&key).await.expect("Inspect runs as its owner");

    db.migrate(&inspect_changed()).await.unwrap();
    assert_eq!(definer(&db).await, gap(&["fence_api.inspect"]));
    // (status also reports Inspect as changed: this binary ships the old text.)
    let (_, text) = status(&db);
    assert!(
        text.contains("1 fence procedure(s) are not SECURITY DEFINER") && text.contains("  fence_api.inspect\n"),
        "{text}"
    );
    let (outcome, reason) = fp009(&db);
    assert_eq!(outcome, "cannot_verify");
    assert!(
        reason
            .to_lowercase()
            .contains("fence_api.inspect is not security definer"),
        "{reason}"
    );
    let refused = service
        .inspect(&key)
        .await
        .expect_err("Inspect runs with the caller's rights again");
    assert!(refused.to_string().contains("permission denied"), "{refused}");

    run_security_definer_script(&postgres, &db.name);
    assert_eq!(definer(&db).await, gap(&[]));
    service.inspect(&key).await.expect("Inspect runs as its owner again");
    let (_, text) = status(&db);
    assert!(text.contains("every fence procedure is SECURITY DEFINER"), "{text}");
    drop(service);
    db.drop().await;
}

/// Runs `sql` with psql in the PostgreSQL namespace of the T-SQL schema
/// `schema` of `database`: `{ns}` in `sql` is that namespace, quoted.
fn psql_in(postgres: &str, database: &str, schema: &str, sql: &str) -> String {
    let namespace = support::babelfish_postgres::psql(
        postgres,
        &format!(
            "SELECT s.nspname FROM sys.babelfish_namespace_ext s \
             JOIN sys.babelfish_sysdatabases d ON d.dbid = s.dbid \
             WHERE d.name = '{}' AND s.orig_name::text = '{schema}';",
            database.replace('\'', "''")
        ),
    );
    let namespace = namespace.trim();
    assert!(!namespace.is_empty(), "no namespace for {schema} in {database}");
    support::babelfish_postgres::psql(postgres, &sql.replace("{ns}", &format!("\"{namespace}\"")))
}

/// psql's refusal of the script on `db`: the panic message of the run.
fn refusal(postgres: &str, db: &TestDatabase) -> String {
    let name = db.name.as_str();
    let refused = std::panic::catch_unwind(|| run_security_definer_script(postgres, name)).expect_err("the script ran");
    refused.downcast_ref::<String>().cloned().unwrap_or_default()
}

#[tokio::test]
async fn the_script_refuses_a_procedure_of_another_owner_or_open_to_every_role_and_changes_nothing() {
    const TEST: &str = "the_script_refuses_a_procedure_of_another_owner_or_open_to_every_role_and_changes_nothing";
    let Some(db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    if !db.is_babelfish().await {
        support::skip(TEST, "the engine is not Babelfish (SQL Server chains ownership)");
        db.drop().await;
        return;
    }
    let Some(postgres) = postgres_or_skip(TEST) else {
        db.drop().await;
        return;
    };
    let shipped = all_fence_procedures();
    // fence_api.Inspect sorts after procedures the script would alter first:
    // changing nothing means those are put back too.
    assert_eq!(procedures_not_security_definer(&postgres, &db.name), shipped);

    // Owned by a role other than the fence tables' owner: as SECURITY DEFINER
    // it would run with that role's rights.
    let owner = psql_in(
        &postgres,
        &db.name,
        "fence_api",
        "SELECT pg_get_userbyid(proowner) FROM pg_proc WHERE pronamespace = '{ns}'::regnamespace AND proname = 'inspect';",
    );
    let owner = owner.trim().to_owned();
    psql_in(
        &postgres,
        &db.name,
        "fence_api",
        "ALTER PROCEDURE {ns}.inspect OWNER TO CURRENT_USER;",
    );
    let message = refusal(&postgres, &db);
    assert!(
        message.contains(".inspect(")
            && message.contains(&format!("not by the fence tables' owner {owner}: re-own it first")),
        "{message}"
    );
    assert_eq!(
        procedures_not_security_definer(&postgres, &db.name),
        shipped,
        "the refused script changed procedures: {message}"
    );
    psql_in(
        &postgres,
        &db.name,
        "fence_api",
        &format!("ALTER PROCEDURE {{ns}}.inspect OWNER TO \"{owner}\";"),
    );

    // Executable by every role: as SECURITY DEFINER it would open the fence
    // to anyone.
    psql_in(
        &postgres,
        &db.name,
        "fence_api",
        "GRANT EXECUTE ON PROCEDURE {ns}.inspect TO PUBLIC;",
    );
    let message = refusal(&postgres, &db);
    assert!(
        message.contains("every role may execute")
            && message.contains(".inspect(")
            && message.contains("revoke EXECUTE from public first"),
        "{message}"
    );
    assert_eq!(
        procedures_not_security_definer(&postgres, &db.name),
        shipped,
        "the refused script changed procedures: {message}"
    );

    // Put right, the same script goes through.
    psql_in(
        &postgres,
        &db.name,
        "fence_api",
        "REVOKE EXECUTE ON PROCEDURE {ns}.inspect FROM PUBLIC;",
    );
    let done = run_security_definer_script(&postgres, &db.name);
    assert!(
        done.contains(&format!(
            "{} procedure(s) made SECURITY DEFINER, 0 already were",
            shipped.len()
        )),
        "{done}"
    );
    db.drop().await;
}
