//! The deploy lock's error, from the library and from the binary: how long
//! this deploy waited, and who holds the lock where the engine can show it.

mod deploy_support;
mod support;

use std::time::Duration;

use deploy_support::shipped;
use fencepost::deploy::{DeployError, MigrateOptions};
use support::TestDatabase;

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
    let options = MigrateOptions {
        lock_timeout: Duration::from_secs(1),
        ..MigrateOptions::default()
    };
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
    let babelfish = db
        .query("SELECT CASE WHEN @@VERSION LIKE N'%Babelfish%' THEN 1 ELSE 0 END;")
        .await[0]
        .get::<i32, usize>(0)
        == Some(1);
    if babelfish {
        assert_eq!(holder, &None, "Babelfish showed a holder: {error}");
        assert!(
            error.to_string().contains("this engine cannot show which session"),
            "{error}"
        );
        support::skip(
            &format!("{test} (holder)"),
            "Babelfish has no sys.dm_tran_locks, so the holder of an application lock cannot be named",
        );
    } else {
        let holder = holder.as_ref().expect("SQL Server shows the holder");
        assert_eq!(holder.session_id, spid, "{error}");
        assert!(error.to_string().contains(&format!("session {spid}")), "{error}");
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
    drop(holder);
    db.drop().await;
}
