//! Runs one workload on every worker at once: warm-up, then a measured
//! phase that starts for all workers at the same instant and ends after a
//! duration or a number of operations.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::Barrier;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::report::Scenario;
use super::stats::round;
use super::stats::{Latencies, Percentiles};
use super::usage;
use super::{BenchError, Event, Stop};

/// One timed part of an operation, and the requests it sent.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Step {
    pub elapsed: Duration,
    pub requests: u64,
}

/// A worker: one connection's worth of a workload. `operation` answers one
/// [`Step`] per scenario name the workload reports, in that order.
pub(crate) trait Worker: Send + 'static {
    fn operation(&mut self) -> impl Future<Output = Result<Vec<Step>, BenchError>> + Send;
}

/// What every worker shares.
struct Shared {
    stop: Stop,
    warmup: u32,
    barrier: Barrier,
    /// When measuring started, and the process's CPU time then.
    start: OnceLock<(Instant, Option<Duration>)>,
    tickets: AtomicU64,
    measured: AtomicU64,
}

/// What one worker measured.
struct Tally<W> {
    worker: W,
    samples: Vec<Latencies>,
    requests: Vec<u64>,
    finished: Instant,
}

/// Runs `workers` and reports one scenario per name in `names`. The workers
/// come back so their owner can clean up after them.
pub(crate) async fn measure<W: Worker>(
    names: &[&str],
    workers: Vec<W>,
    stop: Stop,
    warmup: u32,
    events: &mut dyn FnMut(Event<'_>),
) -> Result<(Vec<W>, Vec<Scenario>), BenchError> {
    let label = names.last().copied().unwrap_or_default();
    let shared = Arc::new(Shared {
        stop,
        warmup,
        barrier: Barrier::new(workers.len()),
        start: OnceLock::new(),
        tickets: AtomicU64::new(0),
        measured: AtomicU64::new(0),
    });
    let mut set = JoinSet::new();
    for worker in workers {
        set.spawn(drive(worker, names.len(), shared.clone()));
    }
    let mut ticks = tokio::time::interval(Duration::from_millis(250));
    let mut tallies = Vec::new();
    loop {
        tokio::select! {
            joined = set.join_next() => match joined {
                None => break,
                // Dropping the set on return aborts the other workers, which
                // may be waiting at the barrier for the one that failed.
                Some(Ok(result)) => tallies.push(result?),
                Some(Err(panic)) => return Err(BenchError::unexpected(label, panic)),
            },
            _ = ticks.tick() => events(Event::Progress {
                scenario: label,
                operations: shared.measured.load(Ordering::Relaxed),
                elapsed: shared.start.get().map(|(s, _)| s.elapsed()),
            }),
        }
    }
    let cpu_spent = usage::cpu_time();
    let (start, cpu_at_start) = shared.start.get().copied().unwrap_or_else(|| (Instant::now(), None));
    let cpu = cpu_at_start.zip(cpu_spent).map(|(from, to)| to.saturating_sub(from));
    let wall = tallies
        .iter()
        .map(|t| t.finished.saturating_duration_since(start))
        .max()
        .unwrap_or_default();
    let all_requests: u64 = tallies.iter().flat_map(|t| t.requests.iter()).sum();
    let scenarios = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let mut latencies = Latencies::default();
            for tally in &tallies {
                latencies.merge(&tally.samples[i]);
            }
            let requests: u64 = tallies.iter().map(|t| t.requests[i]).sum();
            // A workload that reports several scenarios spent its CPU on all
            // of them: each gets the share its requests sent.
            let share = if all_requests == 0 {
                0.0
            } else {
                requests as f64 / all_requests as f64
            };
            let cpu = cpu.map(|c| c.mul_f64(share));
            summarize(name, &latencies, requests, wall, cpu)
        })
        .collect();
    Ok((tallies.into_iter().map(|t| t.worker).collect(), scenarios))
}

fn summarize(name: &str, latencies: &Latencies, requests: u64, wall: Duration, cpu: Option<Duration>) -> Scenario {
    let operations = latencies.len();
    let p = Percentiles::of(latencies);
    let per_op = |v: f64| if operations == 0 { 0.0 } else { v / operations as f64 };
    Scenario {
        name: name.to_string(),
        operations,
        ops_per_s: round(operations as f64 / wall.as_secs_f64().max(1e-9), 1),
        p50_ms: round(p.p50_ms, 3),
        p95_ms: round(p.p95_ms, 3),
        p99_ms: round(p.p99_ms, 3),
        max_ms: round(p.max_ms, 3),
        round_trips_per_op: round(per_op(requests as f64), 2),
        client_cpu_us_per_op: cpu.map(|c| round(per_op(c.as_secs_f64() * 1e6), 1)),
        ratio_to: Default::default(),
    }
}

async fn drive<W: Worker>(mut worker: W, steps: usize, shared: Arc<Shared>) -> Result<Tally<W>, BenchError> {
    // Warm-up is not counted: a session's first calls compile plans (about
    // half a second per procedure on Babelfish).
    for _ in 0..shared.warmup {
        worker.operation().await?;
    }
    shared.barrier.wait().await;
    let (start, _) = *shared.start.get_or_init(|| (Instant::now(), usage::cpu_time()));
    let mut samples = vec![Latencies::default(); steps];
    let mut requests = vec![0; steps];
    loop {
        let more = match shared.stop {
            Stop::Duration(length) => start.elapsed() < length,
            Stop::Operations(total) => shared.tickets.fetch_add(1, Ordering::Relaxed) < total,
        };
        if !more {
            break;
        }
        for (i, step) in worker.operation().await?.into_iter().enumerate().take(steps) {
            samples[i].record(step.elapsed);
            requests[i] += step.requests;
        }
        shared.measured.fetch_add(1, Ordering::Relaxed);
    }
    Ok(Tally {
        worker,
        samples,
        requests,
        finished: Instant::now(),
    })
}
