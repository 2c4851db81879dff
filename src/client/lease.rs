//! A held lease: what a renew, publish or release presents to the fence.

use std::time::Duration;

use time::OffsetDateTime;
use tokio::time::Instant;
use uuid::Uuid;

/// A lease returned by `Acquire`. Owner and generation together are what the
/// fence checks, so `Debug` leaves the owner out.
///
/// Two clocks are kept apart on purpose. [`until`](Lease::until) is the
/// server's expiry, on the server clock, for display and diagnostics.
/// [`local_deadline`](Lease::local_deadline) is a conservative local estimate
/// for scheduling: the instant the request was *sent* plus the lease length,
/// which is never later than the server's expiry, whatever the skew between
/// the two clocks.
#[derive(Clone)]
pub struct Lease {
    key: String,
    owner: Uuid,
    generation: i64,
    length: Duration,
    until: OffsetDateTime,
    local_deadline: Instant,
}

impl Lease {
    pub(crate) fn new(
        key: &str,
        owner: Uuid,
        generation: i64,
        length: Duration,
        until: OffsetDateTime,
        sent_at: Instant,
    ) -> Self {
        Lease {
            key: key.to_string(),
            owner,
            generation,
            length,
            until,
            local_deadline: sent_at + length,
        }
    }

    /// A lease of `length` on key `k` at generation 1, for a fresh owner,
    /// taken now: what the client's unit tests hold.
    #[cfg(test)]
    pub(crate) fn for_test(length: Duration) -> Self {
        Lease::for_test_key("k", length)
    }

    /// [`for_test`](Lease::for_test) on key `key`.
    #[cfg(test)]
    pub(crate) fn for_test_key(key: &str, length: Duration) -> Self {
        Lease::new(
            key,
            Uuid::new_v4(),
            1,
            length,
            OffsetDateTime::UNIX_EPOCH,
            Instant::now(),
        )
    }

    /// Records a successful renewal sent at `sent_at`.
    pub(crate) fn renewed(&mut self, until: OffsetDateTime, sent_at: Instant) {
        self.until = until;
        self.local_deadline = sent_at + self.length;
    }

    /// The resource key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The owner id presented with this lease.
    pub fn owner(&self) -> Uuid {
        self.owner
    }

    /// The generation this acquisition raised the resource to.
    pub fn generation(&self) -> i64 {
        self.generation
    }

    /// The lease length asked for; renewals ask for the same.
    pub fn length(&self) -> Duration {
        self.length
    }

    /// The expiry on the server clock (`LeaseUntilUtc`), from the last
    /// acquire or renew.
    pub fn until(&self) -> OffsetDateTime {
        self.until
    }

    /// The local instant by which the lease has certainly ended unless renewed:
    /// when the last acquire or renew was sent, plus the lease length.
    pub fn local_deadline(&self) -> Instant {
        self.local_deadline
    }

    /// Time left before [`local_deadline`](Lease::local_deadline).
    pub fn remaining(&self) -> Duration {
        self.local_deadline.saturating_duration_since(Instant::now())
    }

    /// How the tenure history (`fencepost lease history`, `OwnerHash`)
    /// shows this lease's owner: SHA-256 of its upper-case text, in hex. A
    /// service can log it to find its own tenures later; it cannot be turned
    /// back into the owner id.
    pub fn owner_hash(&self) -> String {
        owner_hash(self.owner)
    }
}

/// SHA-256 of an owner id's upper-case text, as the procedures hash it.
fn owner_hash(owner: Uuid) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(owner.hyphenated().to_string().to_uppercase().as_bytes()))
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("key", &self.key)
            .field("generation", &self.generation)
            .field("length", &self.length)
            .field("until", &self.until)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_hash_is_what_the_engine_computes() {
        // HASHBYTES('SHA2_256', CAST(UPPER(CAST(@Owner AS char(36))) AS varchar(36)))
        // for this owner, as SQL Server and Babelfish answer it.
        let owner = Uuid::parse_str("6f9619ff-8b86-d011-b42d-00c04fc964ff").unwrap();
        assert_eq!(
            owner_hash(owner),
            "2da8e55aecc39527121ca55dc0e9430e0b54cbfc814942e1806987642e3167b5"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_local_deadline_counts_from_when_the_request_was_sent() {
        let sent = Instant::now();
        tokio::time::advance(Duration::from_millis(300)).await;
        let mut lease = Lease::new(
            "k",
            Uuid::new_v4(),
            1,
            Duration::from_secs(3),
            OffsetDateTime::UNIX_EPOCH,
            sent,
        );
        assert_eq!(lease.local_deadline(), sent + Duration::from_secs(3));
        assert_eq!(lease.remaining(), Duration::from_millis(2700));
        let renew_sent = Instant::now();
        lease.renewed(OffsetDateTime::UNIX_EPOCH, renew_sent);
        assert_eq!(lease.local_deadline(), renew_sent + Duration::from_secs(3));
    }

    #[test]
    fn debug_output_leaves_the_owner_out() {
        let owner = Uuid::new_v4();
        let lease = Lease::new(
            "k",
            owner,
            7,
            Duration::from_secs(3),
            OffsetDateTime::UNIX_EPOCH,
            Instant::now(),
        );
        let shown = format!("{lease:?}");
        assert!(!shown.contains(&owner.to_string()), "{shown}");
        assert!(shown.contains("generation: 7"), "{shown}");
    }
}
