//! `fencepost bench`: the fence's lease calls measured side by side with what
//! a user would run instead, in one run, on the same number of connections.
//!
//! Every worker has a connection of its own. Baselines run first (`select1`,
//! `raw_update`, `applock_cycle`), then the workloads (`cycle`, `contended`
//! and `contended_guarded`, `renew`, `handover` with its own baseline
//! `applock_handover`, and on request `held`, many guards in one client)
//! through [`Client`]. Each scenario warms up, then
//! measures for a duration or a number of operations. The bench works on keys
//! of its own under a prefix and deletes them afterwards, with its scratch
//! table.

mod baselines;
mod engine;
mod error;
mod handover;
mod held;
pub(crate) mod keys;
mod report;
mod runner;
mod scratch;
mod sets;
mod stats;
mod telemetry;
mod usage;
mod workloads;

use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use error::BenchError;
pub use held::{Held, Renewals};
pub use report::{BASELINES, Report, Scenario};
#[cfg(feature = "metrics")]
pub use telemetry::RecorderInstalled;
pub use telemetry::{Telemetry, TelemetryRecorded};

use crate::client::{self, Provision};
use crate::{Client, ClientConfig, Connection, ConnectionString};
use baselines::{ApplockCycle, RawUpdate, Select1};
use handover::{ApplockHandover, HANDOVER_SCENARIOS, Handover};
use keys::RunKeys;
use scratch::Scratch;
use workloads::{CYCLE_SCENARIOS, Contended, ContendedGuarded, Cycle, Renewing};

/// When a scenario's measured phase ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// After this long (an operation under way finishes).
    Duration(Duration),
    /// After this many operations over all workers.
    Operations(u64),
}

/// A workload of the fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Each worker: acquire → publish → release on its own key.
    Cycle,
    /// Every worker on one key, with a waiting acquire: plain calls
    /// (`contended`), and a guard that holds the key for a job's work and
    /// releases it early (`contended_guarded`).
    Contended,
    /// Holders renewing their leases.
    Renew,
    /// Pairs of workers, a holder that releases early and a waiter in
    /// `acquire_waiting`: how soon the waiter holds the lease, with the
    /// holder's guard signalling and without, beside two sessions handing
    /// over an `sp_getapplock` lock.
    Handover,
    /// One client holding many guards at once
    /// ([`held_guards`](BenchOptions::held_guards) of them) for a window of
    /// at least a renewal period: its sessions on the server, its calls a
    /// second, the server's CPU and its memory per lease, renewing together
    /// and, beside it, one by one. Not part of the default run.
    Held,
    /// Lease sets (contract v1.8) of 2, 8 and 32 keys in one call against
    /// as many single acquires, and a slot of a resource with 4 and with 32
    /// slots against one single acquire. Not part of the default run.
    Sets,
}

/// What to run. Setters take `&mut self` and chain, as
/// [`ClientConfig`]'s do:
///
/// ```
/// # use fencepost::bench::{BenchOptions, Stop, Workload};
/// let mut options = BenchOptions::default();
/// options.workers(8).stop(Stop::Operations(10_000)).workloads([Workload::Cycle]);
/// ```
#[derive(Clone, Debug)]
pub struct BenchOptions {
    workers: u32,
    stop: Stop,
    warmup: u32,
    workloads: Vec<Workload>,
    key_prefix: String,
    interrupt: CancellationToken,
    telemetry: Option<Telemetry>,
    held_guards: Vec<u32>,
}

impl Default for BenchOptions {
    /// What `fencepost bench` runs when given no options: 4 workers, 10 s
    /// per scenario after 2 warm-up operations per worker, every workload,
    /// keys under `fencepost-bench:`, no way to stop it early, and no
    /// telemetry.
    fn default() -> Self {
        Self {
            workers: 4,
            stop: Stop::Duration(Duration::from_secs(10)),
            warmup: 2,
            workloads: vec![
                Workload::Cycle,
                Workload::Contended,
                Workload::Renew,
                Workload::Handover,
            ],
            key_prefix: "fencepost-bench:".to_string(),
            interrupt: CancellationToken::new(),
            telemetry: None,
            held_guards: vec![100, 1_000, 10_000],
        }
    }
}

impl BenchOptions {
    /// Concurrent workers, each on a connection of its own (at least 1).
    pub fn workers(&mut self, workers: u32) -> &mut Self {
        self.workers = workers;
        self
    }

    /// When each scenario's measurement ends.
    pub fn stop(&mut self, stop: Stop) -> &mut Self {
        self.stop = stop;
        self
    }

    /// Operations each worker runs, unmeasured, before each scenario.
    pub fn warmup(&mut self, operations: u32) -> &mut Self {
        self.warmup = operations;
        self
    }

    /// The workloads to run after the baselines.
    pub fn workloads(&mut self, workloads: impl IntoIterator<Item = Workload>) -> &mut Self {
        self.workloads = workloads.into_iter().collect();
        self
    }

    /// The start of every key the bench makes.
    pub fn key_prefix(&mut self, prefix: &str) -> &mut Self {
        self.key_prefix = prefix.to_string();
        self
    }

    /// A token that stops the run early when cancelled (Ctrl-C): the run
    /// then cleans up as after a full run and answers
    /// [`BenchError::Interrupted`].
    pub fn interrupt(&mut self, token: CancellationToken) -> &mut Self {
        self.interrupt = token;
        self
    }

    /// How many guards `held` holds at once, one row (and its baseline) per
    /// size, in order: 100, 1,000 and 10,000 by default.
    pub fn held_guards(&mut self, sizes: impl IntoIterator<Item = u32>) -> &mut Self {
        self.held_guards = sizes.into_iter().collect();
        self
    }

    /// Runs with observability on: the report says so and what `telemetry`
    /// saw ([`Report::telemetry_recorded`]), so its `client_cpu_us_per_op`
    /// can be set beside a run's without. The caller installs
    /// [`Telemetry::layer`] in the global subscriber and
    /// [`Telemetry::install_recorder`] before the run; one not installed
    /// shows as nothing recorded.
    pub fn telemetry(&mut self, telemetry: Telemetry) -> &mut Self {
        self.telemetry = Some(telemetry);
        self
    }
}

/// Something to show while the bench runs.
#[derive(Clone, Debug)]
pub enum Event<'a> {
    /// A scenario's progress: operations measured so far, and time since its
    /// measurement began (`None` while warming up).
    Progress {
        /// The scenario (for `cycle`, `fenced_cycle`).
        scenario: &'a str,
        /// Operations measured so far.
        operations: u64,
        /// Time measured so far.
        elapsed: Option<Duration>,
    },
    /// A scenario skipped or something left behind, and why.
    Note(String),
}

/// A finished run.
#[derive(Debug)]
pub struct BenchRun {
    /// What was measured.
    pub report: Report,
    /// Whether every key and the scratch table were removed.
    pub cleaned_up: bool,
}

/// Runs the bench against the database of `target`. Refuses with
/// [`BenchError::NotDeployed`] before creating anything when the database
/// does not hold the procedures the client calls.
pub async fn run(
    target: &ConnectionString,
    options: &BenchOptions,
    events: &mut dyn FnMut(Event<'_>),
) -> Result<BenchRun, BenchError> {
    let workers = options.workers.max(1) as usize;
    let mut admin = target.connect().await?;
    let engine = engine::name(&mut admin).await?;
    let clients = connect_clients(target, workers).await?;
    let keys = RunKeys::new(&options.key_prefix);
    let scratch = match Scratch::create(&mut admin, &keys, workers).await {
        Ok(scratch) => Some(scratch),
        Err(reason) => {
            events(Event::Note(format!(
                "raw_update and applock_cycle skipped: this login may not create the scratch table {}: {reason}",
                keys.scratch_table()
            )));
            None
        }
    };
    // Stopping early drops the scenario in flight, its connections with it;
    // the clean-up below runs all the same.
    let measured = tokio::select! {
        biased;
        _ = options.interrupt.cancelled() => Err(BenchError::Interrupted),
        measured = async {
            let scenarios = scenarios(target, options, &keys, scratch.as_ref(), &clients, events).await?;
            let held = if options.workloads.contains(&Workload::Held) {
                held::run(target, &keys, &options.held_guards, workers, options.stop, events).await?
            } else {
                Vec::new()
            };
            Ok((scenarios, held))
        } => measured,
    };
    drop(clients);
    let cleaned_up = clean_up(&mut admin, &keys, scratch.as_ref(), events).await;
    let (scenarios, held) = measured?;
    let mut report = Report {
        engine,
        workers: workers as u32,
        client_peak_memory_kib: usage::peak_memory_kib(),
        telemetry: options.telemetry.is_some(),
        telemetry_recorded: options.telemetry.as_ref().map(Telemetry::recorded),
        scenarios,
        held,
    };
    report.compute_ratios();
    Ok(BenchRun { report, cleaned_up })
}

/// One client per worker, each with one connection, so a worker's calls
/// never wait for another's. The bench runs as whatever login it is given,
/// the deploy login included, so the privileged-login refusal is off: the
/// contract check stays on.
async fn connect_clients(target: &ConnectionString, workers: usize) -> Result<Vec<Client>, BenchError> {
    let mut clients = Vec::with_capacity(workers);
    for _ in 0..workers {
        let mut config = ClientConfig::new(target.clone());
        config.max_connections(1).allow_privileged_login(true);
        let client = Client::connect_with(config)
            .await
            .map_err(BenchError::client("connecting a worker"))?;
        if clients.is_empty() {
            match client.verify_contract().await {
                Ok(()) => {}
                Err(client::Error::ContractMismatch { problems, .. }) => {
                    return Err(BenchError::NotDeployed { problems });
                }
                Err(other) => return Err(BenchError::client("checking the fence contract")(other)),
            }
        }
        clients.push(client);
    }
    Ok(clients)
}

async fn scenarios(
    target: &ConnectionString,
    options: &BenchOptions,
    keys: &RunKeys,
    scratch: Option<&Scratch>,
    clients: &[Client],
    events: &mut dyn FnMut(Event<'_>),
) -> Result<Vec<Scenario>, BenchError> {
    let (stop, warmup) = (options.stop, options.warmup);
    let mut all = Vec::new();
    let conns = |n| connect_all(target, n);
    let workers = clients.len();

    let select1 = conns(workers).await?.into_iter().map(|conn| Select1 { conn }).collect();
    all.extend(runner::measure(&["select1"], select1, stop, warmup, events).await?.1);
    if let Some(scratch) = scratch {
        let statement = RawUpdate::statement(scratch);
        let raw: Vec<RawUpdate> = conns(workers)
            .await?
            .into_iter()
            .enumerate()
            .map(|(w, conn)| RawUpdate {
                conn,
                statement: statement.clone(),
                key: keys.key("raw_update", Some(w)),
                scratch: scratch.clone(),
            })
            .collect();
        all.extend(runner::measure(&["raw_update"], raw, stop, warmup, events).await?.1);
        let applock: Vec<ApplockCycle> = conns(workers)
            .await?
            .into_iter()
            .enumerate()
            .map(|(w, conn)| ApplockCycle::new(conn, scratch, keys.key("applock_cycle", Some(w))))
            .collect();
        all.extend(
            runner::measure(&["applock_cycle"], applock, stop, warmup, events)
                .await?
                .1,
        );
    }

    let has = |w: Workload| options.workloads.contains(&w);
    if has(Workload::Cycle) {
        let mut cycle = Vec::new();
        for (w, client) in clients.iter().enumerate() {
            let key = keys.key("cycle", Some(w));
            provision(client, &key).await?;
            cycle.push(Cycle {
                client: client.clone(),
                key,
            });
        }
        all.extend(runner::measure(&CYCLE_SCENARIOS, cycle, stop, warmup, events).await?.1);
    }
    if has(Workload::Contended) {
        let key = keys.key("contended", None);
        provision(&clients[0], &key).await?;
        let contended = clients
            .iter()
            .map(|client| Contended {
                client: client.clone(),
                key: key.clone(),
            })
            .collect();
        all.extend(
            runner::measure(&["contended"], contended, stop, warmup, events)
                .await?
                .1,
        );
        let key = keys.key("contended_guarded", None);
        provision(&clients[0], &key).await?;
        let guarded = clients
            .iter()
            .map(|client| ContendedGuarded {
                client: client.clone(),
                key: key.clone(),
            })
            .collect();
        all.extend(
            runner::measure(&["contended_guarded"], guarded, stop, warmup, events)
                .await?
                .1,
        );
    }
    if has(Workload::Renew) {
        let mut renewing = Vec::new();
        for (w, client) in clients.iter().enumerate() {
            let key = keys.key("renew", Some(w));
            provision(client, &key).await?;
            renewing.push(Renewing::start(client.clone(), key).await?);
        }
        let (renewing, measured) = runner::measure(&["renew"], renewing, stop, warmup, events).await?;
        for worker in renewing {
            worker.finish().await?;
        }
        all.extend(measured);
    }
    if has(Workload::Handover) {
        all.extend(handovers(target, keys, clients, stop, warmup, events).await?);
    }
    if has(Workload::Sets) {
        let largest = sets::SET_SIZES[sets::SET_SIZES.len() - 1];
        let mut workers = Vec::new();
        for (w, client) in clients.iter().enumerate() {
            let mut own = Vec::with_capacity(largest);
            for i in 0..largest {
                let key = keys.key(&format!("sets{i}"), Some(w));
                provision(client, &key).await?;
                own.push(key);
            }
            let mut slot_resources = Vec::with_capacity(sets::SLOT_COUNTS.len());
            for slots in sets::SLOT_COUNTS {
                let resource = keys.key(&format!("slots{slots}"), Some(w));
                client
                    .provision_slots(&resource, slots)
                    .await
                    .map_err(BenchError::client("provision_slots"))?;
                slot_resources.push(resource);
            }
            workers.push(sets::Sets {
                client: client.clone(),
                keys: own,
                slot_resources,
            });
        }
        all.extend(
            runner::measure(&sets::SET_SCENARIOS, workers, stop, warmup, events)
                .await?
                .1,
        );
    }
    Ok(all)
}

/// The `handover` scenarios, one pair of workers per two clients (a single
/// client holds and waits by itself).
async fn handovers(
    target: &ConnectionString,
    keys: &RunKeys,
    clients: &[Client],
    stop: Stop,
    warmup: u32,
    events: &mut dyn FnMut(Event<'_>),
) -> Result<Vec<Scenario>, BenchError> {
    let pairs = (clients.len() / 2).max(1);
    let pair = |p: usize| (&clients[2 * p % clients.len()], &clients[(2 * p + 1) % clients.len()]);
    let mut all = Vec::new();
    let mut conns = connect_all(target, 2 * pairs).await?.into_iter();
    let applock: Vec<ApplockHandover> = (0..pairs)
        .filter_map(|p| {
            let (holder, waiter) = (conns.next()?, conns.next()?);
            Some(ApplockHandover::new(
                holder,
                waiter,
                &keys.key(HANDOVER_SCENARIOS[0], Some(p)),
            ))
        })
        .collect();
    all.extend(
        runner::measure(&HANDOVER_SCENARIOS[..1], applock, stop, warmup, events)
            .await?
            .1,
    );
    for (name, guarded) in [(HANDOVER_SCENARIOS[1], true), (HANDOVER_SCENARIOS[2], false)] {
        let mut workers = Vec::with_capacity(pairs);
        for p in 0..pairs {
            let (holder, waiter) = pair(p);
            let key = keys.key(name, Some(p));
            provision(holder, &key).await?;
            workers.push(Handover {
                holder: holder.clone(),
                waiter: waiter.clone(),
                key,
                guarded,
            });
        }
        all.extend(runner::measure(&[name], workers, stop, warmup, events).await?.1);
    }
    Ok(all)
}

async fn provision(client: &Client, key: &str) -> Result<Provision, BenchError> {
    client
        .provision(key)
        .await
        .map_err(BenchError::client("provisioning a key"))
}

async fn connect_all(target: &ConnectionString, n: usize) -> Result<Vec<Connection>, BenchError> {
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        conns.push(target.connect().await?);
    }
    Ok(conns)
}

/// Deletes the run's keys and drops the scratch table; says what it could
/// not remove, and how to.
async fn clean_up(
    admin: &mut Connection,
    keys: &RunKeys,
    scratch: Option<&Scratch>,
    events: &mut dyn FnMut(Event<'_>),
) -> bool {
    let mut clean = true;
    if let Err(reason) = keys.delete(admin).await {
        clean = false;
        events(Event::Note(format!(
            "the bench's keys under '{}' are left in fence.Resource (a deploy login can delete them): {reason}",
            keys.root
        )));
    }
    if let Some(scratch) = scratch
        && let Err(reason) = scratch.drop(admin).await
    {
        clean = false;
        events(Event::Note(format!(
            "the scratch table {} is left behind: {reason}",
            scratch.table
        )));
    }
    clean
}
