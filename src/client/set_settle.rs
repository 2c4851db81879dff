//! Settling a set publish whose reply was lost: sending the same publishes
//! again, with the same operation ids, which the fence answers once and for
//! all (`AlreadyPublished` for each key if the first send committed).

use uuid::Uuid;

use super::settle::Unresolved;
use super::{Client, Error, KeyPublish, LeaseSet, PublishSet};

/// A set publish-and-release that may have committed: an attempt reached
/// the server (or may have), and no reply said how it ended. Pass it to
/// [`Client::settle_set`].
#[derive(Debug)]
pub struct UnsettledSet {
    pub(crate) set: LeaseSet,
    /// Each key's operation id and payload, in the set's lock order.
    pub(crate) publishes: Vec<(String, Uuid, String)>,
    pub(crate) reason: Error,
}

impl UnsettledSet {
    /// The set the publish was made under.
    pub fn lease_set(&self) -> &LeaseSet {
        &self.set
    }

    /// Each key's publish, as it was sent: a replay must present the same.
    pub fn publishes(&self) -> Vec<KeyPublish<'_>> {
        self.publishes
            .iter()
            .map(|(key, operation_id, payload)| KeyPublish {
                key,
                operation_id: *operation_id,
                payload,
            })
            .collect()
    }

    /// The last failure met while trying to learn the outcome.
    pub fn reason(&self) -> &Error {
        &self.reason
    }
}

impl Client {
    /// Settles a set publish [`run_fenced_set`](Client::run_fenced_set) left
    /// [`FencedSet::Unknown`](super::FencedSet::Unknown) by sending the same
    /// publishes again, as [`settle`](Client::settle) does for one key:
    /// `Accepted` with every key `AlreadyPublished` means the first send
    /// committed (`Published` that it had not, and the set was still held,
    /// so it is published now, once); `Refused` that nothing was or ever
    /// will be published under these operation ids. `Err` settles nothing:
    /// call it again later.
    pub async fn settle_set(&self, unsettled: &UnsettledSet) -> Result<PublishSet, Error> {
        self.publish_set_and_release(&unsettled.set, &unsettled.publishes())
            .await
    }

    /// Publishes under every key and releases; while the outcome stays
    /// unknown or a transient error got in the way, replays the same
    /// publishes until the set would end locally, and once more, by the
    /// rules of [`publish_resolved`](Client::publish_resolved).
    pub(crate) async fn publish_set_resolved(
        &self,
        set: &LeaseSet,
        publishes: &[KeyPublish<'_>],
    ) -> Result<PublishSet, Unresolved> {
        let attempt = || self.publish_set_and_release(set, publishes);
        self.replays(set.length(), set.local_deadline(), attempt).await
    }
}
