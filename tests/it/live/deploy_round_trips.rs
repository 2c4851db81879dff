//! Live tests of what a redeploy costs on the wire, and of the one request
//! that carries every permission script and the release of the deploy lock.

use crate::support;

use fencepost::ConnectionString;
use fencepost::deploy::{self, DeployError, MigrateOptions, Sources};
use support::TestDatabase;
use support::deploy::write_sources;
use support::proxy::Proxy;

/// The most round trips a deploy with nothing to do may take, the two sent
/// while connecting included: lock and state in one request, permissions
/// and release in another.
const NO_CHANGE_REDEPLOY_MAX: u64 = 5;

fn shipped() -> Sources {
    Sources::embedded().expect("embedded sources")
}

/// A no-change deploy of `sources` on a session through `proxy`: its report,
/// the round trips on the wire (connecting included), and the requests among
/// them, which is what a round trip costs whatever the runner counts.
async fn redeploy_through(proxy: &Proxy, db: &TestDatabase, sources: &Sources) -> (deploy::MigrateReport, u64, u64) {
    let (messages, requests) = (proxy.messages(), proxy.requests());
    let mut conn = ConnectionString::parse(&proxy.ado(&db.ado()))
        .unwrap()
        .connect()
        .await
        .expect("connect through the proxy");
    let report = deploy::migrate(&mut conn, sources, &MigrateOptions::default(), &mut |_| {})
        .await
        .expect("the redeploy");
    drop(conn);
    (report, proxy.messages() - messages, proxy.requests() - requests)
}

/// The shipped sources and two hundred more procedures, created and
/// journaled in `db` as the runner would, so that they are current: every
/// one is a row the state query reads, and none is a change.
async fn two_hundred_more_procedures(db: &TestDatabase) -> Sources {
    let mut more = shipped();
    let mut create = String::new();
    for i in 0..200 {
        let text = format!("CREATE PROCEDURE fence_api.Extra{i} AS SELECT {i};");
        more = more.with_procedure(&format!("fence_api.Extra{i}.sql"), &text).unwrap();
        create += &format!("EXEC (N'{text}');\n");
        if i % 25 == 24 {
            db.exec(&std::mem::take(&mut create)).await;
        }
    }
    let extras: Vec<_> = more
        .procedures()
        .iter()
        .filter(|p| p.qualified_name().contains(".Extra"))
        .collect();
    // In batches of 25: a single batch of 200 can outlast the driver's 30 s
    // command timeout on a busy engine.
    for chunk in extras.chunks(25) {
        let mut journal = String::new();
        for p in chunk {
            let name = p.qualified_name();
            journal += &format!(
                "INSERT INTO fence.DeployedProcedure (ProcedureName, SourceChecksum, DefinitionHash, DeployedAtUtc)
                 VALUES (N'{name}', '{}', HASHBYTES('SHA2_256', OBJECT_DEFINITION(OBJECT_ID(N'{name}'))), SYSUTCDATETIME());\n",
                p.checksum()
            );
        }
        db.exec(&journal).await;
    }
    more
}

#[tokio::test]
async fn a_no_change_redeploy_takes_at_most_five_round_trips_however_many_objects_exist_and_repairs_a_revoked_grant() {
    let test =
        "a_no_change_redeploy_takes_at_most_five_round_trips_however_many_objects_exist_and_repairs_a_revoked_grant";
    let Some(mut db) = TestDatabase::deployed(test).await else {
        return;
    };
    let reader = db.login_in_role(Some("fence_reader")).await;
    // A grant lost by hand: the permission scripts run on every deploy to put
    // it back, even when nothing else changes.
    db.exec("REVOKE EXECUTE ON fence_api.Inspect FROM fence_reader;").await;
    let revoked = support::has_execute(&reader, "fence_api.Inspect").await;

    let proxy = Proxy::start(db.connection_string().server()).await;
    let (small, on_the_wire, small_requests) = redeploy_through(&proxy, &db, &shipped()).await;
    assert!(small.changes.is_empty(), "{:?}", small.changes);
    assert_eq!(small.permissions_applied.len(), shipped().permissions().len());
    assert!(
        on_the_wire <= NO_CHANGE_REDEPLOY_MAX,
        "a no-change redeploy took {on_the_wire} round trips on the wire, connection included \
         ({small_requests} of them deploy requests); at most {NO_CHANGE_REDEPLOY_MAX} expected"
    );
    assert_eq!(
        small.round_trips as u64, small_requests,
        "the runner's own count disagrees with the wire"
    );
    match (revoked, support::has_execute(&reader, "fence_api.Inspect").await) {
        (Some(false), restored) => assert_eq!(restored, Some(true), "the redeploy did not restore the grant"),
        (Some(true), _) => panic!("the reader may still execute fence_api.Inspect after the REVOKE"),
        (None, _) => support::skip(
            &format!("{test} (grant repair)"),
            "HAS_PERMS_BY_NAME gave no answer for the reader's EXECUTE on fence_api.Inspect",
        ),
    }

    // The same redeploy with two hundred more procedures costs the same.
    let more = two_hundred_more_procedures(&db).await;
    let started = std::time::Instant::now();
    let (large, large_on_the_wire, large_requests) = redeploy_through(&proxy, &db, &more).await;
    let elapsed = started.elapsed();
    assert!(large.changes.is_empty(), "{:?}", large.changes);
    assert_eq!(large.plan.procedures.len(), shipped().procedures().len() + 200);
    assert_eq!(
        small_requests, large_requests,
        "requests on the wire grew with the object count"
    );
    assert_eq!(
        on_the_wire, large_on_the_wire,
        "round trips on the wire grew with the object count"
    );
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "{test}: {on_the_wire} round trips on the wire, {small_requests} of them deploy requests (the runner \
             counts {}), with {} and with {} procedures; {:.0} ms with the larger set\n",
            large.round_trips,
            shipped().procedures().len(),
            large.plan.procedures.len(),
            elapsed.as_secs_f64() * 1000.0
        )
        .as_bytes(),
    );
    db.drop().await;
}

/// The shipped sources with a permission script, between the shipped ones,
/// whose second batch fails, and one after it that would leave a trace.
fn failing_second_batch(failing: &str) -> Sources {
    shipped()
        .with_permission(
            "025_fails.sql",
            &format!("SELECT 1 AS First;\nGO\nSELECT 2 AS Second;\n{failing}\n"),
        )
        .unwrap()
        .with_permission("026_after.sql", "CREATE TABLE dbo.AfterTheFailure (Id int NOT NULL);\n")
        .unwrap()
}

/// Whether `OBJECT_ID` finds `object`.
async fn exists(db: &TestDatabase, object: &str) -> bool {
    let rows = db
        .query(&format!(
            "SELECT CASE WHEN OBJECT_ID(N'{object}') IS NULL THEN 0 ELSE 1 END;"
        ))
        .await;
    rows[0].get::<i32, usize>(0) == Some(1)
}

/// Fails unless the deploy lock is free: another deployment can start at once.
async fn assert_lock_released(db: &TestDatabase) {
    let mut other = db.connect().await;
    support::hold_deploy_lock(&mut other).await;
    support::release_deploy_lock(&mut other).await;
}

#[tokio::test]
async fn a_permission_script_failing_in_the_combined_request_is_named_and_the_deploy_exits_2() {
    let test = "a_permission_script_failing_in_the_combined_request_is_named_and_the_deploy_exits_2";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    write_sources(
        dir.path(),
        &failing_second_batch("THROW 50999, N'the second batch fails', 1;"),
    );
    let output = support::binary::tokio(support::binary::fencepost_on(
        &db.ado(),
        ["migrate", "--source-dir", dir.path().to_str().unwrap()],
    ))
    .output()
    .await
    .expect("run fencepost");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("permissions/025_fails.sql, batch 2 (line 4): error 50999: the second batch fails"),
        "{stderr}"
    );
    // The scripts before it ran in full, the one after it not at all.
    assert!(
        stderr.contains("committed and kept: permissions/010_roles.sql, permissions/020_fence_service.sql;")
            || stderr.contains("committed and kept: permissions/010_roles.sql, permissions/020_fence_service.sql:"),
        "{stderr}"
    );
    assert!(
        !exists(&db, "dbo.AfterTheFailure").await,
        "a script after the failure ran"
    );
    assert_lock_released(&db).await;
    db.drop().await;
}

#[tokio::test]
async fn a_permission_batch_that_ends_the_whole_request_is_still_named_and_the_lock_released() {
    let test = "a_permission_batch_that_ends_the_whole_request_is_still_named_and_the_lock_released";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };
    // Babelfish ends the whole request on this error, past any CATCH;
    // SQL Server lets the CATCH have it. Either way the batch is named.
    let sources = failing_second_batch("GRANT EXECUTE ON fence_api.NoSuchProcedure TO fence_service;");
    let error = db.migrate(&sources).await.expect_err("the deploy must fail");
    let DeployError::Incomplete { committed, cause } = &error else {
        panic!("expected the shipped scripts before it to count as applied, got {error:?}");
    };
    assert_eq!(
        committed.permissions_applied,
        ["010_roles.sql", "020_fence_service.sql"],
        "{committed:?}"
    );
    assert!(
        matches!(cause.as_ref(), DeployError::BatchFailed { file, batch: 2, .. } if file == "permissions/025_fails.sql"),
        "{cause:?}"
    );
    assert!(
        !exists(&db, "dbo.AfterTheFailure").await,
        "a script after the failure ran"
    );
    assert_lock_released(&db).await;
    db.migrate(&shipped()).await.expect("the next deploy runs");
    db.drop().await;
}
