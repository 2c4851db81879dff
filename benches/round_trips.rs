//! Round trips and time of the operations whose cost must not grow with the
//! database, each run side by side with a baseline on the same engine:
//!
//! - a no-change redeploy, on a fresh deployment and with 500 more shipped,
//!   current procedures in a fence schema (every one a row its state query
//!   reads and a definition it hashes);
//! - `fencepost check`'s catalog read, on a fresh deployment and with 2000
//!   more objects;
//! - a lease cycle (acquire, renew, publish, release) through
//!   `fencepost::Client`, against the same four procedure calls sent by hand.
//!
//! Round trips are counted on the wire by a loopback proxy (TDS request
//! messages), not by the code under test. Times are medians of several runs.
//!
//! ```text
//! FENCEPOST_TEST_MSSQL="Server=...;Encrypt=..." cargo bench --bench round_trips
//! ```

// The integration tests' support, of which the bench uses the database and
// the proxy only.
#[allow(dead_code)]
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::future::Future;
use std::time::{Duration, Instant};

use fencepost::client::{Acquire, Provision, Publish, Release, Renew};
use fencepost::deploy::{MigrateOptions, Sources};
use fencepost::{Client, ClientConfig, ConnectionString};
use support::TestDatabase;
use support::proxy::Proxy;
use uuid::Uuid;

const RUNS: usize = 7;

struct Row {
    scenario: String,
    round_trips: u64,
    median: Duration,
    baseline: Option<Duration>,
}

fn main() {
    // `cargo test --all-targets` runs this file too, without `--bench`:
    // measuring is for `cargo bench` only.
    // A test runner that lists tests first (`--list`) is told there are none.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    if !std::env::args().any(|a| a == "--bench") {
        println!("round_trips: a benchmark; run it with `cargo bench --bench round_trips`");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run());
}

async fn run() {
    let Some(db) = TestDatabase::deployed("round_trips").await else {
        return;
    };
    let proxy = Proxy::start(db.connection_string().server()).await;
    let ado = proxy.ado(&db.ado());
    let mut rows = Vec::new();

    let redeploy = |sources: Sources| {
        let ado = ado.clone();
        move || {
            let (ado, sources) = (ado.clone(), sources.clone());
            async move {
                let mut conn = ConnectionString::parse(&ado).unwrap().connect().await.unwrap();
                let report = fencepost::deploy::migrate(&mut conn, &sources, &MigrateOptions::default(), &mut |_| {})
                    .await
                    .unwrap();
                assert!(report.changes.is_empty());
            }
        }
    };
    let base = measure(&proxy, "no-change redeploy, 9 procedures", None, redeploy(shipped())).await;
    let baseline = Some(base.median);
    rows.push(base);
    let more = with_current_procedures(&db, 500).await;
    rows.push(measure(&proxy, "no-change redeploy, +500 procedures", baseline, redeploy(more)).await);

    let check = || async {
        let mut conn = ConnectionString::parse(&ado).unwrap().connect().await.unwrap();
        fencepost::audit::read_catalog(&mut conn).await.unwrap();
    };
    let audit_db = TestDatabase::deployed("round_trips").await.expect("a second database");
    let audit_ado = proxy.ado(&audit_db.ado());
    let check_clean = || async {
        let mut conn = ConnectionString::parse(&audit_ado).unwrap().connect().await.unwrap();
        fencepost::audit::read_catalog(&mut conn).await.unwrap();
    };
    let base = measure(&proxy, "check: catalog read, fresh deployment", None, check_clean).await;
    let baseline = Some(base.median);
    rows.push(base);
    for chunk in 0..20 {
        let tables: String = (0..50)
            .map(|i| format!("CREATE TABLE dbo.Bench{chunk}_{i} (Id int NOT NULL PRIMARY KEY);\n"))
            .collect();
        db.exec(&tables).await;
        for i in 0..50 {
            db.exec(&format!(
                "CREATE PROCEDURE dbo.BenchProc{chunk}_{i} AS SELECT Id FROM dbo.Bench{chunk}_{i};"
            ))
            .await;
        }
    }
    rows.push(
        measure(
            &proxy,
            "check: catalog read, +2000 objects (+500 procedures)",
            baseline,
            check,
        )
        .await,
    );

    let key = format!("bench:{}", Uuid::new_v4());
    let mut config = ClientConfig::new(ConnectionString::parse(&ado).unwrap());
    config.max_connections(1);
    let client = Client::connect_with(config).await.unwrap();
    assert!(matches!(client.provision(&key).await.unwrap(), Provision::Created));
    let mut raw = ConnectionString::parse(&ado).unwrap().connect().await.unwrap();
    // Warm both sessions: the first call of a procedure in a session compiles it.
    by_hand(&mut raw, &key).await;
    through_client(&client, &key).await;
    let raw = std::sync::Arc::new(tokio::sync::Mutex::new(raw));
    let base = measure(&proxy, "lease cycle, four EXECs by hand", None, || {
        let raw = raw.clone();
        let key = key.clone();
        async move { by_hand(&mut *raw.lock().await, &key).await }
    })
    .await;
    let baseline = Some(base.median);
    rows.push(base);
    rows.push(
        measure(&proxy, "lease cycle, fencepost::Client", baseline, || {
            through_client(&client, &key)
        })
        .await,
    );

    print_table(&rows);
    drop((client, raw));
    db.drop().await;
    audit_db.drop().await;
}

fn shipped() -> Sources {
    Sources::embedded().expect("embedded sources")
}

/// The shipped sources plus `count` procedures in `fence_api`, created and
/// journaled on the server as a deploy would leave them (in two batches, not
/// `count` deploys), so that a redeploy finds them current: a hand-made
/// procedure in a fence schema would stop the deploy instead.
async fn with_current_procedures(db: &TestDatabase, count: usize) -> Sources {
    let mut sources = shipped();
    let mut create = String::new();
    for i in 0..count {
        let text = format!("CREATE PROCEDURE fence_api.Bench{i} AS SELECT {i};");
        sources = sources
            .with_procedure(&format!("fence_api.Bench{i}.sql"), &text)
            .unwrap();
        create += &format!("EXEC (N'{text}');\n");
    }
    db.exec(&create).await;
    // In chunks: one request hashing 500 definitions outlasts the command
    // timeout on a slow engine. The hash is the runner's own expression.
    let bench: Vec<_> = sources
        .procedures()
        .iter()
        .filter(|p| p.qualified_name().starts_with("fence_api.Bench"))
        .collect();
    for chunk in bench.chunks(25) {
        let journal: String = chunk
            .iter()
            .map(|p| {
                let name = p.qualified_name();
                format!(
                    "INSERT INTO fence.DeployedProcedure (ProcedureName, SourceChecksum, DefinitionHash, DeployedAtUtc)
                     SELECT N'{name}', '{}', HASHBYTES('SHA2_256', m.definition), SYSUTCDATETIME()
                       FROM sys.sql_modules AS m WHERE m.object_id = OBJECT_ID(N'{name}');\n",
                    p.checksum()
                )
            })
            .collect();
        db.exec(&journal).await;
    }
    sources
}

/// Runs `operation` [`RUNS`] times; the round trips are those of one run.
async fn measure<F, Fut>(proxy: &Proxy, scenario: &str, baseline: Option<Duration>, operation: F) -> Row
where
    F: Fn() -> Fut,
    Fut: Future<Output = ()>,
{
    let mut times = Vec::new();
    let mut round_trips = 0;
    for _ in 0..RUNS {
        let before = proxy.messages();
        let started = Instant::now();
        operation().await;
        times.push(started.elapsed());
        round_trips = proxy.messages() - before;
    }
    times.sort();
    Row {
        scenario: scenario.to_string(),
        round_trips,
        median: times[RUNS / 2],
        baseline,
    }
}

/// Acquire, renew, publish and release as four hand-written procedure calls.
async fn by_hand(conn: &mut fencepost::Connection, key: &str) {
    let owner = Uuid::new_v4();
    let row = conn
        .query(
            "EXEC fence_api.Acquire @ResourceKey = @P1, @Owner = @P2, @LeaseSeconds = 30;",
            &[&key, &owner],
        )
        .await
        .unwrap()
        .into_row()
        .await
        .unwrap()
        .unwrap();
    let generation: i64 = row.get(1).unwrap();
    let calls = [
        "EXEC fence_api.Renew @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @LeaseSeconds = 30;",
        "EXEC fence_api.Publish @ResourceKey = @P1, @Owner = @P2, @Generation = @P3, @OperationId = @P4, @Payload = N'x';",
        "EXEC fence_api.Release @ResourceKey = @P1, @Owner = @P2, @Generation = @P3;",
    ];
    let operation = Uuid::new_v4();
    for (i, sql) in calls.iter().enumerate() {
        let result = if i == 1 {
            conn.query(*sql, &[&key, &owner, &generation, &operation]).await
        } else {
            conn.query(*sql, &[&key, &owner, &generation]).await
        };
        result.unwrap().into_results().await.unwrap();
    }
}

/// The same cycle through the client.
async fn through_client(client: &Client, key: &str) {
    let Acquire::Acquired(mut lease) = client.acquire(key, Duration::from_secs(30)).await.unwrap() else {
        panic!("the bench key is busy");
    };
    assert!(matches!(client.renew(&mut lease).await.unwrap(), Renew::Renewed { .. }));
    assert_eq!(
        client.publish(&lease, Uuid::new_v4(), "x").await.unwrap(),
        Publish::Published
    );
    assert_eq!(client.release(&lease).await.unwrap(), Release::Released);
}

fn print_table(rows: &[Row]) {
    println!(
        "\n{:<56} {:>11} {:>11} {:>9}",
        "scenario", "round trips", "median ms", "ratio"
    );
    for row in rows {
        let ratio = match row.baseline {
            None => "baseline".to_string(),
            Some(base) => format!("{:.2}", row.median.as_secs_f64() / base.as_secs_f64()),
        };
        println!(
            "{:<56} {:>11} {:>11.1} {:>9}",
            row.scenario,
            row.round_trips,
            row.median.as_secs_f64() * 1000.0,
            ratio
        );
    }
}
