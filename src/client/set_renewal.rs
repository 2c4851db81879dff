//! How a set guard keeps its set renewed: one `RenewSet` for the whole set
//! about every third of its length, hedged and retried on a transient error
//! as a single guard's renewal is, until some margin before the set would
//! end on the local clock.
//!
//! One `RenewSet` per set rather than each key through the client's renewal
//! batching (`RenewMany`): the set's keys share one owner and one expiry,
//! and `RenewSet` renews them all or none, naming the keys lost, in one
//! round trip whatever the set's size. `RenewMany` locks its rows in no
//! promised order, so beside another set call on the same keys it could
//! deadlock (contract, lease sets), and it would let the keys' expiries
//! drift apart.

use std::time::Duration;

use tokio::sync::{Mutex, watch};
use tokio::time::Instant;

use super::guard::{LostReason, loss_margin};
use super::hedged_renew::{Renewal, hedged};
use super::{Client, LeaseSet, RenewSet};

/// Why a set was given up as lost: a set is lost as a whole when any of its
/// keys is.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetLost {
    /// The first key (in lock order) the renewal found lost, when a renewal
    /// answered `Lost`; `None` when no renewal was confirmed in time.
    pub key: Option<String>,
    /// Why, as a single guard says it.
    pub reason: LostReason,
}

impl std::fmt::Display for SetLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.key {
            Some(key) => write!(f, "the set's key {key:?} was lost: {}", self.reason),
            None => write!(f, "the set was lost: {}", self.reason),
        }
    }
}

/// What the renewals share with the guard.
#[derive(Clone)]
pub(crate) struct HeldSet {
    /// The set as last confirmed.
    pub(crate) set: LeaseSet,
    /// Set once, when the set is lost.
    pub(crate) lost: Option<SetLost>,
}

/// Renews `state`'s set until it is lost; never returns while it is held.
/// A fenced transaction of the guard holds `row` while it is open, and the
/// renewal waits for it rather than queue behind its own holder's lock.
pub(crate) async fn keep_set_renewed(client: &Client, state: &watch::Sender<HeldSet>, row: &Mutex<()>) -> SetLost {
    let mut set = state.borrow().set.clone();
    let length = set.length();
    let period = length / 3;
    let retry_pause = (period / 4).max(Duration::from_millis(50));
    let ahead = loss_margin(length);
    loop {
        let give_up = set.local_deadline() - ahead;
        let next = set.local_deadline() - length + period;
        tokio::time::sleep_until(next.min(give_up)).await;
        let Ok(_row) = tokio::time::timeout_at(give_up, row.lock()).await else {
            return unconfirmed(None);
        };
        if Instant::now() >= give_up {
            return unconfirmed(None);
        }
        if let Err(lost) = renew_by(client, &mut set, give_up, retry_pause).await {
            return lost;
        }
        state.send_modify(|held| held.set = set.clone());
    }
}

/// One renewal of `set`, confirmed by `give_up` or not at all: hedged as a
/// single guard's renewal is (a second attempt on another connection when
/// the first is slow to answer, see `hedged_renew`), so one connection gone
/// silent does not lose the set.
async fn renew_by(client: &Client, set: &mut LeaseSet, give_up: Instant, retry_pause: Duration) -> Result<(), SetLost> {
    let renew_once = |mut set: LeaseSet| async move {
        let answer = client.renew_set(&mut set).await?;
        Ok(match answer {
            RenewSet::Renewed { .. } => Ok(set),
            RenewSet::Lost { lost } => Err(lost),
        })
    };
    let what = format!("the lease set of owner {}", set.owner());
    // A renewal cut short leaves `set` as it was: it is changed only once
    // an answer said `Renewed`.
    match hedged(client, set, &what, give_up, retry_pause, renew_once).await {
        Renewal::Renewed(renewed) => {
            *set = renewed;
            Ok(())
        }
        Renewal::Lost(lost) => Err(SetLost {
            key: lost.into_iter().next(),
            reason: LostReason::Renewal,
        }),
        Renewal::Failed(error) => Err(unconfirmed(Some(error.to_string()))),
        Renewal::Unanswered { last_error } => Err(unconfirmed(last_error)),
    }
}

fn unconfirmed(last_error: Option<String>) -> SetLost {
    let waited = "no set renewal was answered before the set would end".to_string();
    SetLost {
        key: None,
        reason: LostReason::Unconfirmed {
            last_error: last_error.or(Some(waited)),
        },
    }
}
