//! Several workers rebuild one report; one of them stalls past its lease and
//! comes back with a stale result, which the fence refuses.
//!
//! Needs a database deployed with `fencepost migrate` and a login in the
//! `fence_service` role:
//!
//! ```text
//! FENCEPOST_CONNECTION='Server=tcp:127.0.0.1,1433;Database=app;User ID=svc;Password=...;Encrypt=true;TrustServerCertificate=true' \
//!     cargo run --example report_rebuilder
//! ```

use std::sync::Arc;
use std::time::Duration;

use fencepost::CancellationToken;
use fencepost::client::{Acquire, Fenced, Publication, Publish};
use fencepost::{Client, ClientConfig, ConnectionString};
use tokio::sync::oneshot;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;
use uuid::Uuid;

const REPORT: &str = "report:daily-revenue";
/// Short, so that the stalled worker's lease runs out soon, yet long enough
/// for a worker's first calls on new sessions, which a busy Babelfish can
/// take seconds to compile, to finish inside it.
const LEASE: Duration = Duration::from_secs(5);

/// Where the workers tell their story: stdout here, a list in a test.
pub type Say = Arc<dyn Fn(String) + Send + Sync>;

/// How the story ended.
#[derive(Debug)]
pub struct Story {
    /// The stalled worker's late publish, as the fence answered it.
    pub late_write: Publish,
    /// The generation the stalled worker held.
    pub stalled_generation: i64,
    /// The report readers see at the end.
    pub final_report: Publication,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // Shows the client's own log lines (a release that had nothing left to
    // release, a failed renewal being retried), not the driver's.
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_target(false))
        .with(Targets::new().with_target("fencepost", tracing::Level::DEBUG))
        .init();
    let ado =
        std::env::var("FENCEPOST_CONNECTION").map_err(|_| "set FENCEPOST_CONNECTION to an ADO connection string")?;
    let config = ClientConfig::new(ConnectionString::parse(&ado)?);
    Client::connect_with(config.clone()).await?.verify_contract().await?;
    let story = run(config, REPORT, LEASE, Arc::new(|line| println!("{line}"))).await?;
    match story.final_report {
        Publication::Found {
            generation, payload, ..
        } => println!("final report: {payload:?} (generation {generation})"),
        other => println!("final report: {other:?}"),
    }
    Ok(())
}

/// Runs the three workers on `report` with leases of `lease`, each with a
/// client of its own made from `config`, and tells what happened through
/// `say`.
pub async fn run(
    config: ClientConfig,
    report: &str,
    lease: Duration,
    say: Say,
) -> Result<Story, Box<dyn std::error::Error + Send + Sync>> {
    let setup = Client::connect_with(config.clone()).await?;
    setup.provision(report).await?;

    // The stalled worker's late write is sent only after the others are done,
    // so the story prints in order; it holds the lease first.
    let (others_done, late_write) = oneshot::channel();
    let (acquired, first) = oneshot::channel();
    let stalled = tokio::spawn(stalled_worker(
        Client::connect_with(config.clone()).await?,
        report.to_string(),
        lease,
        say.clone(),
        acquired,
        late_write,
    ));
    let Ok(stalled_generation) = first.await else {
        // It stopped before it held the lease: its own error says why.
        return Err(stalled
            .await?
            .err()
            .unwrap_or_else(|| "worker-a stopped without the lease".into()));
    };

    let mut healthy = Vec::new();
    for name in ["worker-b", "worker-c"] {
        let client = Client::connect_with(config.clone()).await?;
        healthy.push(tokio::spawn(healthy_worker(
            client,
            report.to_string(),
            lease,
            name,
            say.clone(),
        )));
    }
    for worker in healthy {
        worker.await??;
    }
    let _ = others_done.send(());
    let late_write = stalled.await??;
    Ok(Story {
        late_write,
        stalled_generation,
        final_report: setup.read_publication(report).await?,
    })
}

/// Takes the lease, builds, then stalls (think of a long GC pause or a
/// suspended VM) with no chance to renew, and publishes when it wakes up.
async fn stalled_worker(
    client: Client,
    report: String,
    length: Duration,
    say: Say,
    acquired: oneshot::Sender<i64>,
    others_done: oneshot::Receiver<()>,
) -> Result<Publish, Box<dyn std::error::Error + Send + Sync>> {
    let Acquire::Acquired(lease) = client.acquire(&report, length).await? else {
        return Err("worker-a: could not get the lease first".into());
    };
    say(format!(
        "worker-a: acquired generation {}, rebuilding...",
        lease.generation()
    ));
    let _ = acquired.send(lease.generation());
    let result = rebuild("worker-a", length).await;
    say("worker-a: stalled, no renewals".to_string());
    tokio::time::sleep(length).await;
    let _ = others_done.await;
    let answer = client.publish(&lease, Uuid::new_v4(), &result).await?;
    match &answer {
        Publish::Refused(reason) => say(format!("worker-a: woke up, late write refused: {reason}")),
        other => say(format!("worker-a: woke up, late write answered {other:?}")),
    }
    Ok(answer)
}

/// Uses `run_fenced`: renewed while it works, published under the same lease.
async fn healthy_worker(
    client: Client,
    report: String,
    length: Duration,
    name: &'static str,
    say: Say,
) -> Result<(), fencepost::client::Error> {
    loop {
        let outcome = client
            .run_fenced(&report, length, |stop: CancellationToken| async move {
                tokio::select! {
                    report = rebuild(name, length) => Ok::<_, std::convert::Infallible>(report),
                    _ = stop.cancelled() => Ok(String::new()),
                }
            })
            .await?;
        match outcome {
            Fenced::Busy { until } => {
                say(format!("{name}: busy until {until}, waiting"));
                tokio::time::sleep(length / 4).await;
            }
            Fenced::Published { generation, .. } => {
                say(format!("{name}: published under generation {generation}"));
                return Ok(());
            }
            other => {
                say(format!("{name}: {other:?}"));
                return Ok(());
            }
        }
    }
}

async fn rebuild(name: &str, lease: Duration) -> String {
    // Longer than a third of the lease, so the healthy workers renew at least once.
    tokio::time::sleep(lease / 2).await;
    format!("revenue report rebuilt by {name}")
}
