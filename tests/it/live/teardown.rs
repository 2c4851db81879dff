//! The live tests' own teardown: a test that fails still drops its database
//! and its logins, so a run leaves no `fp_*` database behind.

use crate::support;

use support::{TestDatabase, connect_ado};

/// How many rows of `sql` (a `COUNT(*)`) the server sees.
async fn count(server: &str, sql: &str) -> i32 {
    let mut admin = connect_ado(server).await;
    let row = admin
        .simple_query(sql)
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .expect("one row");
    row.get::<i32, usize>(0).unwrap()
}

#[tokio::test]
async fn a_test_that_panics_still_drops_its_database_and_logins() {
    const TEST: &str = "a_test_that_panics_still_drops_its_database_and_logins";
    let Some(server) = support::server_or_skip(TEST) else {
        return;
    };
    let (made, what_was_made) = tokio::sync::oneshot::channel();
    // The failing test runs as a task of its own, so its panic ends it (and
    // unwinds its locals) without ending this one.
    let failing = tokio::spawn(async move {
        let mut db = TestDatabase::deployed(TEST).await.expect("the engine is configured");
        let service = db.login_in_role(Some("fence_service")).await;
        let login = service
            .split(';')
            .find_map(|kv| kv.strip_prefix("User ID="))
            .expect("the support module names the login")
            .to_string();
        // Sessions still open when the test fails, in the database and as
        // the login, that nothing will close: as a client's pool held by a
        // task that outlives the test would be.
        std::mem::forget(db.connect().await);
        std::mem::forget(support::connect_ado(&service).await);
        made.send((db.name.clone(), login)).unwrap();
        panic!("a failed assertion, before the test's own teardown");
    });
    let ended = failing.await.expect_err("the test task panics");
    assert!(ended.is_panic(), "{ended}");
    let (name, login) = what_was_made.await.expect("the task made a database and a login");

    assert_eq!(
        count(
            &server,
            &format!("SELECT COUNT(*) FROM sys.databases WHERE name = N'{name}';")
        )
        .await,
        0,
        "{name} was left behind"
    );
    assert_eq!(
        count(
            &server,
            &format!("SELECT COUNT(*) FROM sys.server_principals WHERE name = N'{login}';")
        )
        .await,
        0,
        "{login} was left behind"
    );
}

#[test]
fn only_names_of_the_test_shape_are_taken_for_a_tests_own() {
    assert_eq!(support::maker_of("fp_4242_0a1b2c_7", false), Some(4242));
    assert_eq!(support::maker_of("fp_login_4242_0a1b2c_7", true), Some(4242));
    assert_eq!(support::maker_of("fp_4242_x_0", false), Some(4242));
    // A database shared by one run's tests of a binary carries the runner's pid.
    assert_eq!(support::maker_of("fp_4242_shared_lease_semantics", false), Some(4242));
    for (name, login) in [
        ("fp_login_4242_0a1b2c_7", false),
        ("fp_4242_0a1b2c_7", true),
        ("fp_4242_0a1b2c", false),
        ("fp_4242_0a1b2c_7_guest", false),
        ("fp_4242_notes_7", false),
        ("fp_no_such_database", false),
        ("fp_-1_0a1b2c_7", false),
        ("app_4242_0a1b2c_7", false),
        ("fp_login_4242_0a1b2c_", true),
        ("fp_4242_shared_", false),
        ("fp_4242_shared_Lease", false),
        ("fp_4242_shared_lease", true),
        ("fp__shared_lease", false),
    ] {
        assert_eq!(support::maker_of(name, login), None, "{name}");
    }
}

#[test]
fn only_the_engines_exact_refusals_of_a_catalog_change_are_retried() {
    const BABELFISH: u32 = 33557097;
    for (code, message) in [
        (
            3702,
            "Cannot drop database \"fp_1_0a1b2c_0\" because it is currently in use.",
        ),
        (
            15434,
            "Could not drop login 'fp_login_1_0a1b2c_0' as the user is currently logged in.",
        ),
        (BABELFISH, "tuple concurrently updated"),
        (BABELFISH, "tuple concurrently deleted"),
        (
            BABELFISH,
            "Cannot drop database \"fp_1_0a1b2c_0\" because it is currently in use in another session",
        ),
        (
            BABELFISH,
            "Could not drop login 'fp_login_1_0a1b2c_0' as the user is currently logged in.",
        ),
        (BABELFISH, "role \"fp_1_0a1b2c_0_guest\" does not exist"),
        (BABELFISH, "role \"fp_login_1_0a1b2c_0\" does not exist"),
    ] {
        assert!(
            support::is_transient_catalog_conflict(code, message),
            "{code}: {message}"
        );
    }
    for (code, message) in [
        (BABELFISH, "role \"db_datawriter\" does not exist"),
        (BABELFISH, "role \"app_guest\" does not exist"),
        (BABELFISH, "relation \"fence.Resource\" does not exist"),
        (BABELFISH, "canceling statement due to lock timeout"),
        (BABELFISH, "database \"fp_1_0a1b2c_0\" already exists"),
        (
            BABELFISH,
            "Cannot drop database \"app\" because it is currently in use in another session",
        ),
        (BABELFISH, "tuple concurrently updated, and more"),
        (1222, "Lock request time out period exceeded."),
        (262, "CREATE DATABASE permission denied in database 'master'."),
    ] {
        assert!(
            !support::is_transient_catalog_conflict(code, message),
            "{code}: {message}"
        );
    }
}

/// A process id that no process has now: a child that has already exited.
fn a_gone_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().expect("run true");
    child.wait().expect("true exits");
    child.id()
}

#[tokio::test]
async fn a_killed_runs_databases_and_logins_are_swept_and_a_live_processs_are_not() {
    const TEST: &str = "a_killed_runs_databases_and_logins_are_swept_and_a_live_processs_are_not";
    let Some(server) = support::server_or_skip(TEST) else {
        return;
    };
    // This process's own sweep, done before the leftovers below exist: the
    // one this test runs is then the only one in this process.
    support::sweep_leftovers_once(&server);
    let gone = a_gone_pid();
    let mut running = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .expect("run sleep");
    let live = running.id();
    let leftover_db = format!("fp_{gone}_5eed00_0");
    let leftover_login = format!("fp_login_{gone}_5eed00_0");
    let live_db = format!("fp_{live}_5eed00_0");
    let odd_db = format!("fp_{gone}_notes");
    let mut admin = connect_ado(&server).await;
    for sql in [
        format!("CREATE DATABASE [{leftover_db}];"),
        format!("CREATE DATABASE [{live_db}];"),
        format!("CREATE DATABASE [{odd_db}];"),
        format!(
            "CREATE LOGIN [{leftover_login}] WITH PASSWORD = 'Pw#{}';",
            uuid::Uuid::new_v4().simple()
        ),
    ] {
        support::with_catalog_retry(&mut admin, &sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    // A session the killed run left open in its database.
    // (Another test process starting now may have swept it already.)
    let lingering =
        fencepost::ConnectionString::parse(&format!("{};Database={leftover_db}", server.trim_end_matches(';')))
            .unwrap()
            .connect()
            .await
            .ok();

    support::sweep_leftovers(&server).await;
    let exists = |kind: &'static str, name: String| {
        let server = server.clone();
        async move {
            let catalog = if kind == "login" {
                "sys.server_principals"
            } else {
                "sys.databases"
            };
            count(
                &server,
                &format!("SELECT COUNT(*) FROM {catalog} WHERE name = N'{name}';"),
            )
            .await
        }
    };
    let swept_db = exists("database", leftover_db.clone()).await;
    let swept_login = exists("login", leftover_login.clone()).await;
    let kept_live = exists("database", live_db.clone()).await;
    let kept_odd = exists("database", odd_db.clone()).await;
    drop(lingering);
    let _ = running.kill();
    let _ = running.wait();
    for name in [&live_db, &odd_db, &leftover_db] {
        let _ = support::with_catalog_retry(&mut admin, &format!("DROP DATABASE IF EXISTS [{name}];")).await;
    }
    let _ = support::with_catalog_retry(&mut admin, &format!("DROP LOGIN [{leftover_login}];")).await;

    assert_eq!(swept_db, 0, "{leftover_db}, of a process that is gone, was not swept");
    assert_eq!(
        swept_login, 0,
        "{leftover_login}, of a process that is gone, was not swept"
    );
    assert_eq!(kept_live, 1, "{live_db}, of a running process, was swept");
    assert_eq!(kept_odd, 1, "{odd_db}, not a test database's name, was swept");
}

/// Run by `.ci/run` once the whole suite has finished (ignored otherwise):
/// every test dropped what it made. A database shared by one run's tests
/// (`TestDatabase::shared`) outlives them by design and is dropped here; a
/// test database or login of its own that is still there was leaked by a
/// teardown that failed, and fails the run, as does a selftest's scratch
/// database (`--scratch-database`), which the selftest itself drops at the
/// end of its run. All are dropped, so the next run starts clean.
#[tokio::test]
#[ignore = "run by .ci/run after the whole suite"]
async fn after_the_suite_no_test_database_or_login_is_left() {
    let Some(server) = support::server_or_skip("after_the_suite_no_test_database_or_login_is_left") else {
        return;
    };
    let mut admin = support::connect_ado(&server).await;
    let (databases, logins) = support::leftovers(&mut admin).await;
    let scratch = support::selftest_scratch_databases(&mut admin).await;
    for name in &scratch {
        support::drop_database(&mut admin, name).await;
    }
    drop(admin);
    support::sweep_leftovers(&server).await;
    let leaked: Vec<&String> = databases
        .iter()
        .filter(|name| !name.contains("_shared_"))
        .chain(&logins)
        .chain(&scratch)
        .collect();
    assert!(leaked.is_empty(), "left behind by the suite: {leaked:?}");
}
