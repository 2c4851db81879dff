//! `held`: what holding many leases at once costs, however many. One client
//! holds N guards of 30 s for a window of at least a renewal period, and the
//! run reports the sessions it has open on the server, the calls it sends a
//! second (procedure calls, and the requests of its handover signal
//! sessions), the server's CPU for its sessions where the engine counts it,
//! and its memory per lease. Beside it, in the same run, the same guards
//! renewing one `Renew` each, as guards did before they renewed together.

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream;
use serde::Serialize;
use tokio::time::Instant;

use super::keys::RunKeys;
use super::stats::round;
use super::usage;
use super::{BenchError, Event, Stop};
use crate::client::{Acquire, LeaseGuard, Release};
use crate::{Client, ClientConfig, Connection, ConnectionString};

/// The guards' lease: a service's ordinary one.
const LEASE: Duration = Duration::from_secs(30);
/// The shortest window: a renewal period (a third of the lease) and a tick.
const MIN_WINDOW: Duration = Duration::from_secs(11);
/// How often the client's sessions are counted during the window.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);

/// How a run's guards renew.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Renewals {
    /// The renewals due in one tick in one `RenewMany` call (what a client
    /// does).
    Together,
    /// One `Renew` call per renewal (the baseline: guards before contract
    /// v1.7).
    OneByOne,
}

/// One measured row of `held`.
#[derive(Clone, Debug, Serialize)]
pub struct Held {
    /// Guards the client held at once.
    pub guards: u32,
    /// How they renewed.
    pub renewals: Renewals,
    /// The measured window, in seconds.
    pub window_s: f64,
    /// The most sessions the client had open on the server during the
    /// window (sampled every second).
    pub server_sessions: Option<u32>,
    /// Procedure calls per second during the window (renewals, as counted
    /// by `Client::requests_sent`).
    pub calls_per_s: f64,
    /// Requests per second on the sessions holding the handover signals.
    pub signal_requests_per_s: f64,
    /// The server's CPU time for the client's sessions per held lease per
    /// second, in microseconds, from the engine's own counters
    /// (`sys.dm_exec_sessions.cpu_time`); `null` where the engine keeps
    /// none (Babelfish reports NULL).
    pub server_cpu_us_per_lease_s: Option<f64>,
    /// The client's resident memory per lease, in bytes: the growth from
    /// before the acquisitions to the end of the window, over the guards;
    /// `null` where the platform cannot tell.
    pub client_bytes_per_lease: Option<f64>,
    /// Guards whose lease was lost during the window (0 unless something
    /// went wrong).
    pub lost: u32,
}

/// Runs `held` for each size in `sizes`, each with its baseline, on keys
/// provisioned once for the largest.
pub(crate) async fn run(
    target: &ConnectionString,
    keys: &RunKeys,
    sizes: &[u32],
    workers: usize,
    stop: Stop,
    events: &mut dyn FnMut(Event<'_>),
) -> Result<Vec<Held>, BenchError> {
    let window = match stop {
        Stop::Duration(duration) => duration.max(MIN_WINDOW),
        Stop::Operations(_) => MIN_WINDOW,
    };
    let most = sizes.iter().copied().max().unwrap_or(0) as usize;
    let names: Vec<String> = (0..most).map(|i| keys.key("held", Some(i))).collect();
    let setup = client(target, &format!("fencepost bench held {}", keys.run), workers).await?;
    events(Event::Note(format!("held: provisioning {most} keys")));
    let provisioned: Vec<_> = stream::iter(&names)
        .map(|key| setup.provision(key))
        .buffer_unordered(workers.max(1))
        .collect()
        .await;
    for answer in provisioned {
        answer.map_err(BenchError::client("held: provisioning a key"))?;
    }
    drop(setup);
    let mut admin = target.connect().await?;
    let babelfish = is_babelfish(&mut admin).await?;
    let mut rows = Vec::new();
    for &size in sizes {
        for renewals in [Renewals::Together, Renewals::OneByOne] {
            events(Event::Note(format!("held: {size} guards, renewing {renewals:?}")));
            let name = format!("fencepost bench held {} {size} {renewals:?}", keys.run);
            let client = client(target, &name, workers).await?;
            if renewals == Renewals::OneByOne {
                client.renew_each_lease_alone();
            }
            let row = hold(
                &client,
                &names[..size as usize],
                renewals,
                workers,
                window,
                Engine {
                    admin: &mut admin,
                    name: &name,
                    babelfish,
                },
                events,
            )
            .await?;
            rows.push(row);
        }
    }
    Ok(rows)
}

/// A client of `workers` connections named `name` on the server.
async fn client(target: &ConnectionString, name: &str, workers: usize) -> Result<Client, BenchError> {
    let mut named = target.clone();
    named.set_application_name(name);
    let mut config = ClientConfig::new(named);
    config
        .max_connections(u32::try_from(workers).unwrap_or(u32::MAX))
        .allow_privileged_login(true);
    Client::connect_with(config)
        .await
        .map_err(BenchError::client("held: connecting"))
}

/// Where the client's sessions are counted.
struct Engine<'a> {
    admin: &'a mut Connection,
    /// The client's application name.
    name: &'a str,
    babelfish: bool,
}

/// One row: acquires a guard on each key, holds them all for `window`, and
/// gives them back.
async fn hold(
    client: &Client,
    keys: &[String],
    renewals: Renewals,
    workers: usize,
    window: Duration,
    engine: Engine<'_>,
    events: &mut dyn FnMut(Event<'_>),
) -> Result<Held, BenchError> {
    let before = usage::resident_kib();
    let guards = acquire_guards(client, keys, LEASE, workers).await?;
    let Engine { admin, name, babelfish } = engine;
    let (calls, signals) = (client.requests_sent(), client.signal_requests_sent());
    let cpu = server_cpu_ms(admin, name, babelfish).await?;
    events(Event::Note(format!(
        "held: {} guards acquired, holding them for {} s",
        guards.len(),
        window.as_secs()
    )));
    let started = Instant::now();
    let mut sessions = None;
    while started.elapsed() < window {
        let open = server_sessions(admin, name, babelfish).await?;
        sessions = sessions.max(Some(open));
        tokio::time::sleep(SAMPLE_EVERY.min(window.saturating_sub(started.elapsed()))).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = match (cpu, server_cpu_ms(admin, name, babelfish).await?) {
        (Some(first), Some(last)) => Some(last.saturating_sub(first)),
        _ => None,
    };
    let after = usage::resident_kib();
    let calls = client.requests_sent() - calls;
    let signals = client.signal_requests_sent() - signals;
    let lost = guards.iter().filter(|guard| guard.lost_reason().is_some()).count();
    let size = guards.len().max(1) as f64;
    let released: Vec<_> = stream::iter(guards)
        .map(LeaseGuard::release)
        .buffer_unordered(workers.max(1))
        .collect()
        .await;
    for answer in released {
        match answer.map_err(BenchError::client("held: releasing"))? {
            Release::Released | Release::NotHolder => {}
        }
    }
    Ok(Held {
        guards: keys.len() as u32,
        renewals,
        window_s: round(elapsed, 1),
        server_sessions: sessions,
        calls_per_s: round(calls as f64 / elapsed, 1),
        signal_requests_per_s: round(signals as f64 / elapsed, 1),
        server_cpu_us_per_lease_s: cpu.map(|ms| round(ms as f64 * 1000.0 / size / elapsed, 2)),
        client_bytes_per_lease: before
            .zip(after)
            .map(|(before, after)| round(after.saturating_sub(before) as f64 * 1024.0 / size, 0)),
        lost: lost as u32,
    })
}

/// A guard on each of `keys`, each made as soon as its lease is acquired:
/// acquiring thousands of keys can take longer than a lease, and a lease
/// left without its guard until the last one is acquired would end
/// unrenewed.
async fn acquire_guards(
    client: &Client,
    keys: &[String],
    lease: Duration,
    workers: usize,
) -> Result<Vec<LeaseGuard>, BenchError> {
    let acquired: Vec<_> = stream::iter(keys)
        .map(|key| async move {
            match client.acquire(key, lease).await {
                Ok(Acquire::Acquired(lease)) => Ok(client.guard(lease)),
                Ok(other) => Err(BenchError::unexpected("held", format!("an acquire answered {other:?}"))),
                Err(error) => Err(BenchError::client("held: acquiring")(error)),
            }
        })
        .buffer_unordered(workers.max(1))
        .collect()
        .await;
    acquired.into_iter().collect()
}

async fn is_babelfish(admin: &mut Connection) -> Result<bool, BenchError> {
    let row = admin
        .simple_query("SELECT CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL THEN 0 ELSE 1 END AS int);")
        .await
        .map_err(BenchError::server("held: asking the engine's name"))?
        .into_row()
        .await
        .map_err(BenchError::server("held: asking the engine's name"))?;
    Ok(row.and_then(|row| row.get::<i32, _>(0)) == Some(1))
}

/// The sessions open under the application name `name`: Babelfish lists
/// PostgreSQL's own (its sys.dm_exec_sessions was seen to leave one out
/// after another was killed).
async fn server_sessions(admin: &mut Connection, name: &str, babelfish: bool) -> Result<u32, BenchError> {
    let sql = if babelfish {
        "SELECT CAST(COUNT(*) AS int) FROM pg_catalog.pg_stat_activity WHERE application_name = @P1;"
    } else {
        "SELECT CAST(COUNT(*) AS int) FROM sys.dm_exec_sessions WHERE program_name = @P1;"
    };
    let row = admin
        .query(sql, &[&name])
        .await
        .map_err(BenchError::server("held: counting sessions"))?
        .into_row()
        .await
        .map_err(BenchError::server("held: counting sessions"))?;
    Ok(row
        .and_then(|row| row.get::<i32, _>(0))
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(0))
}

/// The CPU time, in milliseconds, of the sessions named `name`, as the
/// engine counts it; `None` where it does not (Babelfish).
async fn server_cpu_ms(admin: &mut Connection, name: &str, babelfish: bool) -> Result<Option<u64>, BenchError> {
    if babelfish {
        return Ok(None);
    }
    let row = admin
        .query(
            "SELECT CAST(SUM(CAST(cpu_time AS bigint)) AS bigint) FROM sys.dm_exec_sessions WHERE program_name = @P1;",
            &[&name],
        )
        .await
        .map_err(BenchError::server("held: reading the sessions' CPU time"))?
        .into_row()
        .await
        .map_err(BenchError::server("held: reading the sessions' CPU time"))?;
    Ok(row
        .and_then(|row| row.get::<i64, _>(0))
        .and_then(|ms| u64::try_from(ms).ok()))
}

#[cfg(all(test, feature = "fake"))]
mod tests {
    use super::*;
    use crate::client::Procedure;
    use crate::client::fake::Fault;

    /// Ten keys acquired one at a time, each acquisition a second long, take
    /// longer than their 6 s lease: every lease is guarded from its own
    /// acquisition on, so none has ended when the last is acquired, nor a
    /// renewal period later.
    #[tokio::test(start_paused = true)]
    async fn every_lease_is_guarded_from_its_acquisition_however_long_acquiring_them_all_takes() {
        let client = Client::fake();
        let keys: Vec<String> = (0..10).map(|i| format!("held-{i}")).collect();
        for key in &keys {
            client.provision(key).await.unwrap();
        }
        client
            .as_fake()
            .unwrap()
            .fail_every(Procedure::Acquire, Fault::Delay(Duration::from_secs(1)));
        let lease = Duration::from_secs(6);
        let started = Instant::now();
        let guards = acquire_guards(&client, &keys, lease, 1).await.unwrap();
        assert!(started.elapsed() > lease, "acquiring took {:?}", started.elapsed());
        tokio::time::sleep(lease / 3).await;
        let lost: Vec<_> = guards.iter().filter_map(LeaseGuard::lost_reason).collect();
        assert!(
            lost.is_empty(),
            "{} of {} guards lost their lease: {lost:?}",
            lost.len(),
            guards.len()
        );
        for guard in guards {
            assert_eq!(guard.release().await.unwrap(), Release::Released);
        }
    }
}
