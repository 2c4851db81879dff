//! Helpers shared by the live lease and client tests: one warmed-up client per
//! worker, and the waits that let the server clock move a lease past its end.

use std::process::Output;
use std::time::Duration;

use fencepost::client::{Acquire, Error, Inspection, Lease, Provision, Publish, Release, Renew};
use fencepost::{Client, ClientConfig, ConnectionString};
use uuid::Uuid;

/// A lease short enough to wait out in a test.
pub const SHORT: Duration = Duration::from_secs(2);

/// A client of its own for one worker: one connection, so each worker is one
/// session, warmed up so that timing-sensitive steps do not pay first-call
/// compilation (about half a second per procedure per session on Babelfish).
pub async fn worker(ado: &str) -> Client {
    let mut config = ClientConfig::new(ConnectionString::parse(ado).expect("connection string"));
    config.max_connections(1);
    let client = Client::connect_with(config).await.expect("worker connects");
    warm_up(&client).await;
    client
}

/// `N` workers ([`worker`]), warmed up at the same time: each warm-up is
/// its own session's compilation, so they need not wait for each other.
pub async fn workers<const N: usize>(ado: &str) -> [Client; N] {
    let clients = futures_util::future::join_all((0..N).map(|_| worker(ado))).await;
    clients
        .try_into()
        .unwrap_or_else(|_| unreachable!("join_all keeps every worker"))
}

/// A client of one connection, as [`worker`] but not warmed up: for a test
/// whose steps no timing depends on, where first-call compilation only costs
/// time.
pub async fn unwarmed(ado: &str) -> Client {
    let mut config = ClientConfig::new(ConnectionString::parse(ado).expect("connection string"));
    config.max_connections(1);
    Client::connect_with(config).await.expect("client connects")
}

/// Calls every procedure once on a key of its own, so a test's timed calls
/// pay no first-call compilation. A client with a short call timeout can run
/// out of it on a busy engine while a new session compiles a procedure; the
/// warm-up is then tried again (on a new connection, since the pool drops
/// one whose call timed out), at most three times in all.
pub async fn warm_up(client: &Client) {
    const ATTEMPTS: usize = 3;
    for attempt in 1..=ATTEMPTS {
        match try_warm_up(client).await {
            Ok(()) => return,
            Err(Error::Network { timed_out: true, .. } | Error::OutcomeUnknown { .. }) if attempt < ATTEMPTS => {
                eprintln!("warm-up attempt {attempt} timed out; trying again");
            }
            Err(error) => panic!("warm-up failed: {error}"),
        }
    }
}

async fn try_warm_up(client: &Client) -> Result<(), Error> {
    let key = format!("warm-up:{}", Uuid::new_v4());
    assert_eq!(client.provision(&key).await?, Provision::Created);
    let mut lease = acquired(client.acquire(&key, Duration::from_secs(30)).await?);
    assert!(matches!(client.renew(&mut lease).await?, Renew::Renewed { .. }));
    assert_eq!(
        client.publish(&lease, Uuid::new_v4(), "warm").await?,
        Publish::Published
    );
    assert_eq!(client.release(&lease).await?, Release::Released);
    client.inspect(&key).await?;
    client.read_publication(&key).await?;
    client.outcome(Uuid::new_v4()).await?;
    Ok(())
}

/// Provisions a fresh key.
pub async fn provisioned(client: &Client, name: &str) -> String {
    let key = format!("{name}:{}", Uuid::new_v4().simple());
    assert_eq!(client.provision(&key).await.unwrap(), Provision::Created);
    key
}

/// The lease of an `Acquired`, or a panic naming what came instead.
pub fn acquired(answer: Acquire) -> Lease {
    match answer {
        Acquire::Acquired(lease) => lease,
        other => panic!("expected Acquired, got {other:?}"),
    }
}

/// The lease state without the moment it was read.
pub async fn state(client: &Client, key: &str) -> (i64, bool, Option<time::OffsetDateTime>, Option<i64>) {
    match client.inspect(key).await.unwrap() {
        Inspection::Found(state) => (
            state.generation,
            state.is_held,
            state.lease_until,
            state.published_generation,
        ),
        Inspection::NotProvisioned => panic!("{key} is not provisioned"),
    }
}

/// Waits until the server no longer sees the lease on `key` as held. The
/// server clock is the only judge of expiry, so this asks it rather than
/// sleeping for a guessed time.
pub async fn wait_until_expired(client: &Client, key: &str) {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, held, _, _) = state(client, key).await;
        if !held {
            return;
        }
        assert!(
            tokio::time::Instant::now() < give_up,
            "the lease on {key} never expired"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs `fencepost lease ARGS` against the database of `ado`.
pub async fn lease_cli(args: &[&str], ado: &str) -> Output {
    crate::support::binary::tokio(crate::support::binary::fencepost_on(ado, ["lease"].iter().chain(args)))
        .output()
        .await
        .expect("run fencepost")
}

/// The JSON document a command printed, or a panic showing what it printed.
pub fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}
