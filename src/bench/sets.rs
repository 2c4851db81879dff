//! `sets`: what a lease set and a slot (contract v1.8) cost against taking
//! keys one by one. Each worker owns 32 keys; for 2, 8 and 32 of them it
//! takes the set in one `AcquireSet` call (`set_acquire_N`), gives it back
//! in one `ReleaseSet`, then takes the same keys with one `Acquire` each
//! (`single_acquires_N`) and gives them back one by one. Then it takes a
//! slot of a resource of its own with 4 and with 32 slots
//! (`slot_acquire_N`: `AcquireSlot` reads every slot row of the resource)
//! and one key with `Acquire` (`single_acquire`), releasing each. Only the
//! acquires are measured.

use std::time::Duration;

use tokio::time::Instant;

use super::BenchError;
use super::runner::{Step, Worker};
use crate::Client;
use crate::client::{Acquire, AcquireSet, AcquireSlot, Release};

/// The set sizes measured, each a pair of scenarios.
pub(crate) const SET_SIZES: [usize; 3] = [2, 8, 32];

/// The slot counts measured, each a resource of its own per worker.
pub(crate) const SLOT_COUNTS: [u32; 2] = [4, 32];

pub(crate) const SET_SCENARIOS: [&str; 9] = [
    "set_acquire_2",
    "single_acquires_2",
    "set_acquire_8",
    "single_acquires_8",
    "set_acquire_32",
    "single_acquires_32",
    "slot_acquire_4",
    "slot_acquire_32",
    "single_acquire",
];

/// Long enough that no lease runs out within an operation.
const LEASE: Duration = Duration::from_secs(30);

pub(crate) struct Sets {
    pub client: Client,
    /// The worker's own keys, at least the largest set size.
    pub keys: Vec<String>,
    /// The worker's own resources with slots, one for each of
    /// [`SLOT_COUNTS`], their slot keys provisioned.
    pub slot_resources: Vec<String>,
}

impl Sets {
    async fn set_acquire(&self, keys: &[&str]) -> Result<Step, BenchError> {
        let (sent, started) = (self.client.requests_sent(), Instant::now());
        let answer = self.client.acquire_set(keys, LEASE).await;
        let step = Step {
            elapsed: started.elapsed(),
            requests: self.client.requests_sent() - sent,
        };
        let set = match answer.map_err(BenchError::client("acquire_set"))? {
            AcquireSet::Acquired(set) => set,
            other => return Err(BenchError::unexpected("acquire_set", format!("{other:?}"))),
        };
        let released = self
            .client
            .release_set(&set)
            .await
            .map_err(BenchError::client("release_set"))?;
        if let Some((key, answer)) = released.iter().find(|(_, r)| *r != Release::Released) {
            return Err(BenchError::unexpected("release_set", format!("{key}: {answer:?}")));
        }
        Ok(step)
    }

    async fn single_acquires(&self, keys: &[&str]) -> Result<Step, BenchError> {
        let (sent, started) = (self.client.requests_sent(), Instant::now());
        let mut leases = Vec::with_capacity(keys.len());
        for key in keys {
            match self
                .client
                .acquire(key, LEASE)
                .await
                .map_err(BenchError::client("acquire"))?
            {
                Acquire::Acquired(lease) => leases.push(lease),
                other => return Err(BenchError::unexpected("acquire", format!("{other:?}"))),
            }
        }
        let step = Step {
            elapsed: started.elapsed(),
            requests: self.client.requests_sent() - sent,
        };
        for lease in &leases {
            self.release(lease).await?;
        }
        Ok(step)
    }

    async fn slot_acquire(&self, resource: &str, slots: u32) -> Result<Step, BenchError> {
        let (sent, started) = (self.client.requests_sent(), Instant::now());
        let answer = self.client.acquire_slot(resource, slots, LEASE).await;
        let step = Step {
            elapsed: started.elapsed(),
            requests: self.client.requests_sent() - sent,
        };
        let lease = match answer.map_err(BenchError::client("acquire_slot"))? {
            AcquireSlot::Acquired { lease, .. } => lease,
            other => return Err(BenchError::unexpected("acquire_slot", format!("{other:?}"))),
        };
        self.release(&lease).await?;
        Ok(step)
    }

    async fn release(&self, lease: &crate::client::Lease) -> Result<(), BenchError> {
        match self
            .client
            .release(lease)
            .await
            .map_err(BenchError::client("release"))?
        {
            Release::Released => Ok(()),
            other => Err(BenchError::unexpected("release", format!("{other:?}"))),
        }
    }
}

impl Worker for Sets {
    async fn operation(&mut self) -> Result<Vec<Step>, BenchError> {
        let mut steps = Vec::with_capacity(SET_SCENARIOS.len());
        for size in SET_SIZES {
            let keys: Vec<&str> = self.keys[..size].iter().map(String::as_str).collect();
            steps.push(self.set_acquire(&keys).await?);
            steps.push(self.single_acquires(&keys).await?);
        }
        for (resource, slots) in self.slot_resources.iter().zip(SLOT_COUNTS) {
            steps.push(self.slot_acquire(resource, slots).await?);
        }
        steps.push(self.single_acquires(&[self.keys[0].as_str()]).await?);
        Ok(steps)
    }
}
