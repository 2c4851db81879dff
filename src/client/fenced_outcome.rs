//! How a fenced transaction ended: what the closure form
//! ([`Client::fenced_transaction_without_guard`](super::Client::fenced_transaction_without_guard),
//! [`LeaseGuard::fenced_transaction`](super::LeaseGuard::fenced_transaction))
//! answers. The transaction itself is a [`FencedTx`](super::FencedTx).

use super::RefusalReason;

/// How a fenced transaction around a work ended, when no server or network
/// failure got in the way. Those are `Err`:
/// [`Error::CommitUnknown`](super::Error::CommitUnknown) when the commit's
/// answer was lost, [`Error::TransactionAborted`](super::Error::TransactionAborted)
/// when a statement failed and the work still returned `Ok` (nothing was
/// committed), and otherwise errors from before the work ran.
#[must_use]
#[non_exhaustive]
#[derive(Debug)]
pub enum FencedOutcome<T, E> {
    /// The lease was held and the transaction committed; `T` is what the
    /// work returned.
    Committed(T),
    /// The work returned an error; the transaction was rolled back.
    Failed(E),
    /// The fence refused the lease, before the work ran or when it came to
    /// commit (the lease is asserted again in the request that commits);
    /// nothing of the transaction was written either way.
    Refused(RefusalReason),
    /// The key has no fence row; nothing was written.
    NotProvisioned,
}

/// The former name of [`FencedOutcome`], kept so code written against 0.1
/// still compiles. `FencedTransaction` read as the transaction itself, which
/// is a [`FencedTx`](super::FencedTx).
#[deprecated(note = "renamed FencedOutcome")]
pub type FencedTransaction<T, E> = FencedOutcome<T, E>;
