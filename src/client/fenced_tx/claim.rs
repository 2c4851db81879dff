//! What a guard's fenced transaction holds of its guard: the right to be the
//! guard's one open transaction, and the renewal lock.
//!
//! The fence row's lock is the transaction's while it is open, so any other
//! call of the same guard that needs the row (a second transaction, a
//! publish) would wait on its own holder until it gave up. Such a call is
//! refused at once instead, and the guard's renewals wait on the renewal
//! lock rather than queue on the row.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{Mutex, OwnedMutexGuard};

use super::Lease;

/// The guard's lease as last confirmed.
pub(crate) type CurrentLease = Box<dyn Fn() -> Lease + Send + Sync>;

/// A guard's claim on its fence row for one fenced transaction: taken when
/// the transaction is asked for, given up when it ends (or never began).
pub(crate) struct Claim {
    renewals: Arc<Mutex<()>>,
    open: Arc<AtomicBool>,
    /// Read once the renewals are held, so the transaction lasts until the
    /// lease's deadline as last renewed, not as it was when it was asked for.
    current: CurrentLease,
    /// The renewal lock, once taken; dropped after `open` is cleared.
    held: Option<OwnedMutexGuard<()>>,
}

impl Claim {
    /// The claim for a new transaction, or `None` while another transaction
    /// of the same guard is open.
    pub(crate) fn take(renewals: &Arc<Mutex<()>>, open: &Arc<AtomicBool>, current: CurrentLease) -> Option<Claim> {
        if open.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(Claim {
            renewals: renewals.clone(),
            open: open.clone(),
            current,
            held: None,
        })
    }

    /// Waits for a renewal in flight to end and keeps the renewals waiting
    /// until the transaction ends. Taken once the transaction's connection
    /// is checked out, never before: a renewal must not wait for the pool.
    /// Answers the lease as the last renewal left it, which no renewal
    /// changes from then on.
    pub(crate) async fn hold_renewals(&mut self) -> Lease {
        if self.held.is_none() {
            self.held = Some(self.renewals.clone().lock_owned().await);
        }
        (self.current)()
    }
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("held", &self.held.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.open.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_is_refused_until_the_first_ends() {
        let renewals = Arc::new(Mutex::new(()));
        let open = Arc::new(AtomicBool::new(false));
        let first = Claim::take(
            &renewals,
            &open,
            Box::new(|| Lease::for_test(std::time::Duration::from_secs(1))),
        )
        .expect("the first claim");
        assert!(
            Claim::take(
                &renewals,
                &open,
                Box::new(|| Lease::for_test(std::time::Duration::from_secs(1)))
            )
            .is_none()
        );
        drop(first);
        assert!(
            Claim::take(
                &renewals,
                &open,
                Box::new(|| Lease::for_test(std::time::Duration::from_secs(1)))
            )
            .is_some()
        );
    }

    #[tokio::test]
    async fn a_claim_holds_the_renewals_until_it_ends_and_reads_the_lease_once_it_holds_them() {
        let renewals = Arc::new(Mutex::new(()));
        let open = Arc::new(AtomicBool::new(false));
        let current = Lease::for_test(std::time::Duration::from_secs(1));
        let owner = current.owner();
        let mut claim = Claim::take(&renewals, &open, Box::new(move || current.clone())).unwrap();
        assert!(renewals.try_lock().is_ok(), "held before it was asked to");
        assert_eq!(claim.hold_renewals().await.owner(), owner);
        assert!(renewals.try_lock().is_err());
        drop(claim);
        assert!(renewals.try_lock().is_ok());
        assert!(!open.load(Ordering::Acquire));
    }
}
