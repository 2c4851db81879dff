//! Live test: a migration whose ALTER waits behind a caller's open
//! transaction on a fence row fails the deploy after `--migration-lock-timeout`
//! instead of waiting for that transaction (and, on SQL Server, queueing
//! every fence call behind its Sch-M request).

use crate::support;

use std::time::{Duration, Instant};

use support::deploy::{history, shipped, shipped_versions_and, write_sources};
use support::{TestDatabase, exec};

#[tokio::test]
async fn a_migration_behind_a_callers_open_transaction_fails_fast_and_keeps_nothing() {
    let test = "a_migration_behind_a_callers_open_transaction_fails_fast_and_keeps_nothing";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    db.exec("EXEC fence_api.Provision @ResourceKey = N'report:daily';")
        .await;
    // A service inside its own transaction, holding the fence row.
    let mut caller = db.connect().await;
    exec(
        &mut caller,
        "BEGIN TRANSACTION;
         EXEC fence_api.Acquire @ResourceKey = N'report:daily', @Owner = 'a4c0f00d-0000-4000-8000-000000000001',
                                @LeaseSeconds = 60;",
    )
    .await;

    let sources = shipped()
        .with_migration(
            "V102__probe_column.sql",
            "ALTER TABLE fence.Resource ADD ProbeColumn int NULL;\n",
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_sources(dir.path(), &sources);
    let started = Instant::now();
    let run = support::binary::tokio(support::binary::fencepost_on(
        &db.ado(),
        [
            "migrate",
            "--migration-lock-timeout",
            "1",
            "--source-dir",
            dir.path().to_str().unwrap(),
        ],
    ))
    .output();
    let output = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the deploy still waited for the caller's transaction after 30 s")
        .expect("run fencepost");
    let waited = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(waited < Duration::from_secs(20), "took {waited:?}: {stderr}");
    assert!(
        stderr.contains("migrations/V102__probe_column.sql, batch 1")
            && stderr.contains("waited more than 1 s for a lock")
            && stderr.contains("--migration-lock-timeout"),
        "{stderr}"
    );

    // The caller's transaction is untouched and commits.
    exec(&mut caller, "COMMIT TRANSACTION;").await;
    assert_eq!(history(&db).await, shipped_versions_and(&[]));
    let column = db
        .query("SELECT CASE WHEN COL_LENGTH(N'fence.Resource', N'ProbeColumn') IS NULL THEN 0 ELSE 1 END;")
        .await;
    assert_eq!(column[0].get::<i32, usize>(0), Some(0), "the ALTER was kept");
    drop(caller);
    db.drop().await;
}
