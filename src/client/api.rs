//! One method per `fence_api` procedure. Each checks its input, makes exactly
//! one call, and turns the single row into a typed outcome.

use tiberius::ToSql;
use tokio::time::Instant;
use tracing::Instrument;
use uuid::Uuid;

use super::call::{Reply, call, call_on};
use super::contract::Procedure;
use super::error::Error;
use super::meter;
use super::outcome::{self, LeaseState};
use super::pool::Session;
use super::signal_loan::Loan;
use super::span::{self, About};
use super::{
    Acquire, Client, Inspection, Lease, OperationOutcome, Provision, Publication, Publish, Release, Renew, input,
};

impl Client {
    /// Calls `procedure` and returns its one row, observed as every call is:
    /// counted, in its span, and measured.
    pub(crate) async fn call(
        &self,
        procedure: Procedure,
        arguments: &[&dyn ToSql],
        about: About<'_>,
    ) -> Result<Reply, Error> {
        let mut replies = self.call_rows(procedure, arguments, about).await?;
        // `call_on` answers exactly one row for a procedure that does not
        // answer rows.
        Ok(replies.swap_remove(0))
    }

    /// Calls a procedure that answers any number of rows, and returns them.
    pub(crate) async fn call_rows(
        &self,
        procedure: Procedure,
        arguments: &[&dyn ToSql],
        about: About<'_>,
    ) -> Result<Vec<Reply>, Error> {
        #[cfg(feature = "fake")]
        if let Some(fake) = self.as_fake() {
            let exchange = Box::pin(fake.call_rows(&self.config, procedure, arguments));
            return self.observed(procedure, about, exchange).await;
        }
        let pool = self.pool_for(procedure);
        // On the heap, so the futures that nest calls (run_fenced's publish
        // inside its replays inside its guard) stay small on the stack.
        let exchange = Box::pin(call(pool, &self.last_connect_error, &self.config, procedure, arguments));
        self.observed(procedure, about, exchange).await
    }

    /// Calls `procedure` on `session`, which the caller holds (its server
    /// session is watched from another), observed as every call is.
    pub(crate) async fn call_on(
        &self,
        session: &mut Session,
        procedure: Procedure,
        arguments: &[&dyn ToSql],
        about: About<'_>,
    ) -> Result<Vec<Reply>, Error> {
        #[cfg(feature = "fake")]
        if let Some(fake) = self.as_fake() {
            let exchange = Box::pin(fake.call_rows(&self.config, procedure, arguments));
            return self.observed(procedure, about, exchange).await;
        }
        let exchange = Box::pin(call_on(session, &self.config, procedure, arguments));
        self.observed(procedure, about, exchange).await
    }

    /// Runs `exchange`, one call of `procedure`: counted when it starts, in
    /// its span, and measured by how it ended.
    pub(super) async fn observed(
        &self,
        procedure: Procedure,
        about: About<'_>,
        exchange: impl Future<Output = Result<Vec<Reply>, Error>>,
    ) -> Result<Vec<Reply>, Error> {
        self.requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // The main pool's, whichever pool this call uses.
        meter::pool(&self.pool);
        let waiting = about.waiting;
        let span = span::call_span(&self.config, procedure, about);
        let started = Instant::now();
        let replies = exchange.instrument(span.clone()).await;
        let unreadable;
        let ended = match &replies {
            // Every row of a procedure that answers rows says `Found`, so an
            // answer without rows ended as that too.
            Ok(replies) => match replies.first().map_or(Ok("Found"), Reply::outcome) {
                Ok(outcome) => Ok(outcome),
                Err(error) => {
                    unreadable = error;
                    Err(&unreadable)
                }
            },
            Err(error) => Err(error),
        };
        span::record_end(&span, ended);
        meter::call_ended(&self.config, procedure, started.elapsed(), ended, waiting);
        replies
    }

    /// Creates the fence row for `key` if it does not exist. Never resets a
    /// generation.
    pub async fn provision(&self, key: &str) -> Result<Provision, Error> {
        let key = input::key(key)?;
        let reply = self.call(Procedure::Provision, &[&key], About::key(key)).await?;
        match reply.outcome()? {
            "Created" => Ok(Provision::Created),
            "Exists" => Ok(Provision::Exists),
            _ => Err(reply.unknown_outcome()),
        }
    }

    /// Tries to take the lease on `key` for `length` (whole seconds, 1 s to
    /// 1 day) with a fresh owner id, without waiting while it is busy. An
    /// attempt whose reply was lost is retried as the same owner, as
    /// [`acquire_waiting`](Client::acquire_waiting) does, so a grant nobody
    /// heard of is confirmed rather than left blocking the key. Another
    /// transaction that holds the key's fence row longer than `Acquire` waits
    /// for it (5 s) is `Busy` with nothing `remaining`, never an error.
    pub async fn acquire(&self, key: &str, length: std::time::Duration) -> Result<Acquire, Error> {
        let until = self.confirm_until(Instant::now(), length);
        self.acquire_retrying(key, Uuid::new_v4(), length, until).await
    }

    /// Tries once to take the lease as `owner`. Retrying with the same owner
    /// while it still holds the lease answers `Acquired` with the same
    /// generation and extends the lease, so a call whose reply was lost can be
    /// retried safely. A wait for the fence row given up is `Busy`, as in
    /// [`acquire`](Client::acquire).
    pub async fn acquire_as(&self, key: &str, owner: Uuid, length: std::time::Duration) -> Result<Acquire, Error> {
        match self.acquire_timed(key, owner, length).await {
            Ok((answer, _)) => Ok(answer),
            // Its transaction rolled back: nothing was granted.
            Err(error) if error.gave_up_waiting_for_the_row() => Ok(Acquire::busy_end_unknown()),
            Err(error) => Err(error),
        }
    }

    /// [`acquire_as`](Client::acquire_as), with the local instant just before
    /// the request was sent: what a `Busy`'s `remaining` counts from.
    pub(crate) async fn acquire_timed(
        &self,
        key: &str,
        owner: Uuid,
        length: std::time::Duration,
    ) -> Result<(Acquire, Instant), Error> {
        let key = input::key(key)?;
        let owner = input::owner(owner)?;
        let seconds = input::lease_seconds(length)?;
        // Taken before the request leaves, so the local deadline is never
        // later than the server's. A waiter timed from it may wake a little
        // early (by the latency and any lock wait), which costs one more
        // `Busy`, never a grant before the holder's end.
        let sent_at = Instant::now();
        let reply = self
            .call(Procedure::Acquire, &[&key, &owner, &seconds], About::key(key))
            .await?;
        Ok((acquire_answer(&reply, key, owner, length, sent_at)?, sent_at))
    }

    /// Extends `lease` by its length from now (server clock). On `Renewed`
    /// the lease's expiry and local deadline move forward.
    pub async fn renew(&self, lease: &mut Lease) -> Result<Renew, Error> {
        let seconds = input::lease_seconds(lease.length())?;
        let sent_at = Instant::now();
        let reply = self
            .call(
                Procedure::Renew,
                &[&lease.key(), &lease.owner(), &lease.generation(), &seconds],
                About::lease(lease),
            )
            .await?;
        match reply.outcome()? {
            "Renewed" => {
                let until = reply.required_utc("LeaseUntilUtc")?;
                lease.renewed(until, sent_at);
                Ok(Renew::Renewed { until })
            }
            "Lost" => Ok(Renew::Lost),
            _ => Err(reply.unknown_outcome()),
        }
    }

    /// Publishes `payload` under `lease`, the fenced write. `operation_id`
    /// must be fresh for each publish; reuse it only to replay this same
    /// publish, which then answers `AlreadyPublished`.
    ///
    /// If the request may have reached the server but no reply came back, the
    /// error is [`Error::OutcomeUnknown`]; resolve it with
    /// [`outcome`](Client::outcome) or by replaying.
    pub async fn publish(&self, lease: &Lease, operation_id: Uuid, payload: &str) -> Result<Publish, Error> {
        self.publish_with(lease, operation_id, payload, false, None, None).await
    }

    /// Publishes as [`publish`](Client::publish) does, a result built from
    /// version `source_version` (0 or more) of its source (contract v1.4):
    /// besides the lease, the fence refuses it as
    /// [`RefusalReason::StaleSource`](super::RefusalReason::StaleSource) when
    /// the resource already holds a result or a fenced write from a newer
    /// version. An equal version is accepted (a rebuild of the same source),
    /// and an accepted publish raises the resource's source version to this
    /// one. Ownership is judged
    /// first: `StaleSource` only ever answers the current holder.
    pub async fn publish_versioned(
        &self,
        lease: &Lease,
        operation_id: Uuid,
        payload: &str,
        source_version: i64,
    ) -> Result<Publish, Error> {
        self.publish_with(lease, operation_id, payload, false, Some(source_version), None)
            .await
    }

    /// [`publish_versioned`](Client::publish_versioned) and, when accepted,
    /// the lease given back in the same call. `StaleSource` keeps the lease
    /// held: release it, or publish again from a fresher source.
    pub async fn publish_versioned_and_release(
        &self,
        lease: &Lease,
        operation_id: Uuid,
        payload: &str,
        source_version: i64,
    ) -> Result<Publish, Error> {
        self.publish_with(lease, operation_id, payload, true, Some(source_version), None)
            .await
    }

    /// Publishes as [`publish`](Client::publish) does and, when the publish is
    /// accepted, gives the lease back in the same transaction: a whole
    /// acquire-publish-release cycle in two calls. A refused publish changes
    /// nothing, and the lease stays as it was. A replay answers
    /// `AlreadyPublished`; the first arrival already released.
    pub async fn publish_and_release(
        &self,
        lease: &Lease,
        operation_id: Uuid,
        payload: &str,
    ) -> Result<Publish, Error> {
        self.publish_with(lease, operation_id, payload, true, None, None).await
    }

    pub(crate) async fn publish_with(
        &self,
        lease: &Lease,
        operation_id: Uuid,
        payload: &str,
        release: bool,
        source_version: Option<i64>,
        loan: Option<Loan>,
    ) -> Result<Publish, Error> {
        let operation_id = input::operation_id(operation_id)?;
        let source_version = input::source_version(source_version)?;
        let reply = self
            .last_call(
                Procedure::Publish,
                &[
                    &lease.key(),
                    &lease.owner(),
                    &lease.generation(),
                    &operation_id,
                    &payload,
                    &release,
                    &source_version,
                ],
                About::lease(lease).operation(operation_id),
                loan,
            )
            .await
            .map_err(|error| unknown_if_unanswered(error, operation_id))?;
        // Publish commits before it answers: an outcome that cannot be read,
        // like one this client does not know, may hide a commit.
        let decoded = match reply.outcome() {
            Ok("Published") => Ok(Publish::Published),
            Ok("AlreadyPublished") => Ok(Publish::AlreadyPublished),
            Ok(name) => match outcome::refusal(name) {
                Some(reason) => Ok(Publish::Refused(reason)),
                None => Err(reply.unknown_outcome()),
            },
            Err(unreadable) => Err(unreadable),
        };
        decoded.map_err(|error| unknown_if_unanswered(error, operation_id))
    }

    /// Gives `lease` up early. A superseded holder gets `NotHolder` and changes
    /// nothing.
    pub async fn release(&self, lease: &Lease) -> Result<Release, Error> {
        self.release_via(lease, None).await
    }

    /// [`release`](Client::release), on the session `loan` lent when there
    /// is one (a guard's, which lets go of its handover signal in the same
    /// request: see `signal_loan`).
    pub(crate) async fn release_via(&self, lease: &Lease, loan: Option<Loan>) -> Result<Release, Error> {
        let reply = self
            .last_call(
                Procedure::Release,
                &[&lease.key(), &lease.owner(), &lease.generation()],
                About::lease(lease),
                loan,
            )
            .await?;
        match reply.outcome()? {
            "Released" => Ok(Release::Released),
            "NotHolder" => Ok(Release::NotHolder),
            _ => Err(reply.unknown_outcome()),
        }
    }

    /// Whether the publish with `operation_id` committed. `Unknown` is final
    /// only once that publish can no longer arrive: a first send that is
    /// still waiting for the fence row's lock commits after this answer. To
    /// settle an unknown outcome for good, replay the publish instead.
    pub async fn outcome(&self, operation_id: Uuid) -> Result<OperationOutcome, Error> {
        let operation_id = input::operation_id(operation_id)?;
        let reply = self
            .call(
                Procedure::GetOutcome,
                &[&operation_id],
                About::default().operation(operation_id),
            )
            .await?;
        match reply.outcome()? {
            "Published" => Ok(OperationOutcome::Published {
                resource_key: reply.required::<&str>("ResourceKey")?.to_string(),
                generation: reply.required("Generation")?,
                published_at: reply.required_utc("PublishedAtUtc")?,
                source_version: reply.get("SourceVersion")?,
            }),
            "Unknown" => Ok(OperationOutcome::Unknown),
            _ => Err(reply.unknown_outcome()),
        }
    }

    /// The last accepted publication of `key`.
    pub async fn read_publication(&self, key: &str) -> Result<Publication, Error> {
        let key = input::key(key)?;
        let reply = self.call(Procedure::ReadPublication, &[&key], About::key(key)).await?;
        match reply.outcome()? {
            "Found" => match reply.get::<i64>("PublishedGeneration")? {
                None => Ok(Publication::NothingPublished),
                Some(generation) => Ok(Publication::Found {
                    generation,
                    payload: reply.required::<&str>("Payload")?.to_string(),
                    published_at: reply.required_utc("PublishedAtUtc")?,
                    source_version: reply.get("SourceVersion")?,
                }),
            },
            "NotProvisioned" => Ok(Publication::NotProvisioned),
            _ => Err(reply.unknown_outcome()),
        }
    }

    /// The lease state of `key`, without its owner.
    pub async fn inspect(&self, key: &str) -> Result<Inspection, Error> {
        let key = input::key(key)?;
        let reply = self.call(Procedure::Inspect, &[&key], About::key(key)).await?;
        inspection(&reply)
    }
}

/// What `Inspect`'s row says.
pub(crate) fn inspection(reply: &Reply) -> Result<Inspection, Error> {
    match reply.outcome()? {
        "Found" => Ok(Inspection::Found(lease_state(reply)?)),
        "NotProvisioned" => Ok(Inspection::NotProvisioned),
        _ => Err(reply.unknown_outcome()),
    }
}

/// A resource's lease state, from a row of `Inspect` or `fence_admin.ListLeases`
/// (the same columns).
pub(crate) fn lease_state(reply: &Reply) -> Result<LeaseState, Error> {
    Ok(LeaseState {
        generation: reply.required("Generation")?,
        is_held: reply.required("IsHeld")?,
        lease_until: reply.utc("LeaseUntilUtc")?,
        published_generation: reply.get("PublishedGeneration")?,
        server_utc: reply.required_utc("ServerUtc")?,
        source_version: reply.get("SourceVersion")?,
    })
}

/// A publish that failed after it may have been sent has an unknown outcome.
/// Errors raised before sending (bad input, no connection) and errors the
/// server reported (it answered: the procedure did not commit) stay as they are.
pub(crate) fn unknown_if_unanswered(error: Error, operation_id: Uuid) -> Error {
    match error {
        Error::Network { reason, .. } => Error::OutcomeUnknown { operation_id, reason },
        Error::UnexpectedReply { detail, .. } => Error::OutcomeUnknown {
            operation_id,
            reason: detail,
        },
        other => other,
    }
}

/// What an `Acquire` row answered, for `owner` asking for `length` in a
/// request sent at `sent_at` (what the lease's local deadline counts from).
pub(super) fn acquire_answer(
    reply: &Reply,
    key: &str,
    owner: Uuid,
    length: std::time::Duration,
    sent_at: Instant,
) -> Result<Acquire, Error> {
    match reply.outcome()? {
        "Acquired" => Ok(Acquire::Acquired(Lease::new(
            key,
            owner,
            reply.required("Generation")?,
            length,
            reply.required_utc("LeaseUntilUtc")?,
            sent_at,
        ))),
        "Busy" => {
            let server_utc = reply.required_utc("ServerUtc")?;
            // NULL from an earlier `Acquire` that gave up waiting for the row
            // on SQL Server while the committed row had no holder: the end is
            // unknown, so nothing remains, as `LeaseUntilUtc` = `ServerUtc`
            // says from the `Acquire` shipped now.
            let until = reply.utc("LeaseUntilUtc")?.unwrap_or(server_utc);
            Ok(Acquire::Busy {
                until,
                remaining: outcome::remaining(until, server_utc),
            })
        }
        "NotProvisioned" => Ok(Acquire::NotProvisioned),
        _ => Err(reply.unknown_outcome()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use time::OffsetDateTime;

    use super::*;
    use crate::client::admin::test_rows::{big, reply, text, utc};

    fn busy(until: Option<OffsetDateTime>, server_utc: OffsetDateTime) -> Reply {
        reply(
            Procedure::Acquire,
            vec![
                text("Outcome", Some("Busy")),
                big("Generation", None),
                utc("LeaseUntilUtc", until),
                utc("ServerUtc", Some(server_utc)),
            ],
        )
    }

    fn answer(reply: &Reply) -> Result<Acquire, Error> {
        acquire_answer(reply, "k", Uuid::new_v4(), Duration::from_secs(30), Instant::now())
    }

    #[test]
    fn a_busy_without_an_expiry_has_nothing_left_as_of_the_servers_answer() {
        let server_utc = OffsetDateTime::UNIX_EPOCH + Duration::from_secs(3600);
        match answer(&busy(None, server_utc)) {
            Ok(Acquire::Busy { until, remaining }) => {
                assert_eq!(until, server_utc);
                assert_eq!(remaining, Duration::ZERO);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_busy_with_an_expiry_has_the_time_left_on_the_server_clock() {
        let server_utc = OffsetDateTime::UNIX_EPOCH + Duration::from_secs(3600);
        let expiry = server_utc + Duration::from_secs(7);
        match answer(&busy(Some(expiry), server_utc)) {
            Ok(Acquire::Busy { until, remaining }) => {
                assert_eq!(until, expiry);
                assert_eq!(remaining, Duration::from_secs(7));
            }
            other => panic!("{other:?}"),
        }
    }
}
