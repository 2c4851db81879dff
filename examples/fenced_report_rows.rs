//! Two workers write report rows into the service's own table, each under a
//! lease guard. The first freezes (a long GC pause, a suspended VM: its
//! renewals stop with it), its lease runs out, and the second takes over.
//! When the first wakes up, its late rows are refused and none of them commit.
//!
//! Needs a database deployed with `fencepost migrate`, the table below, and a
//! login in the `fence_service` role that may write it:
//!
//! ```text
//! CREATE TABLE dbo.ReportRow (
//!     Id int IDENTITY PRIMARY KEY, Writer nvarchar(20) NOT NULL,
//!     Generation bigint NOT NULL, Line nvarchar(100) NOT NULL);
//! GRANT SELECT, INSERT ON dbo.ReportRow TO svc;
//!
//! FENCEPOST_CONNECTION='Server=tcp:127.0.0.1,1433;Database=app;User ID=svc;Password=...;Encrypt=true;TrustServerCertificate=true' \
//!     cargo run --example fenced_report_rows
//! ```

use std::sync::mpsc;
use std::time::Duration;

use fencepost::client::{Acquire, FencedOutcome, LeaseGuard};
use fencepost::{Client, ClientConfig, ConnectionString};

const REPORT: &str = "report:weekly-rows";
/// Short, so that the takeover comes soon, yet long enough for a worker's
/// first calls on new sessions, which a busy Babelfish can take seconds to
/// compile, to finish inside it.
const LEASE: Duration = Duration::from_secs(5);

/// What ended up committed in `dbo.ReportRow`, and how the frozen worker's
/// late write was answered.
#[derive(Debug)]
pub struct Story {
    /// `(writer, generation, line)` of every committed row, in order.
    pub rows: Vec<(String, i64, String)>,
    /// The frozen worker's late write, as `fenced_transaction` answered it.
    pub late_write: String,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let ado =
        std::env::var("FENCEPOST_CONNECTION").map_err(|_| "set FENCEPOST_CONNECTION to an ADO connection string")?;
    let config = ClientConfig::new(ConnectionString::parse(&ado)?);
    Client::connect_with(config.clone()).await?.verify_contract().await?;
    let story = run(config, &ado).await?;
    println!("late write of worker-a: {}", story.late_write);
    println!("rows in dbo.ReportRow:");
    for (writer, generation, line) in story.rows {
        println!("  {writer} (generation {generation}): {line}");
    }
    Ok(())
}

/// Runs the two workers, each with a client of its own made from `config`,
/// and tells what happened; `ado` reads the rows back.
pub async fn run(config: ClientConfig, ado: &str) -> Result<Story, Box<dyn std::error::Error + Send + Sync>> {
    let client = Client::connect_with(config.clone()).await?;
    client.provision(REPORT).await?;
    let (a_wrote, b_may_start) = tokio::sync::oneshot::channel::<()>();
    let (b_done, wake_a) = mpsc::channel::<()>();

    // Worker A runs on a thread and runtime of its own, like a process of
    // its own, so that freezing it freezes its renewals too.
    let worker_a = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        runtime.block_on(async {
            let client = Client::connect_with(config).await?;
            frozen_worker(client, a_wrote, wake_a).await
        })
    });
    // Worker B starts once A holds the lease and has written, and waits for
    // the lease: it gets it once A's has run out.
    if b_may_start.await.is_err() {
        // Worker A ended before it had written: its own error says why.
        let ended = tokio::task::spawn_blocking(move || worker_a.join())
            .await?
            .map_err(|_| "worker-a panicked")?;
        return Err(ended.err().unwrap_or_else(|| "worker-a ended before it wrote".into()));
    }
    let b = match client.acquire_waiting(REPORT, LEASE, LEASE * 10).await? {
        Acquire::Acquired(lease) => client.guard(lease),
        other => return Err(format!("worker-b could not take the lease: {other:?}").into()),
    };
    println!("worker-b: took over at generation {}", b.lease().generation());
    let written = write_rows(&b, "worker-b", &["totals", "by region"]).await?;
    println!("worker-b: {}", describe(&written));
    let _ = b.release().await?;
    let _ = b_done.send(());

    let late_write = tokio::task::spawn_blocking(move || worker_a.join())
        .await?
        .map_err(|_| "worker-a panicked")??;
    let rows = committed_rows(ado).await?;
    Ok(Story { rows, late_write })
}

/// Takes the lease first, writes one row, then freezes until B is done and
/// tries to write the rest.
async fn frozen_worker(
    client: Client,
    wrote: tokio::sync::oneshot::Sender<()>,
    wake: mpsc::Receiver<()>,
) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
    let Acquire::Acquired(lease) = client.acquire(REPORT, LEASE).await? else {
        return Err("worker-a could not take the lease first".into());
    };
    let a = client.guard(lease);
    println!("worker-a: acquired generation {}", a.lease().generation());
    let written = write_rows(&a, "worker-a", &["header"]).await?;
    println!("worker-a: {}", describe(&written));
    if !matches!(written, FencedOutcome::Committed(_)) {
        // The story needs a first row that committed while A held the lease.
        return Err(format!("worker-a's first write: {}", describe(&written)).into());
    }
    println!("worker-a: frozen");
    let _ = wrote.send(());
    // Blocks the thread, and with it this runtime: no renewal is sent.
    let _ = wake.recv();
    let late = write_rows(&a, "worker-a", &["totals", "by region"]).await?;
    println!("worker-a: woke up; {}", describe(&late));
    Ok(describe(&late))
}

/// Inserts `lines` as `writer` in one transaction fenced by `guard`'s lease.
async fn write_rows(
    guard: &LeaseGuard,
    writer: &str,
    lines: &[&str],
) -> Result<FencedOutcome<usize, fencepost::client::Error>, fencepost::client::Error> {
    let generation = guard.lease().generation();
    guard
        .fenced_transaction(async |tx| {
            for line in lines {
                tx.execute(
                    "INSERT INTO dbo.ReportRow (Writer, Generation, Line) VALUES (@P1, @P2, @P3)",
                    &[&writer, &generation, line],
                )
                .await?;
            }
            Ok(lines.len())
        })
        .await
}

fn describe(written: &FencedOutcome<usize, fencepost::client::Error>) -> String {
    match written {
        FencedOutcome::Committed(rows) => format!("{rows} row(s) committed"),
        FencedOutcome::Refused(reason) => format!("refused ({reason}), nothing committed"),
        FencedOutcome::Failed(error) => format!("failed ({error}), nothing committed"),
        FencedOutcome::NotProvisioned => "the report has no fence row".to_string(),
        other => format!("{other:?}"),
    }
}

/// Reads the table back on a connection of its own: the service's login and
/// its SELECT right, no lease needed to read.
async fn committed_rows(ado: &str) -> Result<Vec<(String, i64, String)>, Box<dyn std::error::Error + Send + Sync>> {
    let mut connection = ConnectionString::parse(ado)?.connect().await?;
    let rows = connection
        .simple_query("SELECT Writer, Generation, Line FROM dbo.ReportRow ORDER BY Id")
        .await?
        .into_first_result()
        .await?;
    Ok(rows
        .iter()
        .map(|row| {
            (
                row.get::<&str, _>(0).unwrap_or_default().to_string(),
                row.get::<i64, _>(1).unwrap_or_default(),
                row.get::<&str, _>(2).unwrap_or_default().to_string(),
            )
        })
        .collect())
}
