//! Least privilege: a login that is only a member of `fence_service` leases
//! and publishes through the client, and cannot touch the fence tables
//! directly. On Babelfish, which does not chain ownership, the PostgreSQL-side
//! script (`fencepost script --target babelfish-postgres`) runs first, as the
//! README asks after every deploy.

use crate::support;

use fencepost::Client;
use fencepost::client::{FencedOutcome, FencedTx, OperationOutcome, Provision, Publication, Publish, Release, Renew};
use support::babelfish_postgres::{postgres_or_skip, run_security_definer_script};
use support::lease::{SHORT, acquired, state};
use support::{TestDatabase, connect_ado};
use uuid::Uuid;

/// Whether a procedure may read a table its owner owns when the caller holds
/// only EXECUTE on the procedure (ownership chaining). Probed with objects of
/// its own, so the answer does not depend on the fence's.
async fn ownership_chaining(db: &TestDatabase, service_ado: &str) -> Result<(), tiberius::error::Error> {
    db.exec("CREATE SCHEMA chain_probe AUTHORIZATION dbo;").await;
    db.exec("CREATE TABLE chain_probe.Item (Id int NOT NULL);").await;
    db.exec("CREATE PROCEDURE chain_probe.CountItems AS SELECT COUNT(*) AS Items FROM chain_probe.Item;")
        .await;
    db.exec("GRANT EXECUTE ON chain_probe.CountItems TO fence_service;")
        .await;
    let mut service = connect_ado(service_ado).await;
    match service.simple_query("EXEC chain_probe.CountItems;").await {
        Ok(stream) => stream.into_results().await.map(drop),
        Err(e) => Err(e),
    }
}

/// SQL Server's refusal: "The SELECT permission was denied on the object".
const PERMISSION_DENIED: u32 = 229;

/// Babelfish's refusals, as observed on 4.2: PostgreSQL's messages (a table,
/// or a procedure the caller may not execute), under the code Babelfish
/// gives errors that have no SQL Server number.
const BABELFISH_PERMISSION_DENIED: (u32, [&str; 2]) = (
    33557097,
    ["permission denied for table", "permission denied for procedure"],
);

fn is_babelfish_permission_denied(e: &tiberius::error::Error) -> bool {
    let (code, texts) = BABELFISH_PERMISSION_DENIED;
    e.code() == Some(code) && texts.iter().any(|text| e.to_string().contains(text))
}

/// Whether `e` is the engine refusing a permission: 229, or on Babelfish its
/// own form of that refusal. Any other error is not a refusal.
fn is_permission_denied(e: &tiberius::error::Error, babelfish: bool) -> bool {
    e.code() == Some(PERMISSION_DENIED) || (babelfish && is_babelfish_permission_denied(e))
}

#[tokio::test]
async fn a_service_login_runs_the_whole_cycle_through_the_client() {
    const TEST: &str = "a_service_login_runs_the_whole_cycle_through_the_client";
    let Some(mut db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    let service_ado = db.login_in_role(Some("fence_service")).await;
    if let Err(error) = ownership_chaining(&db, &service_ado).await {
        // Only Babelfish is known not to chain ownership; anywhere else, or
        // for any other error, the probe failing is a failure.
        assert!(
            db.is_babelfish().await && is_babelfish_permission_denied(&error),
            "EXECUTE alone could not run a procedure reading a table of the same owner: {error}"
        );
        let Some(postgres) = postgres_or_skip(TEST) else {
            db.drop().await;
            return;
        };
        run_security_definer_script(&postgres, &db.name);
    }
    let service = Client::connect(&service_ado).await.unwrap();
    service
        .verify_contract()
        .await
        .expect("the service login sees the contract");
    let key = format!("report:{}", Uuid::new_v4());
    assert_eq!(service.provision(&key).await.unwrap(), Provision::Created);
    let mut lease = acquired(service.acquire(&key, SHORT * 5).await.unwrap());
    assert!(matches!(
        service.renew(&mut lease).await.unwrap(),
        Renew::Renewed { .. }
    ));
    let operation = Uuid::new_v4();
    assert_eq!(
        service.publish(&lease, operation, "by the service").await.unwrap(),
        Publish::Published
    );
    assert!(matches!(
        service.outcome(operation).await.unwrap(),
        OperationOutcome::Published { .. }
    ));
    assert!(matches!(
        service.read_publication(&key).await.unwrap(),
        Publication::Found { .. }
    ));
    assert_eq!(
        service.publish(&lease, operation, "by the service").await.unwrap(),
        Publish::AlreadyPublished,
        "a replay of the same operation"
    );
    assert_eq!(state(&service, &key).await.0, lease.generation());
    let fenced = service
        .fenced_transaction_without_guard(&lease, async |tx: &mut FencedTx<'_>| {
            tx.query("SELECT 1 AS One;", &[]).await.map(|rows| rows.len())
        })
        .await
        .unwrap();
    assert!(matches!(fenced, FencedOutcome::Committed(1)), "{fenced:?}");
    assert_eq!(service.release(&lease).await.unwrap(), Release::Released);
    // Close the pools first: open sessions keep the database in use.
    drop(service);
    db.drop().await;
}

#[tokio::test]
async fn a_service_login_is_refused_direct_reads_and_writes_of_the_fence_tables_and_force_release() {
    const TEST: &str = "a_service_login_is_refused_direct_reads_and_writes_of_the_fence_tables_and_force_release";
    let Some(mut db) = TestDatabase::deployed(TEST).await else {
        return;
    };
    // A row to read, change or delete, made through the procedures.
    let admin = Client::connect(&db.ado()).await.unwrap();
    let key = format!("report:{}", Uuid::new_v4());
    admin.provision(&key).await.unwrap();
    let lease = acquired(admin.acquire(&key, SHORT * 10).await.unwrap());
    assert_eq!(
        admin.publish(&lease, Uuid::new_v4(), "kept").await.unwrap(),
        Publish::Published
    );
    let before = state(&admin, &key).await;

    let service_ado = db.login_in_role(Some("fence_service")).await;
    let mut service = connect_ado(&service_ado).await;
    let babelfish = db.is_babelfish().await;
    // After the script the procedures run as the tables' owner: the refusals
    // below must still hold for the service's own statements.
    if babelfish && let Ok(postgres) = std::env::var(support::babelfish_postgres::POSTGRES_ENV) {
        run_security_definer_script(&postgres, &db.name);
    }
    let force_release = format!("EXEC fence_admin.ForceRelease @ResourceKey = N'{key}';");
    let statements = [
        force_release.as_str(),
        "SELECT * FROM fence.Resource;",
        "INSERT INTO fence.Resource (ResourceKey, Generation, ProvisionedAtUtc) VALUES (N'intruder', 99, SYSUTCDATETIME());",
        "UPDATE fence.Resource SET Generation = Generation + 100, Payload = N'forged';",
        "DELETE FROM fence.Resource;",
        "SELECT * FROM fence.PublishedOperation;",
        "INSERT INTO fence.PublishedOperation (OperationId, ResourceKey, Generation, PublishedAtUtc) \
         VALUES (NEWID(), N'intruder', 1, SYSUTCDATETIME());",
        "UPDATE fence.PublishedOperation SET Generation = Generation + 100;",
        "DELETE FROM fence.PublishedOperation;",
    ];
    for sql in statements {
        let reply = match service.simple_query(sql).await {
            Ok(stream) => stream
                .into_results()
                .await
                .map(|sets| sets.iter().map(Vec::len).sum::<usize>()),
            Err(e) => Err(e),
        };
        match reply {
            Err(e) => assert!(
                is_permission_denied(&e, babelfish),
                "{sql}: refused, but not for want of permission: {e}"
            ),
            Ok(rows) => panic!("{sql}: allowed for a fence_service login ({rows} rows)"),
        }
    }

    assert_eq!(state(&admin, &key).await, before);
    assert!(
        matches!(admin.read_publication(&key).await.unwrap(), Publication::Found { payload, .. } if payload == "kept")
    );
    let intruders = db
        .query("SELECT COUNT(*) AS N FROM fence.Resource WHERE ResourceKey = N'intruder';")
        .await;
    assert_eq!(intruders[0].get::<i32, _>("N"), Some(0));
    // Close the pools first: open sessions keep the database in use.
    drop(admin);
    db.drop().await;
}
