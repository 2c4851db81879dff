//! The lease-set calls (contract v1.8): several keys acquired, renewed,
//! published and released by one owner in one call each, all or nothing.

use std::time::Duration;

use tokio::time::Instant;
use uuid::Uuid;

use super::call::Reply;
use super::contract::Procedure;
use super::error::Error;
use super::lease_set::{keys_json, leases_json};
use super::outcome;
use super::parameter::Parameter;
use super::set_outcome::{AcquireSet, KeyPublish, KeyRefusal, PublishSet, RenewSet};
use super::span::About;
use super::wait::{Retries, later, retry_acquire};
use super::{Client, Lease, LeaseSet, Publish, Release, input};

/// The pause before the first retry of an `AcquireSet` whose reply was lost,
/// doubled up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const MAX_PAUSE: Duration = Duration::from_secs(2);

impl Client {
    /// Tries to take every key of `keys` for `length` (whole seconds, 1 s
    /// to 1 day) with one fresh owner, all or nothing, without waiting while
    /// a key is busy. Each key gets its own new generation. An attempt whose
    /// reply was lost is sent again as the same owner, which confirms the
    /// grant (each key it holds keeps its generation) rather than leaving
    /// keys held by nobody. At most 1000 keys, each once.
    pub async fn acquire_set(&self, keys: &[&str], length: Duration) -> Result<AcquireSet, Error> {
        let retries = Retries::until(self.confirm_until(Instant::now(), length));
        self.acquire_set_retrying(keys, Uuid::new_v4(), length, retries).await
    }

    /// [`acquire_set_as`](Client::acquire_set_as), sent again as the same
    /// owner after a transient failure, until `retries` ends: a reply that
    /// may have been lost is confirmed (a wait for a row given up then
    /// included: only an answer to the same owner rules out the lost
    /// attempt's grant).
    pub(super) async fn acquire_set_retrying(
        &self,
        keys: &[&str],
        owner: Uuid,
        length: Duration,
        retries: Retries,
    ) -> Result<AcquireSet, Error> {
        let mut pause = FIRST_PAUSE;
        let mut reached = false;
        loop {
            match self.acquire_set_attempt(keys, owner, length).await {
                // Its transaction rolled back: nothing was granted, unless an
                // earlier attempt's reply was lost.
                Err(error) if error.gave_up_waiting_for_the_row() && !reached => return Ok(AcquireSet::RowHeld),
                Err(error)
                    if retry_acquire(&error, &mut reached) && later(Instant::now(), pause) < retries.end(reached) =>
                {
                    tracing::debug!(%owner, %error, "acquire of a set failed; retrying with the same owner");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                other => return other,
            }
        }
    }

    /// Tries once to take every key of `keys` as `owner`, all or nothing.
    /// Sending it again with the same owner and keys confirms the grant:
    /// each key this owner still holds keeps its generation and its lease is
    /// extended, as [`acquire_as`](Client::acquire_as) answers a retry. A
    /// wait for a fence row given up is [`AcquireSet::RowHeld`]. The attempt
    /// runs to its end on a task of its own: a caller that stops waiting
    /// for it leaves no key held, as a set granted after it was gone is
    /// given back (a set this owner held already and the call extended
    /// included).
    pub async fn acquire_set_as(&self, keys: &[&str], owner: Uuid, length: Duration) -> Result<AcquireSet, Error> {
        match self.acquire_set_attempt(keys, owner, length).await {
            Err(error) if error.gave_up_waiting_for_the_row() => Ok(AcquireSet::RowHeld),
            other => other,
        }
    }

    /// One attempt, run to its end on a task of its own; a wait for a row
    /// given up is the error it is.
    async fn acquire_set_attempt(&self, keys: &[&str], owner: Uuid, length: Duration) -> Result<AcquireSet, Error> {
        let (json, _) = keys_json(keys)?;
        let owner = input::owner(owner)?;
        let seconds = input::lease_seconds(length)?;
        let client = self.clone();
        let count = keys.len();
        self.to_its_end(Procedure::AcquireSet, async move {
            client.acquire_set_once(json, owner, length, seconds, count).await
        })
        .await
    }

    /// One `AcquireSet` of `count` keys, checked already, and its answer.
    async fn acquire_set_once(
        &self,
        json: String,
        owner: Uuid,
        length: Duration,
        seconds: i32,
        count: usize,
    ) -> Result<AcquireSet, Error> {
        let sent_at = Instant::now();
        let replies = self
            .call_rows(Procedure::AcquireSet, &[&json, &owner, &seconds], About::default())
            .await?;
        expect_rows(Procedure::AcquireSet, &replies, count)?;
        if replies.iter().all(|reply| reply.outcome().ok() == Some("Acquired")) {
            let leases = replies
                .iter()
                .map(|reply| {
                    Ok(Lease::new(
                        reply.required::<&str>("ResourceKey")?,
                        owner,
                        reply.required("Generation")?,
                        length,
                        reply.required_utc("LeaseUntilUtc")?,
                        sent_at,
                    ))
                })
                .collect::<Result<Vec<_>, Error>>()?;
            return Ok(AcquireSet::Acquired(LeaseSet::new(leases)));
        }
        let refused = replies
            .iter()
            .map(|reply| Ok((key_of(reply)?, key_refusal(reply)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(AcquireSet::Refused(refused))
    }

    /// Extends every key of `set` by its length from now (server clock), or
    /// none: a holder that lost one key has lost the set. On `Renewed` the
    /// set's expiry and local deadline move forward.
    pub async fn renew_set(&self, set: &mut LeaseSet) -> Result<RenewSet, Error> {
        let seconds = input::lease_seconds(set.length())?;
        let json = leases_json(set, |_, _| {});
        let sent_at = Instant::now();
        let replies = self
            .call_rows(Procedure::RenewSet, &[&json, &set.owner(), &seconds], About::default())
            .await?;
        expect_rows(Procedure::RenewSet, &replies, set.leases().len())?;
        let mut lost = Vec::new();
        let mut until = None;
        for reply in &replies {
            match reply.outcome()? {
                "Renewed" => until = Some(reply.required_utc("LeaseUntilUtc")?),
                "Lost" => lost.push(key_of(reply)?),
                "Withheld" => {}
                _ => return Err(reply.unknown_outcome()),
            }
        }
        match until {
            Some(until) if lost.is_empty() => {
                set.renewed(until, sent_at);
                Ok(RenewSet::Renewed { until })
            }
            _ => Ok(RenewSet::Lost { lost }),
        }
    }

    /// Gives back every key of `set` the owner still holds, each as
    /// [`release`](Client::release) gives one back: a key taken over answers
    /// `NotHolder` and its successor's lease is left as it is.
    pub async fn release_set(&self, set: &LeaseSet) -> Result<Vec<(String, Release)>, Error> {
        let json = leases_json(set, |_, _| {});
        let replies = self
            .call_rows(Procedure::ReleaseSet, &[&json, &set.owner()], About::default())
            .await?;
        expect_rows(Procedure::ReleaseSet, &replies, set.leases().len())?;
        replies
            .iter()
            .map(|reply| {
                let answer = match reply.outcome()? {
                    "Released" => Release::Released,
                    "NotHolder" => Release::NotHolder,
                    _ => return Err(reply.unknown_outcome()),
                };
                Ok((key_of(reply)?, answer))
            })
            .collect()
    }

    /// Publishes one payload under each key of `set`, all or nothing, each
    /// judged as [`publish`](Client::publish) judges one: one refusal
    /// refuses all, and the answer names each key and why. `publishes`
    /// names every key of the set once. If no reply came back, the error is
    /// [`Error::OutcomeUnknown`] (naming the first operation id): send the
    /// same publishes again, which answers `AlreadyPublished` for those that
    /// committed.
    pub async fn publish_set(&self, set: &LeaseSet, publishes: &[KeyPublish<'_>]) -> Result<PublishSet, Error> {
        self.publish_set_with(set, publishes, false).await
    }

    /// [`publish_set`](Client::publish_set) and, when accepted, every lease
    /// of the set given back in the same transaction.
    pub async fn publish_set_and_release(
        &self,
        set: &LeaseSet,
        publishes: &[KeyPublish<'_>],
    ) -> Result<PublishSet, Error> {
        self.publish_set_with(set, publishes, true).await
    }

    async fn publish_set_with(
        &self,
        set: &LeaseSet,
        publishes: &[KeyPublish<'_>],
        release: bool,
    ) -> Result<PublishSet, Error> {
        let ordered = publishes_in_set_order(set, publishes)?;
        let json = leases_json(set, |i, json| {
            let publish = ordered[i];
            json.push_str(&format!(
                ",\"OperationId\":\"{}\",\"Payload\":",
                publish.operation_id.hyphenated()
            ));
            super::json_text::push_json_string(json, publish.payload);
        });
        let first = ordered[0].operation_id;
        let replies = self
            .call_rows(
                Procedure::PublishSet,
                &[&json, &set.owner(), &release],
                About::default().operation(first),
            )
            .await
            .map_err(|error| super::api::unknown_if_unanswered(error, first))?;
        expect_rows(Procedure::PublishSet, &replies, ordered.len())
            .map_err(|error| super::api::unknown_if_unanswered(error, first))?;
        // A row that cannot be read may belong to a publish that committed:
        // PublishSet commits before it answers.
        let unreadable = |error| super::api::unknown_if_unanswered(error, first);
        let mut accepted = Vec::with_capacity(replies.len());
        let mut refused = Vec::with_capacity(replies.len());
        for reply in &replies {
            let key = key_of(reply).map_err(unreadable)?;
            match reply.outcome().map_err(unreadable)? {
                "Published" => accepted.push((key, Publish::Published)),
                "AlreadyPublished" => accepted.push((key, Publish::AlreadyPublished)),
                "Withheld" => refused.push((key, None)),
                name => match outcome::refusal(name) {
                    Some(reason) => refused.push((key, Some(reason))),
                    None => return Err(unreadable(reply.unknown_outcome())),
                },
            }
        }
        if refused.is_empty() {
            return Ok(PublishSet::Accepted(accepted));
        }
        // A refused set changed nothing; a key answered as accepted there
        // was a replay, which stays what it was.
        refused.extend(accepted.into_iter().map(|(key, _)| (key, None)));
        Ok(PublishSet::Refused(refused))
    }
}

/// `publishes` in the order of the set's leases, each key of the set once.
fn publishes_in_set_order<'p, 'a>(
    set: &LeaseSet,
    publishes: &'p [KeyPublish<'a>],
) -> Result<Vec<&'p KeyPublish<'a>>, Error> {
    if publishes.len() != set.leases().len() {
        return Err(Error::invalid(
            Parameter::Leases,
            format!(
                "must publish under each of the set's {} keys once, not {} publishes",
                set.leases().len(),
                publishes.len()
            ),
        ));
    }
    set.keys()
        .map(|key| {
            let publish = publishes.iter().find(|p| p.key == key).ok_or_else(|| {
                Error::invalid(Parameter::Leases, format!("has no publish for the set's key {key:?}"))
            })?;
            input::operation_id(publish.operation_id)?;
            Ok(publish)
        })
        .collect()
}

/// A set procedure answers one row per key it was given.
fn expect_rows(procedure: Procedure, replies: &[Reply], keys: usize) -> Result<(), Error> {
    if replies.len() == keys {
        return Ok(());
    }
    Err(Error::UnexpectedReply {
        procedure: procedure.name(),
        detail: format!("{} rows for {keys} keys", replies.len()),
    })
}

fn key_of(reply: &Reply) -> Result<String, Error> {
    Ok(reply.required::<&str>("ResourceKey")?.to_string())
}

fn key_refusal(reply: &Reply) -> Result<KeyRefusal, Error> {
    Ok(match reply.outcome()? {
        "Busy" => {
            let server_utc = reply.required_utc("ServerUtc")?;
            let until = reply.utc("LeaseUntilUtc")?.unwrap_or(server_utc);
            KeyRefusal::Busy {
                until,
                remaining: outcome::remaining(until, server_utc),
            }
        }
        "NotProvisioned" => KeyRefusal::NotProvisioned,
        "Withheld" => KeyRefusal::Withheld,
        _ => return Err(reply.unknown_outcome()),
    })
}
