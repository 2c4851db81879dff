//! The fence's workloads, through `fencepost::Client` as a service calls it.
//! Requests are the client's own count of the calls it made, so a waiting
//! acquire's retries are counted too.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::BenchError;
use super::runner::{Step, Worker};
use crate::Client;
use crate::client::{Acquire, Lease, Publish, Release, Renew};

/// Long enough that no lease of `cycle` or `renew` runs out mid-run.
const LEASE: Duration = Duration::from_secs(30);
/// `contended`'s lease: the shortest there is, so that a waiting acquire,
/// which sleeps until the holder's lease would run out (at most a second),
/// wakes soon after a release.
pub(crate) const CONTENDED_LEASE: Duration = Duration::from_secs(1);
/// How long a `contended` worker waits for the key before it gives up.
const CONTENDED_WAIT: Duration = Duration::from_secs(60);
/// `contended_guarded`'s work: how long a holder keeps the key before it
/// publishes, a job's worth, long enough for its guard to raise the handover
/// signal its waiters block on (see `client::handover`).
pub(crate) const CONTENDED_WORK: Duration = Duration::from_millis(20);
const PAYLOAD: &str = "bench";

/// Times `call` and counts the requests it sent on `client`.
async fn step<T>(client: &Client, call: impl Future<Output = T>) -> (T, Step) {
    let (sent, started) = (client.requests_sent(), Instant::now());
    let value = call.await;
    let step = Step {
        elapsed: started.elapsed(),
        requests: client.requests_sent() - sent,
    };
    (value, step)
}

/// `cycle`: acquire → publish → release on the worker's own key, reported as
/// `acquire`, `publish` and `release`; then the cycle `run_fenced` runs,
/// acquire → publish releasing in the same call, reported as `fenced_cycle`.
pub(crate) struct Cycle {
    pub client: Client,
    pub key: String,
}

pub(crate) const CYCLE_SCENARIOS: [&str; 4] = ["acquire", "publish", "release", "fenced_cycle"];

impl Cycle {
    async fn acquire(&self) -> Result<(Lease, Step), BenchError> {
        let (acquired, acquire) = step(&self.client, self.client.acquire(&self.key, LEASE)).await;
        match acquired.map_err(BenchError::client("acquire"))? {
            Acquire::Acquired(lease) => Ok((lease, acquire)),
            other => Err(BenchError::unexpected("acquire", format!("{other:?}"))),
        }
    }
}

impl Worker for Cycle {
    async fn operation(&mut self) -> Result<Vec<Step>, BenchError> {
        let client = &self.client;
        let (lease, acquire) = self.acquire().await?;
        let (published, publish) = step(client, client.publish(&lease, Uuid::new_v4(), PAYLOAD)).await;
        match published.map_err(BenchError::client("publish"))? {
            Publish::Published => {}
            other => return Err(BenchError::unexpected("publish", format!("{other:?}"))),
        }
        let (released, release) = step(client, client.release(&lease)).await;
        match released.map_err(BenchError::client("release"))? {
            Release::Released => {}
            other => return Err(BenchError::unexpected("release", format!("{other:?}"))),
        }

        let (lease, fenced_acquire) = self.acquire().await?;
        let (published, fenced_publish) =
            step(client, client.publish_and_release(&lease, Uuid::new_v4(), PAYLOAD)).await;
        match published.map_err(BenchError::client("fenced_cycle: publish_and_release"))? {
            Publish::Published => {}
            other => return Err(BenchError::unexpected("fenced_cycle", format!("{other:?}"))),
        }
        let cycle = Step {
            elapsed: fenced_acquire.elapsed + fenced_publish.elapsed,
            requests: fenced_acquire.requests + fenced_publish.requests,
        };
        Ok(vec![acquire, publish, release, cycle])
    }
}

/// `contended`: every worker on one key, each taking it with a waiting
/// acquire, publishing and releasing. An operation is that whole cycle,
/// waiting included.
pub(crate) struct Contended {
    pub client: Client,
    pub key: String,
}

/// `contended_guarded`: every worker on one key as a job queue's workers
/// are, each taking it with a waiting acquire, holding it in a guard for
/// [`CONTENDED_WORK`], then publishing and releasing it in one call, early:
/// the waiters wake on the guard's handover signal instead of polling. An
/// operation is that whole cycle, waiting and work included.
pub(crate) struct ContendedGuarded {
    pub client: Client,
    pub key: String,
}

impl Worker for ContendedGuarded {
    async fn operation(&mut self) -> Result<Vec<Step>, BenchError> {
        let client = &self.client;
        let work = async {
            let lease = match client
                .acquire_waiting(&self.key, LEASE, CONTENDED_WAIT)
                .await
                .map_err(BenchError::client("contended_guarded: acquire_waiting"))?
            {
                Acquire::Acquired(lease) => lease,
                other => return Err(BenchError::unexpected("contended_guarded", format!("{other:?}"))),
            };
            let guard = client.guard(lease);
            tokio::time::sleep(CONTENDED_WORK).await;
            match guard
                .publish_and_release(Uuid::new_v4(), PAYLOAD)
                .await
                .map_err(BenchError::client("contended_guarded: publish_and_release"))?
            {
                Publish::Published => Ok(()),
                other => Err(BenchError::unexpected("contended_guarded", format!("{other:?}"))),
            }
        };
        let (result, whole) = step(client, work).await;
        result?;
        Ok(vec![whole])
    }
}

impl Worker for Contended {
    async fn operation(&mut self) -> Result<Vec<Step>, BenchError> {
        let client = &self.client;
        let work = async {
            let lease = match client
                .acquire_waiting(&self.key, CONTENDED_LEASE, CONTENDED_WAIT)
                .await
                .map_err(BenchError::client("contended: acquire_waiting"))?
            {
                Acquire::Acquired(lease) => lease,
                other => return Err(BenchError::unexpected("contended", format!("{other:?}"))),
            };
            // A refusal is still the round trip being measured: on a busy
            // machine the one-second lease may run out before the publish.
            let _answered = client
                .publish(&lease, Uuid::new_v4(), PAYLOAD)
                .await
                .map_err(BenchError::client("contended: publish"))?;
            // NotHolder after a refused publish is the same round trip.
            let _released = client
                .release(&lease)
                .await
                .map_err(BenchError::client("contended: release"))?;
            Ok(())
        };
        let (result, whole) = step(client, work).await;
        result?;
        Ok(vec![whole])
    }
}

/// `renew`: a holder renewing its lease on its own key, again and again.
pub(crate) struct Renewing {
    pub client: Client,
    pub lease: Lease,
}

impl Renewing {
    /// Takes the lease the worker will renew (not measured).
    pub(crate) async fn start(client: Client, key: String) -> Result<Renewing, BenchError> {
        match client
            .acquire(&key, LEASE)
            .await
            .map_err(BenchError::client("renew: acquire"))?
        {
            Acquire::Acquired(lease) => Ok(Renewing { client, lease }),
            other => Err(BenchError::unexpected("renew", format!("acquire answered {other:?}"))),
        }
    }

    /// Gives the lease up after the run.
    pub(crate) async fn finish(self) -> Result<(), BenchError> {
        // The run is over either way; a lease that lapsed needs nothing.
        let _released = self
            .client
            .release(&self.lease)
            .await
            .map_err(BenchError::client("renew: release"))?;
        Ok(())
    }
}

impl Worker for Renewing {
    async fn operation(&mut self) -> Result<Vec<Step>, BenchError> {
        let client = &self.client;
        let (renewed, renew) = step(client, client.renew(&mut self.lease)).await;
        match renewed.map_err(BenchError::client("renew"))? {
            Renew::Renewed { .. } => Ok(vec![renew]),
            Renew::Lost => Err(BenchError::unexpected("renew", "the lease was lost")),
        }
    }
}
