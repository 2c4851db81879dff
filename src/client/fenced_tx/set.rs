//! A fenced transaction over a lease set (contract v1.8): `AssertHolderSet`
//! asserts every key at the begin and again in the batch that commits, so
//! the service's writes commit only while the whole set is held, by the
//! same rules as a transaction fenced by one lease.

use super::{BeginFenced, Claim, Fence, begin_fence};
use crate::client::{Client, Error, LeaseSet};

/// Begins a transaction fenced by every lease of `set`, holding a set
/// guard's `claim` if any. The transaction lasts at most until the set's
/// local deadline, which every key shares; a refusal of any key
/// (superseded, expired, no fence row) is answered as a single lease's is.
pub(crate) async fn begin_set<'c>(
    client: &'c Client,
    set: &LeaseSet,
    claim: Option<Claim>,
) -> Result<BeginFenced<'c>, Error> {
    let first = set.leases()[0].clone();
    begin_fence(client, &first, claim, Fence::Set(set)).await
}
