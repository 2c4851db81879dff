//! The live tests' own teardown: a test that fails still drops its database
//! and its logins, so a run leaves no `fp_*` database behind.

mod support;

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
