//! `verify_contract` on a live engine: silent on a deployed database for a
//! service login, naming what is missing or different otherwise, and
//! refusing to start with a login that can write the fence directly.

use crate::support;

use fencepost::client::Error;
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;

/// A client that may run as the deploy login, which is dbo.
async fn privileged(ado: &str) -> Client {
    let mut config = ClientConfig::new(ConnectionString::parse(ado).unwrap());
    config.allow_privileged_login(true);
    Client::connect_with(config).await.unwrap()
}

fn reasons(result: Result<(), Error>) -> Vec<String> {
    match result {
        Err(Error::PrivilegedLogin { reasons, .. }) => reasons,
        other => panic!("expected PrivilegedLogin, got {other:?}"),
    }
}

fn problems(result: Result<(), Error>) -> Vec<String> {
    match result {
        Err(Error::ContractMismatch { problems, .. }) => problems,
        other => panic!("expected ContractMismatch, got {other:?}"),
    }
}

#[tokio::test]
async fn verify_contract_refuses_to_start_as_dbo_unless_told_to() {
    let Some(db) = TestDatabase::deployed("verify_contract_refuses_to_start_as_dbo_unless_told_to").await else {
        return;
    };
    // The deploy login created the database: it enters as dbo.
    let client = Client::connect(&db.ado()).await.unwrap();
    let error = client.verify_contract().await.expect_err("dbo is refused");
    assert!(error.to_string().contains("allow_privileged_login"), "{error}");
    let found = reasons(Err(error));
    assert!(
        found.iter().any(|r| r.contains("enters the database as dbo")),
        "{found:?}"
    );
    drop(client);
    // Told to, the same login finds the deployed contract whole.
    let client = privileged(&db.ado()).await;
    client.verify_contract().await.unwrap();
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn verify_contract_refuses_a_login_that_may_update_the_fence_table() {
    let test = "verify_contract_refuses_a_login_that_may_update_the_fence_table";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let service = db.login_in_role(Some("fence_service")).await;
    let client = Client::connect(&service).await.unwrap();
    client
        .verify_contract()
        .await
        .expect("a service login holds the contract and no more");
    let user = service
        .split(';')
        .find_map(|kv| kv.strip_prefix("User ID="))
        .expect("the support module names the user");
    db.exec(&format!("GRANT UPDATE ON fence.Resource TO [{user}];")).await;
    let found = reasons(client.verify_contract().await);
    assert_eq!(found, ["it holds UPDATE on fence.Resource (HAS_PERMS_BY_NAME)"]);
    drop(client);
    db.drop().await;
}

/// Beyond UPDATE on the fence row: rows of the other fence tables, and a
/// fence schema whose procedures the login could redefine, are each named.
#[tokio::test]
async fn verify_contract_refuses_a_login_that_may_write_another_fence_table_or_alter_a_fence_schema() {
    let test = "verify_contract_refuses_a_login_that_may_write_another_fence_table_or_alter_a_fence_schema";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let service = db.login_in_role(Some("fence_service")).await;
    let client = Client::connect(&service).await.unwrap();
    client
        .verify_contract()
        .await
        .expect("a service login holds the contract and no more");
    let user = service
        .split(';')
        .find_map(|kv| kv.strip_prefix("User ID="))
        .expect("the support module names the user");
    db.exec(&format!("GRANT INSERT ON fence.PublishedOperation TO [{user}];"))
        .await;
    let found = reasons(client.verify_contract().await);
    assert_eq!(
        found,
        ["it holds INSERT on fence.PublishedOperation (HAS_PERMS_BY_NAME)"]
    );
    db.exec(&format!("REVOKE INSERT ON fence.PublishedOperation FROM [{user}];"))
        .await;

    let granted = db
        .connect()
        .await
        .simple_query(format!("GRANT ALTER ON SCHEMA::fence_api TO [{user}];"))
        .await
        .map(drop);
    match granted {
        Ok(()) => {
            let found = reasons(client.verify_contract().await);
            assert_eq!(found, ["it holds ALTER on schema fence_api (HAS_PERMS_BY_NAME)"]);
        }
        // Babelfish 4.2 has no ALTER permission on a schema to grant.
        Err(e)
            if e.code() == Some(33557097)
                && e.to_string()
                    .contains("'GRANT PERMISSION ALTER' is not currently supported in Babelfish") =>
        {
            support::skip(test, &format!("the engine cannot grant ALTER on a schema: {e}"));
        }
        Err(e) => panic!("GRANT ALTER ON SCHEMA failed: {e}"),
    }
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn an_empty_database_is_reported_procedure_by_procedure() {
    let Some(db) = TestDatabase::new("an_empty_database_is_reported_procedure_by_procedure").await else {
        return;
    };
    let client = privileged(&db.ado()).await;
    let found = problems(client.verify_contract().await);
    // One problem per shipped fence_api procedure, each named.
    let shipped: Vec<String> = fencepost::deploy::Sources::embedded()
        .unwrap()
        .procedures()
        .iter()
        .map(|p| p.qualified_name())
        .filter(|name| name.starts_with("fence_api."))
        .collect();
    assert_eq!(found.len(), shipped.len(), "{found:?}");
    for name in &shipped {
        assert!(found.contains(&format!("{name} is missing")), "{name}: {found:?}");
    }
    assert!(found.contains(&"fence_api.Publish is missing".to_string()), "{found:?}");
    // Close the pools first: open sessions keep the database in use.
    drop(client);
    db.drop().await;
}

#[tokio::test]
async fn a_dropped_or_changed_procedure_is_named() {
    let Some(db) = TestDatabase::deployed("a_dropped_or_changed_procedure_is_named").await else {
        return;
    };
    db.exec("DROP PROCEDURE fence_api.GetOutcome;").await;
    db.exec(
        "ALTER PROCEDURE fence_api.Release @ResourceKey nvarchar(256), @Owner uniqueidentifier, @Generation int \
         AS SELECT CAST(N'NotHolder' AS nvarchar(32)) AS Outcome;",
    )
    .await;
    let client = privileged(&db.ado()).await;
    let error = client
        .verify_contract()
        .await
        .expect_err("a changed contract is an error");
    let message = error.to_string();
    let expected = [
        "fence_api.Release declares @ResourceKey as nvarchar(256), expected nvarchar wider than 256 characters",
        "fence_api.Release declares @Generation as int, expected bigint",
        "fence_api.GetOutcome is missing",
    ];
    assert_eq!(problems(Err(error)), expected);
    // What a service logs: the message verify_contract returned names every problem.
    let version = format!("contract {}", fencepost::client::CONTRACT_VERSION);
    for part in expected.iter().copied().chain([version.as_str()]) {
        assert!(message.contains(part), "{part:?} is not in {message}");
    }
    // Close the pools first: open sessions keep the database in use.
    drop(client);
    db.drop().await;
}

/// The shipped text of `procedure` as an `ALTER`, with `edit` applied.
fn altered(procedure: &str, edit: impl Fn(String) -> String) -> String {
    let sources = fencepost::deploy::Sources::embedded().unwrap();
    let shipped = sources
        .procedures()
        .iter()
        .find(|p| p.qualified_name() == procedure)
        .expect("a shipped procedure")
        .text()
        .to_string();
    let create = format!("CREATE PROCEDURE {procedure}");
    assert!(shipped.contains(&create), "{procedure}: {create} not found");
    edit(shipped.replacen(&create, &format!("ALTER PROCEDURE {procedure}"), 1))
}

/// `fence_api.ContractVersion` altered to answer `major.minor`.
fn answering(major: u32, minor: u32) -> String {
    format!(
        "ALTER PROCEDURE fence_api.ContractVersion AS \
         SELECT CAST(N'Version' AS nvarchar(32)) AS Outcome, CAST({major} AS int) AS Major, CAST({minor} AS int) AS Minor;"
    )
}

#[tokio::test]
async fn the_deployed_contract_version_is_the_one_this_client_speaks() {
    let test = "the_deployed_contract_version_is_the_one_this_client_speaks";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let rows = db.query("EXEC fence_api.ContractVersion;").await;
    let version = fencepost::client::CONTRACT_VERSION;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<&str, _>("Outcome"), Some("Version"));
    assert_eq!(rows[0].get::<i32, _>("Major"), Some(version.major as i32));
    assert_eq!(rows[0].get::<i32, _>("Minor"), Some(version.minor as i32));
    // A service login and a reader may both ask.
    let service = db.login_in_role(Some("fence_service")).await;
    Client::connect(&service)
        .await
        .unwrap()
        .verify_contract()
        .await
        .unwrap();
    let reader = db.login_in_role(Some("fence_reader")).await;
    let mut reader = support::connect_ado(&reader).await;
    let answered = reader
        .simple_query("EXEC fence_api.ContractVersion;")
        .await
        .unwrap()
        .into_first_result()
        .await
        .unwrap();
    assert_eq!(answered.len(), 1);
    drop(reader);
    db.drop().await;
}

#[tokio::test]
async fn an_older_minor_or_another_major_is_refused_naming_both_versions() {
    let test = "an_older_minor_or_another_major_is_refused_naming_both_versions";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let needed = fencepost::client::CONTRACT_VERSION;
    let client = privileged(&db.ado()).await;
    let mut refused = vec![(needed.major + 1, needed.minor)];
    if needed.minor > 0 {
        refused.push((needed.major, needed.minor - 1));
    }
    for (major, minor) in refused {
        db.exec(&answering(major, minor)).await;
        let error = client.verify_contract().await.expect_err("an incompatible version");
        let message = error.to_string();
        assert_eq!(problems(Err(error)).len(), 1, "only the version differs: {message}");
        for part in [format!("v{major}.{minor}"), needed.to_string()] {
            assert!(message.contains(&part), "{part} is not in {message}");
        }
    }
    // A newer minor is compatible.
    db.exec(&answering(needed.major, needed.minor + 1)).await;
    client.verify_contract().await.unwrap();
    drop(client);
    db.drop().await;
}

/// Collects what the client logs while the test runs.
#[derive(Clone, Default)]
struct Logged(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logged {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn an_appended_optional_parameter_passes_with_a_warning_and_a_required_one_is_refused() {
    let test = "an_appended_optional_parameter_passes_with_a_warning_and_a_required_one_is_refused";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let logged = Logged::default();
    let writer = logged.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let with_parameter = |procedure: &'static str, declaration: &'static str| {
        altered(procedure, move |text| {
            text.replacen(
                "@ResourceKey nvarchar(4000)",
                &format!("@ResourceKey nvarchar(4000), {declaration}"),
                1,
            )
        })
    };
    db.exec(&with_parameter("fence_api.Inspect", "@Detail int = 0")).await;
    let client = privileged(&db.ado()).await;
    client.verify_contract().await.unwrap();
    let log = String::from_utf8(logged.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("WARN"), "{log}");
    assert!(
        log.to_lowercase()
            .contains("fence_api.inspect has an optional parameter @detail"),
        "{log}"
    );

    // Another procedure: Babelfish cannot ALTER a parameter's default away.
    db.exec(&with_parameter("fence_api.ReadPublication", "@Detail int"))
        .await;
    let found = problems(client.verify_contract().await);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0]
            .to_lowercase()
            .contains("readpublication has a parameter @detail without a default"),
        "{found:?}"
    );
    drop(client);
    db.drop().await;
}
