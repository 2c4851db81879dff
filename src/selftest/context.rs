//! What every check is given: the database, the engine's facts, the run's
//! keys, and a way to open sessions and clients of its own.

use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use super::engine::EngineFacts;
use super::keys::{KEY_ROOT, Keys, RUN_MARKER};
use super::session::Session;
use crate::client::{Acquire, Inspection, Lease, LeaseState, Provision, Publication};
use crate::{Client, ClientConfig, ConnectionString};

/// How long a check waits for a lease to expire on the server clock.
const EXPIRY_BOUND: Duration = Duration::from_secs(30);

/// A lease short enough to wait out: the contract's least, one second.
pub(crate) const SHORT: Duration = Duration::from_secs(1);
/// A lease that outlasts any check's schedule; still short, so a check that
/// failed half-way leaves nothing held for long.
pub(crate) const LONG: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub(crate) struct Context {
    pub(crate) target: ConnectionString,
    pub(crate) service: Option<ConnectionString>,
    pub(crate) engine: EngineFacts,
    pub(crate) keys: Keys,
}

impl Context {
    /// A client of one connection: one session, as a worker of a service.
    /// The selftest runs as whatever login it is given, so the
    /// privileged-login refusal is off.
    pub(crate) async fn client(&self) -> Result<Client> {
        self.client_with(|_| {}).await
    }

    /// A client of one connection, configured further by `configure`.
    pub(crate) async fn client_with(&self, configure: impl FnOnce(&mut ClientConfig)) -> Result<Client> {
        let mut config = ClientConfig::new(self.target.clone());
        config.max_connections(1).allow_privileged_login(true);
        configure(&mut config);
        Client::connect_with(config).await.context("connecting a client")
    }

    /// `n` clients of one connection each.
    pub(crate) async fn clients(&self, n: usize) -> Result<Vec<Client>> {
        let mut clients = Vec::with_capacity(n);
        for _ in 0..n {
            clients.push(self.client().await?);
        }
        Ok(clients)
    }

    /// A raw session of its own.
    pub(crate) async fn session(&self) -> Result<Session> {
        Session::open(&self.target).await
    }

    /// This check's key, `<root><user prefix><name>`, provisioned and free:
    /// the key is the same in every run, so it starts from whatever an
    /// earlier run left. A key that was there already and holds a
    /// publication no selftest wrote is someone else's: refused, untouched
    /// and not noted (so the clean-up keeps it). Runs never overlap (the
    /// run's application lock), so a lease still held on it is one a run
    /// that was stopped at once left, at most 30 s long: the check waits for
    /// its end rather than fail on it.
    pub(crate) async fn key(&self, client: &Client, name: &str) -> Result<String> {
        let key = self.keys.name(name);
        let provisioned = client.provision(&key).await.context("provisioning the check's key")?;
        if provisioned == Provision::Exists {
            refuse_if_not_the_selftests(client, &key).await?;
        }
        self.keys.note(&key);
        wait_until_expired(client, &key)
            .await
            .context("waiting for a lease an earlier run left on the check's key to end")?;
        Ok(key)
    }
}

/// Fails, touching nothing, when the publication of `key` is not one a
/// selftest wrote.
async fn refuse_if_not_the_selftests(client: &Client, key: &str) -> Result<()> {
    match client.read_publication(key).await.context("reading the check's key")? {
        Publication::Found { payload, .. } if !Keys::is_selftests(&payload) => bail!(
            "refused to use the key {key}: it is not the selftest's (its publication {:?} lacks the selftest's \
             run marker {RUN_MARKER:?}), so it was left untouched, its row kept; keys under {KEY_ROOT} are the \
             selftest's: move that key elsewhere",
            payload.chars().take(80).collect::<String>()
        ),
        _ => Ok(()),
    }
}

/// The lease of an `Acquired`, or an error naming what came instead.
pub(crate) fn acquired(answer: Acquire) -> Result<Lease> {
    match answer {
        Acquire::Acquired(lease) => Ok(lease),
        other => bail!("expected Acquired, got {}", acquire_name(&other)),
    }
}

/// An Acquire answer in a word.
pub(crate) fn acquire_name(answer: &Acquire) -> String {
    match answer {
        Acquire::Acquired(lease) => format!("Acquired (generation {})", lease.generation()),
        Acquire::Busy { .. } => "Busy".to_string(),
        Acquire::NotProvisioned => "NotProvisioned".to_string(),
    }
}

/// The lease state of `key`.
pub(crate) async fn state(client: &Client, key: &str) -> Result<LeaseState> {
    match client.inspect(key).await? {
        Inspection::Found(state) => Ok(state),
        other => bail!("Inspect answered {}", other.name()),
    }
}

/// Waits until the server no longer sees the lease on `key` as held.
pub(crate) async fn wait_until_expired(client: &Client, key: &str) -> Result<()> {
    let give_up = tokio::time::Instant::now() + EXPIRY_BOUND;
    while state(client, key).await?.is_held {
        if tokio::time::Instant::now() > give_up {
            bail!("the lease on {key} did not expire within {} s", EXPIRY_BOUND.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
