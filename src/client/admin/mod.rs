//! The operators' half of the contract, `fence_admin`: list leases, fence
//! out a stuck holder, read and prune the tenure history, recover after a
//! restore, reset a resource's source version, retire a key and prune the
//! outcome records (contract v1.6). Each call is typed, with an
//! outcome enum for what the procedure answers, and runs as every client call
//! does: bounded by the client's timeouts, in an OpenTelemetry-shaped span,
//! measured, its errors sorted by what the caller should do.
//!
//! The calls hang off an [`Admin`], which [`Client::admin`] hands out:
//!
//! ```no_run
//! # async fn operator() -> Result<(), fencepost::client::Error> {
//! use fencepost::Client;
//! use fencepost::client::admin::ForceRelease;
//!
//! let client = Client::connect("Server=tcp:db,1433;Database=app;User ID=ops;Password=...;Encrypt=true").await?;
//! let admin = client.admin();
//! match admin.force_release("report:daily").await? {
//!     ForceRelease::Fenced { generation } => println!("fenced; generation is now {generation}"),
//!     ForceRelease::NotProvisioned => println!("no fence row"),
//!     other => println!("{other:?}"),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The commands that change a key, [`Admin::force_release`],
//! [`Admin::reset_source_version`] and [`Admin::retire`], carry an operation id (contract v1.5):
//! one whose reply is lost is replayed with the same id, and applies once.
//! Their `_as` variants take the id, to send again a command whose outcome
//! stayed unknown ([`Error::OperatorOutcomeUnknown`]).
//!
//! The procedures are granted to operator roles, not to `fence_service`:
//! `fence_operator` may list, force-release, read the history, reset a
//! source version and retire a key; `fence_recovery` may recover and prune
//! (the history and the outcome records) (and list and read
//! the history); `fence_reader` may read the history.

pub(crate) mod blockers;
mod force_release;
mod history;
mod leases;
mod operation;
mod prune_outcomes;
mod recover;
mod retire;
mod slots;
mod source_version;
mod watched;

// The fake answers its calls with rows built the same way.
#[cfg(any(test, feature = "fake"))]
pub(in crate::client) mod test_rows;

pub use force_release::ForceRelease;
pub use history::{Ending, History, LeaseHistory, Prune, Tenure};
pub use leases::{Inspected, LeasePage, LeaseQuery, ListedLease};
pub use prune_outcomes::PruneOutcomes;
pub use recover::{Recover, Recovery, RecoveryRecord};
pub use retire::{RETIRE_REFUSED_HELD, Retire};
pub use slots::{Slot, Slots};
pub use source_version::ResetSourceVersion;
pub use watched::{ForceReleased, WhenBlocked};

pub use super::input::{MAX_PRUNE_DAYS, MAX_RECOVERY_FLOOR, MAX_ROWS};

use super::{Client, Error};

/// The operators' calls on a client's pool: a view of the [`Client`] it came
/// from, sharing its connections, settings, spans and metrics. Cloning is
/// cheap.
///
/// Kept apart from `Client`'s own methods because the two halves of the
/// contract are granted to different roles: a service sees only what its
/// role may call, and an operator's call says so where it is made.
#[derive(Clone, Debug)]
pub struct Admin {
    client: Client,
}

impl Client {
    /// The operators' calls (`fence_admin`) on this client's pool. The
    /// login needs an operator role for them (see [`admin`](crate::client::admin)).
    pub fn admin(&self) -> Admin {
        Admin { client: self.clone() }
    }
}

impl Admin {
    /// The client these calls run on.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The operators' start-up check: each `fence_admin` procedure this
    /// login can see has the parameters these calls pass, at least one is
    /// visible, and the deployed contract version, where the login may read
    /// it, is one this client speaks. The catalog shows a login only the
    /// procedures granted to it, so one it cannot see is not reported
    /// missing. Unlike [`Client::verify_contract`] it needs no `fence_api`
    /// procedure and does not judge the login's rights: operators often run
    /// as the deploy login.
    pub async fn verify_contract(&self) -> Result<(), Error> {
        self.client.verify_operator_contract().await
    }
}
