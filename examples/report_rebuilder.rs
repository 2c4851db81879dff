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

use std::time::Duration;

use fencepost::Client;
use fencepost::client::{Acquire, Fenced, Publication, Publish};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;
use uuid::Uuid;

const REPORT: &str = "report:daily-revenue";
const LEASE: Duration = Duration::from_secs(2);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Shows the client's own log lines (a release that had nothing left to
    // release, a failed renewal being retried), not the driver's.
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_target(false))
        .with(Targets::new().with_target("fencepost", tracing::Level::DEBUG))
        .init();
    let ado =
        std::env::var("FENCEPOST_CONNECTION").map_err(|_| "set FENCEPOST_CONNECTION to an ADO connection string")?;

    let setup = Client::connect(&ado).await?;
    setup.verify_contract().await?;
    setup.provision(REPORT).await?;

    // The stalled worker's late write is sent only after the others are done,
    // so the story prints in order.
    let (others_done, late_write) = oneshot::channel();
    let stalled = tokio::spawn(stalled_worker(ado.clone(), late_write));
    // Give the stalled worker its head start: it holds the lease first.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut healthy = Vec::new();
    for name in ["worker-b", "worker-c"] {
        healthy.push(tokio::spawn(healthy_worker(ado.clone(), name)));
    }
    for worker in healthy {
        worker.await??;
    }
    let _ = others_done.send(());
    stalled.await??;

    match setup.read_publication(REPORT).await? {
        Publication::Found {
            generation, payload, ..
        } => {
            println!("final report: {payload:?} (generation {generation})")
        }
        other => println!("final report: {other:?}"),
    }
    Ok(())
}

/// Takes the lease, builds, then stalls (think of a long GC pause or a
/// suspended VM) with no chance to renew, and publishes when it wakes up.
async fn stalled_worker(ado: String, others_done: oneshot::Receiver<()>) -> Result<(), fencepost::client::Error> {
    let client = Client::connect(&ado).await?;
    let Acquire::Acquired(lease) = client.acquire(REPORT, LEASE).await? else {
        println!("worker-a: could not get the lease first");
        return Ok(());
    };
    println!("worker-a: acquired generation {}, rebuilding...", lease.generation());
    let report = rebuild("worker-a").await;
    println!("worker-a: stalled, no renewals");
    tokio::time::sleep(LEASE + Duration::from_secs(1)).await;
    let _ = others_done.await;
    match client.publish(&lease, Uuid::new_v4(), &report).await? {
        Publish::Refused(reason) => println!("worker-a: woke up, late write refused: {reason}"),
        other => println!("worker-a: woke up, late write answered {other:?}"),
    }
    Ok(())
}

/// Uses `run_fenced`: renewed while it works, published under the same lease.
async fn healthy_worker(ado: String, name: &'static str) -> Result<(), fencepost::client::Error> {
    let client = Client::connect(&ado).await?;
    loop {
        let outcome = client
            .run_fenced(REPORT, LEASE, |stop: CancellationToken| async move {
                tokio::select! {
                    report = rebuild(name) => Ok::<_, std::convert::Infallible>(report),
                    _ = stop.cancelled() => Ok(String::new()),
                }
            })
            .await?;
        match outcome {
            Fenced::Busy { until } => {
                println!("{name}: busy until {until}, waiting");
                tokio::time::sleep(Duration::from_millis(700)).await;
            }
            Fenced::Published { generation, .. } => {
                println!("{name}: published under generation {generation}");
                return Ok(());
            }
            other => {
                println!("{name}: {other:?}");
                return Ok(());
            }
        }
    }
}

async fn rebuild(name: &str) -> String {
    // Longer than a third of the lease, so the healthy workers renew at least once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    format!("revenue report rebuilt by {name}")
}
