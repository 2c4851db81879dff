//! The deploy lock's error, from the library and from the binary: how long
//! this deploy waited, and who holds the lock where the engine can show it.

use crate::support;

use std::time::Duration;

use fencepost::deploy::{DeployError, MigrateOptions};
use support::TestDatabase;
use support::deploy::shipped;

/// The view that names lock holders, asked for nothing but whether it exists.
const LOCKS_VIEW: &str = "SELECT TOP (0) request_session_id FROM sys.dm_tran_locks;";

/// Babelfish's refusal of [`LOCKS_VIEW`]: it has no sys.dm_tran_locks.
const NO_LOCKS_VIEW: (u32, &str) = (33557097, "relation \"sys.dm_tran_locks\" does not exist");

/// Deploys while another session holds the deploy lock; returns the error
/// and the holder's session id.
async fn deploy_behind_a_held_lock(db: &TestDatabase) -> (DeployError, i32) {
    let mut holder = db.connect().await;
    support::hold_deploy_lock(&mut holder).await;
    let spid = holder
        .simple_query("SELECT CAST(@@SPID AS int);")
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap()
        .get::<i32, usize>(0)
        .unwrap();
    let mut options = MigrateOptions::default();
    options.lock_timeout(Duration::from_secs(1));
    let error = fencepost::deploy::migrate(&mut db.connect().await, &shipped(), &options, &mut |_| {})
        .await
        .expect_err("the lock is held");
    drop(holder);
    (error, spid)
}

#[tokio::test]
async fn a_deploy_that_times_out_on_the_lock_says_how_long_it_waited_and_who_holds_it() {
    let test = "a_deploy_that_times_out_on_the_lock_says_how_long_it_waited_and_who_holds_it";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let (error, spid) = deploy_behind_a_held_lock(&db).await;
    let DeployError::LockTimeout { waited, holder, .. } = &error else {
        panic!("expected a lock timeout, got {error:?}");
    };
    assert!(*waited >= Duration::from_millis(900), "{waited:?}");
    assert!(error.to_string().contains("this deploy waited 1."), "{error}");
    // Whether the engine can show lock holders at all: SQL Server's
    // sys.dm_tran_locks, which the runner reads to name the holder.
    let mut conn = db.connect().await;
    let can_show = match conn.simple_query(LOCKS_VIEW).await {
        Ok(stream) => stream.into_results().await.map(drop),
        Err(e) => Err(e),
    };
    drop(conn);
    match can_show {
        Ok(()) => {
            let holder = holder.as_ref().expect("the engine shows lock holders, and named none");
            assert_eq!(holder.session_id, spid, "{error}");
            assert!(error.to_string().contains(&format!("session {spid}")), "{error}");
        }
        Err(tiberius::error::Error::Server(refused)) if (refused.code(), refused.message()) == NO_LOCKS_VIEW => {
            assert_eq!(holder, &None, "the engine showed a holder: {error}");
            assert!(
                error.to_string().contains("this engine cannot show which session"),
                "{error}"
            );
            support::skip(
                &format!("{test} (holder)"),
                &format!(
                    "reading sys.dm_tran_locks is refused with {}: {}, so the holder of an application lock \
                     cannot be named",
                    refused.code(),
                    refused.message()
                ),
            );
        }
        Err(other) => panic!("{LOCKS_VIEW}: {other}"),
    }

    // The binary says the same, on one line, and exits 2.
    let mut holder = db.connect().await;
    support::hold_deploy_lock(&mut holder).await;
    let output = support::binary::tokio(support::binary::fencepost_on(
        &db.ado(),
        ["migrate", "--lock-timeout", "1"],
    ))
    .output()
    .await
    .expect("run fencepost");
    let err = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("deploy lock on this database") && err.contains("this deploy waited"),
        "{err}"
    );
    let output = support::binary::tokio(support::binary::fencepost_on(
        &db.ado(),
        ["migrate", "--lock-timeout", "1", "--format", "json"],
    ))
    .output()
    .await
    .expect("run fencepost");
    assert_eq!(output.status.code(), Some(2));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("a JSON document");
    assert_eq!(document["error"]["kind"], "lock_timeout", "{document}");
    drop(holder);
    db.drop().await;
}

#[tokio::test]
async fn deploys_that_time_out_on_the_lock_again_and_again_on_one_connection_leave_the_engine_up() {
    let test = "deploys_that_time_out_on_the_lock_again_and_again_on_one_connection_leave_the_engine_up";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let mut holder = db.connect().await;
    support::hold_deploy_lock(&mut holder).await;
    let mut options = MigrateOptions::default();
    options.lock_timeout(Duration::from_millis(200));
    // Babelfish 4.2 ended the whole server at a session's fifth refused
    // application lock request.
    let mut conn = db.connect().await;
    for attempt in 1..=6 {
        let error = fencepost::deploy::migrate(&mut conn, &shipped(), &options, &mut |_| {})
            .await
            .expect_err("the lock is held");
        assert!(
            matches!(error, DeployError::LockTimeout { .. }),
            "attempt {attempt}: {error:?}"
        );
    }
    // Both connections were opened before the refusals: a server that ended
    // and restarted would have closed them.
    for conn in [&mut conn, &mut holder] {
        let row = conn
            .simple_query("SELECT 1;")
            .await
            .expect("a connection opened before the refusals still answers")
            .into_row()
            .await
            .expect("a connection opened before the refusals still answers");
        assert_eq!(row.and_then(|row| row.get::<i32, usize>(0)), Some(1));
    }
    drop((conn, holder));
    db.drop().await;
}
