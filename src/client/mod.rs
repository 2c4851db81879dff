//! The typed client services use: one method per `fence_api` procedure, a
//! waiting acquire, and [`Client::run_fenced`], which holds a lease around a
//! piece of work and publishes its result under that same lease.
//!
//! The client sends nothing but procedure calls, one round trip each; it never
//! reads or writes the fence tables, so it runs as a login that only holds the
//! `fence_service` role.
//!
//! Each procedure's parameters, outcomes and error numbers: `docs/contract.md` in the repository.

pub mod admin;
mod api;
mod built;
mod call;
mod config;
mod contract;
mod error;
#[cfg(feature = "fake")]
#[cfg_attr(docsrs, doc(cfg(feature = "fake")))]
pub mod fake;
mod fenced_outcome;
mod fenced_transaction;
mod fenced_tx;
mod guard;
mod guarded;
mod handed_over;
mod handover;
mod hedged_renew;
mod input;
mod json_text;
mod lease;
mod lease_set;
pub mod meter;
mod outcome;
mod parameter;
mod pool;
mod privilege;
mod queue;
mod renew_many;
mod renewal_batch;
mod run_fenced;
mod run_fenced_set;
mod set_api;
mod set_guard;
mod set_outcome;
mod set_renewal;
mod set_settle;
mod set_wait;
mod settle;
mod signal_holder;
mod signal_loan;
mod slot;
mod slot_wait;
mod span;
mod to_its_end;
mod token;
mod verify;
mod wait;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Semaphore;

pub use admin::Admin;
pub use built::Built;
pub use config::{ClientConfig, MAX_TIMEOUT};
pub use contract::{CONTRACT_VERSION, ContractVersion, Procedure};
pub use error::Error;
pub use fenced_outcome::FencedOutcome;
#[allow(deprecated)]
pub use fenced_outcome::FencedTransaction;
pub use fenced_tx::{BeginFenced, FencedTx};
pub use guard::{LeaseGuard, LostReason};
pub use guarded::Guarded;
pub use input::{MAX_KEY_UTF16_UNITS, MAX_LEASE};
pub use lease::Lease;
pub use lease_set::{LeaseSet, MAX_SET_KEYS};
pub use outcome::{
    Acquire, Inspection, LeaseState, OperationOutcome, Provision, Publication, Publish, RefusalReason, Release, Renew,
};
pub use parameter::Parameter;
pub use renew_many::MAX_RENEW_MANY;
pub use run_fenced::Fenced;
pub use run_fenced_set::FencedSet;
pub use set_guard::LeaseSetGuard;
pub use set_outcome::{AcquireSet, KeyPublish, KeyRefusal, PublishSet, RenewSet};
pub use set_renewal::SetLost;
pub use set_settle::UnsettledSet;
#[cfg(feature = "artifacts")]
pub(crate) use settle::Unresolved;
pub use settle::Unsettled;
pub use slot::{AcquireSlot, MAX_SLOT_RESOURCE_UTF16_UNITS, MAX_SLOTS, slot_key};

use crate::connection::ConnectionString;

/// The statement that reads the deployed contract version (no result set when
/// the procedure is missing); `fencepost status` reads it too.
#[cfg(feature = "deploy")]
pub(crate) fn contract_version_query() -> &'static str {
    contract::VERSION_QUERY
}

/// The version in the rows [`contract_version_query`] answered.
#[cfg(feature = "deploy")]
pub(crate) fn read_contract_version(rows: &[tiberius::Row]) -> Option<ContractVersion> {
    contract::read_version(rows)
}
use pool::{LastConnectError, Manager};

/// A pool of connections to one fence database and the typed calls on it.
/// Cloning is cheap and shares the pool.
///
/// The calls one by one: acquire, publish under the lease, release in the
/// same round trip. [`run_fenced`](Client::run_fenced) and
/// [`guard`](Client::guard) add the renewals.
///
/// ```no_run
/// # async fn service() -> Result<(), fencepost::client::Error> {
/// use std::time::Duration;
///
/// use fencepost::Client;
/// use fencepost::client::{Acquire, Publish};
///
/// let client = Client::connect("Server=tcp:db,1433;Database=app;User ID=svc;Password=...;Encrypt=true").await?;
/// client.verify_contract().await?;
/// client.provision("report:daily").await?;
/// match client.acquire("report:daily", Duration::from_secs(30)).await? {
///     Acquire::Acquired(lease) => {
///         // One operation id per result: a publish whose reply was lost is
///         // sent again with the same id and applies once.
///         let operation_id = uuid::Uuid::new_v4();
///         match client.publish_and_release(&lease, operation_id, "{\"rows\":42}").await? {
///             Publish::Published => println!("published under generation {}", lease.generation()),
///             other => println!("not published: {other:?}"),
///         }
///     }
///     Acquire::Busy { until, .. } => println!("held by someone else until {until}"),
///     other => println!("not acquired: {other:?}"),
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    pool: bb8::Pool<Manager>,
    /// Renewals only, so a pool busy with the service's own calls and fenced
    /// transactions cannot starve a guard until its lease ends. Opened on the
    /// first renewal, and as renewals in flight at once need: one per guard
    /// renewing and one spare (see `hedged_renew`), at most
    /// `MAX_RENEWAL_CONNECTIONS`.
    renewals: bb8::Pool<Manager>,
    /// The renewals' spare connection: a guard's second attempt beside a
    /// slow one takes it, so one guard whose renewals hang holds two
    /// renewal connections at most.
    renewal_spare: Arc<Semaphore>,
    /// The guards' renewals due together, sent in one call (see
    /// `renewal_batch`).
    renewal_batches: Arc<renewal_batch::RenewalBatches>,
    /// The sessions a waiting acquire blocks on the handover signal on, one
    /// each (see `handover`). Apart from `pool`, so a waiter never holds a
    /// connection the service's own calls wait for. Opened as needed.
    signals: bb8::Pool<Manager>,
    /// The few sessions every guard's handover signal is held on (see
    /// `signal_holder`), however many guards.
    signal_holders: Arc<signal_holder::SignalHolders>,
    /// Set once every signal session was seen in use, so that is logged once.
    signals_ran_out: Arc<std::sync::atomic::AtomicBool>,
    config: Arc<ClientConfig>,
    last_connect_error: LastConnectError,
    /// Procedure calls made, shared by clones: what a benchmark or a metric
    /// divides by. Counted as each call starts, before its checkout.
    requests: Arc<AtomicU64>,
    /// Where the calls go: the server the pools connect to, or a fake.
    backend: Backend,
}

/// Where a client's calls go.
#[derive(Clone, Debug)]
enum Backend {
    /// The database of the connection string, through the pools.
    Server,
    /// A fence in memory (feature `fake`). The pools are never used: they
    /// open connections only when a call asks for one.
    #[cfg(feature = "fake")]
    Fake(fake::Fake),
}

impl Client {
    /// Connects with an ADO.NET connection string and default settings.
    pub async fn connect(ado: &str) -> Result<Client, Error> {
        Client::connect_with(ClientConfig::new(ConnectionString::parse(ado)?)).await
    }

    /// Connects with explicit settings. One connection is opened now, so a
    /// wrong address or password fails here with its reason; the pool opens
    /// the others as calls need them, and one more for renewals on the first
    /// renewal. A setting no client can honour (a zero `call_timeout`,
    /// `checkout_timeout` or `idle_check_timeout`) is refused first, as
    /// [`Error::InvalidConfig`].
    pub async fn connect_with(config: ClientConfig) -> Result<Client, Error> {
        config.check()?;
        meter::describe();
        let client = Client::unconnected(config);
        let first = client.pool.dedicated_connection().await?;
        // The pool has room for it: it is empty and holds at least one.
        let _ = client.pool.add(first);
        Ok(client)
    }

    /// A client whose pools open their connections as calls need them.
    fn unconnected(config: ClientConfig) -> Client {
        let last_connect_error = LastConnectError::default();
        // Shared by both pools: a failover that broke one pool's idle
        // connections broke the other's too.
        let idle_check = pool::idle_check(&config);
        let manager = Manager::new(&config, last_connect_error.clone(), idle_check.clone());
        let pool = pool::build(&config, config.max_connections, manager);
        let renewals = pool::build(
            &config,
            hedged_renew::MAX_RENEWAL_CONNECTIONS,
            Manager::new(&config, last_connect_error.clone(), idle_check.clone()),
        );
        let signal_holders = signal_holder::SignalHolders::new(
            &config,
            Manager::new(&config, last_connect_error.clone(), idle_check.clone()),
        );
        let signals = handover::pool(&config, Manager::new(&config, last_connect_error.clone(), idle_check));
        Client {
            pool,
            renewals,
            renewal_spare: Arc::new(hedged_renew::spare()),
            renewal_batches: Arc::new(renewal_batch::RenewalBatches::new()),
            signals,
            signal_holders: Arc::new(signal_holders),
            signals_ran_out: Arc::default(),
            config: Arc::new(config),
            last_connect_error,
            requests: Arc::default(),
            backend: Backend::Server,
        }
    }

    /// A client of a server that refuses every connection, for unit tests of
    /// what must end without a round trip: each call fails before sending.
    #[cfg(test)]
    pub(crate) fn unreachable(checkout_timeout: std::time::Duration) -> Client {
        // Port 1 on the loopback interface: nothing listens there.
        let ado = "Server=tcp:127.0.0.1,1;User ID=nobody;Password=x;Encrypt=DANGER_PLAINTEXT";
        let mut config = ClientConfig::new(ConnectionString::parse(ado).expect("a valid connection string"));
        config.checkout_timeout(checkout_timeout);
        Client::unconnected(config)
    }

    /// The pool a call of `procedure` takes its connection from: renewals
    /// have their own, every other call shares the ordinary one.
    pub(crate) fn pool_for(&self, procedure: Procedure) -> &bb8::Pool<Manager> {
        match procedure {
            Procedure::Renew | Procedure::RenewMany | Procedure::RenewSet => &self.renewals,
            _ => &self.pool,
        }
    }

    /// The settings this client runs with.
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// How many procedure calls this client and its clones have made, each
    /// one request to the server: one per lease method call, one per attempt
    /// of [`acquire_waiting`](Client::acquire_waiting), and one per wait of
    /// [`acquire_set_waiting`](Client::acquire_set_waiting) on its keys'
    /// signals that found a signal session. The start-up check and
    /// the statements of a fenced transaction are not counted. A call is
    /// counted when it starts, so one that found no connection
    /// ([`Error::Unavailable`]) and sent nothing is counted too.
    pub fn requests_sent(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("backend", &self.backend)
            .field("server", &self.config.connection_string.server())
            .field("database", &self.config.connection_string.database())
            .finish_non_exhaustive()
    }
}
