//! A transaction on the service's own tables that also holds the fence row:
//! its writes commit only while the caller holds the current, unexpired
//! lease, and nothing it sends can run outside it.

use std::time::Duration;

use tiberius::{Row, ToSql};
use tokio::time::Instant;
use tracing::Instrument;

use super::call::{cancel_on_server, checkout, classify};
use super::contract::Procedure;
use super::error::Error;
use super::meter;
use super::pool::Manager;
use super::span::{self, About};
use super::{Client, Lease, LeaseSet, RefusalReason, input};

mod batches;
mod claim;
#[cfg(feature = "fake")]
mod fake;
mod set;

use batches::Engine;
pub(crate) use claim::Claim;
pub(crate) use set::begin_set;

/// What a fenced transaction asserts, at its begin and again at its commit.
pub(crate) enum Fence<'s> {
    /// One lease (`AssertHolder`), built from `source_version` if any.
    Lease { source_version: Option<i64> },
    /// Every lease of a set (`AssertHolderSet`).
    Set(&'s LeaseSet),
}

/// What errors of the work's statements name as their procedure.
const STATEMENT: &str = "a statement of a fenced transaction";

/// How [`LeaseGuard::begin_fenced`](super::LeaseGuard::begin_fenced) or
/// [`Client::begin_fenced_without_guard`] began.
#[must_use = "a fenced transaction that is not used rolls back when dropped"]
#[non_exhaustive]
#[derive(Debug)]
pub enum BeginFenced<'c> {
    /// The lease is held and its row locked until the transaction ends.
    Holding(FencedTx<'c>),
    /// The fence refused the lease; nothing was written.
    Refused(RefusalReason),
    /// The key has no fence row; nothing was written.
    NotProvisioned,
}

/// A transaction that holds the fence row's lock, so no successor can take
/// the lease until it ends; the work's statements run in it.
///
/// It runs with `XACT_ABORT ON`. After the first statement that fails, it
/// sends nothing more: later statements and [`commit`](FencedTx::commit)
/// answer [`Error::TransactionAborted`], and the server has rolled back.
///
/// The fence is checked where the writes become durable: the commit asserts
/// the lease again in the batch that commits, with the fence row locked
/// until the COMMIT, so nothing commits unless the caller holds the current,
/// unexpired lease at that moment, whatever the work's SQL did to its locks
/// (a rollback to a savepoint releases the locks taken after it, a COMMIT
/// releases them all). A refusal there rolls everything back and answers
/// [`Error::CommitRefused`]. Each statement also checks on the server,
/// before and after it runs, that it runs in the very transaction the lease
/// was asserted in (error 50115 otherwise), so SQL that commits or rolls
/// back by itself, and perhaps opens another transaction, cannot leave the
/// next statement to run unfenced. What such SQL committed by itself before
/// the check saw it is outside the fence: do not COMMIT or ROLLBACK in the
/// work's SQL. A statement that must come first in its batch (`CREATE
/// PROCEDURE`, ...) cannot be sent.
///
/// It lasts at most until the lease would end on the local clock (its
/// [`local_deadline`](Lease::local_deadline) when the transaction began), so
/// a service never holds the fence row without bound: a statement is given
/// no more than what is left of that, and past it statements and the commit
/// answer [`Error::TransactionAborted`] and the transaction is rolled back.
/// A transaction held open without a statement keeps the row until it is
/// committed, rolled back or dropped.
///
/// Dropping it without [`commit`](FencedTx::commit) rolls back: its
/// connection is closed and the server rolls the transaction back. A
/// connection that ran the work's SQL is never reused, since that SQL may
/// have changed its session (isolation level, `SET` options, an open
/// transaction) for the next lease call.
pub struct FencedTx<'c> {
    /// Boxed: a driver connection is large, and the outcome that carries the
    /// transaction should not be. `None` once closed after a statement whose
    /// reply was left unread (a time-out or a network failure): nothing more
    /// could be sent on it, and closing it is what rolls back.
    session: Option<Box<bb8::PooledConnection<'c, Manager>>>,
    lease: Lease,
    call_timeout: Duration,
    /// The lease's local deadline as the transaction began: nothing is sent
    /// past it.
    deadline: Instant,
    /// Why the transaction is over, once a statement failed: nothing more
    /// is sent.
    aborted: Option<String>,
    /// Set while a statement is sent and unanswered: still set when the
    /// next call comes, the statement's future was dropped before its
    /// answer, and the connection is out of step.
    in_flight: bool,
    /// Whether a statement of the work was sent.
    ran_work: bool,
    /// The engine, which names the transaction the statements check for.
    engine: Engine,
    /// The set a transaction over a set asserts at its commit; `None` for
    /// one lease. Boxed, as `session` is.
    set: Option<Box<LeaseSet>>,
    /// A guard's transaction holds its guard's claim: the guard's renewals
    /// wait for the commit instead of queueing on the fence row behind it,
    /// and the guard's other calls on the row are refused meanwhile.
    _claim: Option<Box<Claim>>,
    /// On a fake client, the fake's side of the transaction (`session` is
    /// then `None`).
    /// Boxed, as `session` is: the outcome that carries the transaction
    /// stays small.
    #[cfg(feature = "fake")]
    fake: Option<Box<fake::FakeTx>>,
}

impl std::fmt::Debug for FencedTx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FencedTx")
            .field("lease", &self.lease)
            .field("aborted", &self.aborted)
            .finish_non_exhaustive()
    }
}

/// What AssertHolder's refusals at the commit mean, by error number.
fn commit_refusal(number: u32) -> Option<RefusalReason> {
    match number {
        50110 => Some(RefusalReason::Superseded),
        50111 => Some(RefusalReason::Expired),
        50114 => Some(RefusalReason::StaleSource),
        _ => None,
    }
}

/// What a failure before the COMMIT of the commit's batch means: the fence's
/// refusal, or why the transaction was rolled back.
fn failed_before_commit(number: u32, message: &str) -> Error {
    if let Some(reason) = commit_refusal(number) {
        return Error::CommitRefused { reason };
    }
    let reason = match number {
        batches::ENDED => "the work's own SQL ended the transaction and opened another: it was rolled back at the \
                           commit; what that SQL committed by itself is outside the fence"
            .to_string(),
        50112 => "the fence row is gone: the key is no longer provisioned".to_string(),
        _ => format!("the commit failed before its COMMIT (error {number}: {message}), and rolled back"),
    };
    Error::TransactionAborted { reason }
}

/// What AssertHolder's refusals mean, by error number.
fn refusal(number: u32) -> Option<BeginFenced<'static>> {
    match number {
        50110 => Some(BeginFenced::Refused(RefusalReason::Superseded)),
        50111 => Some(BeginFenced::Refused(RefusalReason::Expired)),
        50112 => Some(BeginFenced::NotProvisioned),
        50114 => Some(BeginFenced::Refused(RefusalReason::StaleSource)),
        _ => None,
    }
}

/// How a begin reads a server error of the request that asserts the lease:
/// a refusal by its number, or else the error `otherwise` makes. The fake
/// reads its scripted errors through it too, so both answer alike.
fn refused_or(number: Option<u32>, otherwise: impl FnOnce() -> Error) -> Result<BeginFenced<'static>, Error> {
    match number.and_then(refusal) {
        Some(refused) => Ok(refused),
        None => Err(otherwise()),
    }
}

impl Client {
    /// Begins a transaction fenced by `lease`, for a lease that no
    /// [`LeaseGuard`](super::LeaseGuard) renews. With a guard use
    /// [`LeaseGuard::begin_fenced`](super::LeaseGuard::begin_fenced): this
    /// one does not hold the guard's renewals back, and a renewal sent while
    /// the transaction holds the row waits for its lock until it times out.
    ///
    /// The login needs EXECUTE on the fence procedures and its own rights on
    /// its tables, nothing on schema `fence`. Keep the transaction short (a
    /// successor's acquire waits for it), and make no other lease call on
    /// the same key while it is open: that call would wait for its lock.
    pub async fn begin_fenced_without_guard(&self, lease: &Lease) -> Result<BeginFenced<'_>, Error> {
        begin(self, lease, None, None).await
    }

    /// [`begin_fenced_without_guard`](Client::begin_fenced_without_guard)
    /// for writes built from version `source_version` of their source
    /// (contract v1.4): refused as [`RefusalReason::StaleSource`] when a
    /// newer source was already published or committed for the resource;
    /// otherwise the resource's source version rises to this one inside the
    /// transaction, so a rollback leaves it as it was.
    pub async fn begin_fenced_versioned_without_guard(
        &self,
        lease: &Lease,
        source_version: i64,
    ) -> Result<BeginFenced<'_>, Error> {
        begin(self, lease, None, Some(source_version)).await
    }
}

/// Checks out a connection, opens the transaction and asserts `lease` in it,
/// in a span of the AssertHolder call whose outcome is how it began.
pub(crate) async fn begin<'c>(
    client: &'c Client,
    lease: &Lease,
    claim: Option<Claim>,
    source_version: Option<i64>,
) -> Result<BeginFenced<'c>, Error> {
    begin_fence(client, lease, claim, Fence::Lease { source_version }).await
}

/// [`begin`] for what `fence` names; `lease` is the one lease, or the
/// set's first, whose local deadline every lease of the set shares.
async fn begin_fence<'c>(
    client: &'c Client,
    lease: &Lease,
    claim: Option<Claim>,
    fence: Fence<'_>,
) -> Result<BeginFenced<'c>, Error> {
    let procedure = match fence {
        Fence::Lease { .. } => Procedure::AssertHolder,
        Fence::Set(_) => Procedure::AssertHolderSet,
    };
    let span = span::call_span(&client.config, procedure, About::lease(lease));
    let started = Instant::now();
    let begun = assert_in_transaction(client, lease, claim, fence)
        .instrument(span.clone())
        .await;
    let refusal;
    let ended = match &begun {
        Ok(BeginFenced::Holding(_)) => Ok("Holding"),
        Ok(BeginFenced::Refused(reason)) => {
            refusal = reason.to_string();
            Ok(refusal.as_str())
        }
        Ok(BeginFenced::NotProvisioned) => Ok("NotProvisioned"),
        Err(error) => Err(error),
    };
    span::record_end(&span, ended);
    meter::call_ended(&client.config, procedure, started.elapsed(), ended, false);
    begun
}

async fn assert_in_transaction<'c>(
    client: &'c Client,
    lease: &Lease,
    mut claim: Option<Claim>,
    fence: Fence<'_>,
) -> Result<BeginFenced<'c>, Error> {
    #[cfg(feature = "fake")]
    if let Some(fake) = client.as_fake() {
        return match fence {
            Fence::Lease { source_version } => fake::begin(client, fake, lease, claim, source_version).await,
            Fence::Set(_) => Err(Error::Unavailable {
                reason: "the fake client runs no fenced transaction over a set; nothing was sent".to_string(),
            }),
        };
    }
    let key = input::key(lease.key())?;
    let (procedure, source_version, set) = match fence {
        Fence::Lease { source_version } => (Procedure::AssertHolder, input::source_version(source_version)?, None),
        Fence::Set(set) => (Procedure::AssertHolderSet, None, Some(set)),
    };
    let timeout = client.config.call_timeout;
    let mut session = checkout(&client.pool, &client.last_connect_error, &client.config).await?;
    // Left set if anything below is abandoned half way: the pool then drops
    // the connection, and the server rolls its transaction back.
    session.in_call = true;
    // Only now, with a connection in hand, are the guard's renewals held
    // back: a pool slow to answer must not cost the lease.
    // A renewal in flight ends within its own bounds, which can be long for
    // a long lease; the transaction waits for it no longer than a call.
    let renewed;
    let lease = match claim.as_mut() {
        Some(claim) => {
            let Ok(held) = tokio::time::timeout(timeout, claim.hold_renewals()).await else {
                session.in_call = false;
                return Err(Error::Network {
                    procedure: procedure.name(),
                    reason: format!(
                        "the guard's renewal in flight did not end within {} ms; nothing was sent",
                        timeout.as_millis()
                    ),
                    timed_out: true,
                });
            };
            renewed = held;
            &renewed
        }
        None => lease,
    };
    let connection = &mut session.connection;
    let asserted = tokio::time::timeout(timeout, async {
        connection.simple_query(batches::BEGIN).await?.into_results().await?;
        match set {
            None => {
                let assert_and_record = format!("{};{}", procedure.statement(), batches::record_lease());
                let arguments: [&dyn tiberius::ToSql; 4] = [&key, &lease.owner(), &lease.generation(), &source_version];
                connection
                    .query(assert_and_record, &arguments)
                    .await?
                    .into_results()
                    .await
            }
            Some(set) => {
                let assert_and_record = format!("{};{}", procedure.statement(), batches::record_set());
                let leases = super::lease_set::leases_json(set, |_, _| {});
                let arguments: [&dyn tiberius::ToSql; 2] = [&leases, &set.owner()];
                connection
                    .query(assert_and_record, &arguments)
                    .await?
                    .into_results()
                    .await
            }
        }
    })
    .await
    .map_err(|_| Error::timed_out(procedure.name(), timeout))?;
    let results = match asserted {
        Ok(results) => results,
        Err(error) => {
            // A refusal is a server error after a reply read to its end, and
            // XACT_ABORT rolled the transaction back. The session is closed
            // all the same (`in_call` stays set): a refusal is rare, and a
            // transaction some engine left open must never reach the next
            // call.
            return refused_or(error.code(), || classify(procedure, error));
        }
    };
    let Some(engine) = recorded_engine(&results) else {
        return Err(Error::UnexpectedReply {
            procedure: procedure.name(),
            detail: "the transaction's id and engine were not answered after AssertHolder".to_string(),
        });
    };
    let mut tx = FencedTx::open(Some(Box::new(session)), lease, timeout, engine, claim);
    tx.set = set.map(|set| Box::new(set.clone()));
    Ok(BeginFenced::Holding(tx))
}

impl<'c> FencedTx<'c> {
    /// A transaction just begun on `session`, holding `lease` (as its last
    /// renewal left it) and the guard's `claim`.
    fn open(
        session: Option<Box<bb8::PooledConnection<'c, Manager>>>,
        lease: &Lease,
        call_timeout: Duration,
        engine: Engine,
        claim: Option<Claim>,
    ) -> FencedTx<'c> {
        FencedTx {
            session,
            lease: lease.clone(),
            call_timeout,
            deadline: lease.local_deadline(),
            aborted: None,
            in_flight: false,
            ran_work: false,
            engine,
            set: None,
            _claim: claim.map(Box::new),
            #[cfg(feature = "fake")]
            fake: None,
        }
    }
}

/// The engine the record answered, from its row (the last result), when it
/// named the transaction.
fn recorded_engine(results: &[Vec<Row>]) -> Option<Engine> {
    let row = results.last()?.first()?;
    row.try_get::<i64, _>("TransactionId").ok().flatten()?;
    match row.try_get::<i32, _>("Babelfish").ok().flatten()? {
        0 => Some(Engine::SqlServer),
        _ => Some(Engine::Babelfish),
    }
}

impl FencedTx<'_> {
    /// The lease this transaction is fenced by; in a transaction over a
    /// set, the set's first lease (in lock order), whose expiry every lease
    /// of the set shares.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// The set this transaction is fenced by, when it was begun over a set
    /// ([`LeaseSetGuard::begin_fenced`](super::LeaseSetGuard::begin_fenced)).
    pub fn lease_set(&self) -> Option<&LeaseSet> {
        self.set.as_deref()
    }

    /// Runs one parameterized statement (`@P1`, `@P2`, ...) and returns the
    /// rows it affected. Bounded by the client's call timeout and the lease's
    /// deadline.
    pub async fn execute(&mut self, sql: &str, params: &[&dyn ToSql]) -> Result<u64, Error> {
        let guarded = self.guarded(sql)?;
        #[cfg(feature = "fake")]
        if let Some(fake) = &self.fake {
            self.in_flight = false;
            fake.record(sql, params);
            return Ok(0);
        }
        let bound = self.statement_bound();
        let connection = self.connection()?;
        let sent = async { Ok(connection.execute(guarded, params).await?.total()) };
        let result = tokio::time::timeout(bound, sent).await;
        self.settle(bound, result).await
    }

    /// Runs one parameterized query and returns the rows of its first result
    /// set. Bounded by the client's call timeout and the lease's deadline.
    pub async fn query(&mut self, sql: &str, params: &[&dyn ToSql]) -> Result<Vec<Row>, Error> {
        let guarded = self.guarded(sql)?;
        #[cfg(feature = "fake")]
        if let Some(fake) = &self.fake {
            self.in_flight = false;
            fake.record(sql, params);
            return Ok(Vec::new());
        }
        let bound = self.statement_bound();
        let connection = self.connection()?;
        let sent = async { connection.query(guarded, params).await?.into_first_result().await };
        let result = tokio::time::timeout(bound, sent).await;
        self.settle(bound, result).await
    }

    /// Commits, after asserting the lease once more in the same request.
    /// `Ok` means the work's writes committed while the lease was held, with
    /// the fence row locked from that last check to the COMMIT.
    /// [`Error::CommitRefused`] means the fence refused the lease at that
    /// moment (superseded, expired, or a newer source committed) and
    /// everything was rolled back. [`Error::CommitUnknown`] means the COMMIT
    /// was sent and its answer lost; [`Error::TransactionAborted`] that
    /// nothing more was committed (a statement had failed, or the work's SQL
    /// ended, replaced or left unbalanced the transaction, which is rolled
    /// back).
    pub async fn commit(mut self) -> Result<(), Error> {
        self.notice_a_dropped_statement();
        if let Some(reason) = self.aborted.take().or_else(|| self.expired()) {
            self.rollback().await;
            return Err(Error::TransactionAborted { reason });
        }
        #[cfg(feature = "fake")]
        if let Some(fake) = self.fake.take() {
            return fake.commit(self.call_timeout, &self.lease).await;
        }
        let unknown = |reason: String| Error::CommitUnknown { reason };
        let assert = match &self.set {
            None => batches::ASSERT_LEASE.to_string(),
            Some(set) => batches::assert_set(&super::lease_set::leases_json(set, |_, _| {}), set.owner()),
        };
        let batch = batches::commit(self.engine, &assert);
        let call_timeout = self.call_timeout;
        let connection = self.connection()?;
        let answer = tokio::time::timeout(call_timeout, async {
            connection.simple_query(batch).await?.into_results().await
        })
        .await
        .map_err(|_| unknown(format!("no answer within {} ms", call_timeout.as_millis())))?;
        // Whatever failed before the COMMIT is answered as a row; an error
        // comes from the COMMIT itself, or from what no CATCH sees.
        let answer = answer
            .map_err(|error| unknown(error.to_string()))?
            .into_iter()
            .last()
            .unwrap_or_default();
        let failed = answer.first().and_then(|row| {
            let number = row.try_get::<i32, _>("FailedNumber").ok().flatten()?;
            let message = row
                .try_get::<&str, _>("FailedMessage")
                .ok()
                .flatten()
                .unwrap_or_default();
            Some(failed_before_commit(u32::try_from(number).unwrap_or(0), message))
        });
        if let Some(error) = failed {
            return Err(error);
        }
        let count = |column: &str| {
            answer
                .first()
                .and_then(|row| row.try_get::<i32, _>(column).ok().flatten())
        };
        match (count("OpenBefore"), count("OpenAfter")) {
            (Some(1), Some(0)) => {}
            (Some(0), _) => {
                return Err(Error::TransactionAborted {
                    reason: "the work's own SQL had already ended the transaction; what it wrote before that may \
                             have committed, nothing after it ran"
                        .to_string(),
                });
            }
            (Some(open), _) if open > 1 => {
                return Err(Error::TransactionAborted {
                    reason: format!(
                        "the work's SQL left {} transaction(s) open inside it, so it was rolled back as a whole",
                        open - 1
                    ),
                });
            }
            (Some(1), Some(after)) => {
                // Committed, and the session opened another (IMPLICIT_TRANSACTIONS
                // set by the work): the connection is not reused, so the
                // server rolls that empty one back.
                tracing::debug!(
                    open = after,
                    "a fenced transaction's session opened another after its commit"
                );
            }
            other => return Err(unknown(format!("the commit answered {other:?} instead of its counts"))),
        }
        let closed_cleanly = count("OpenAfter") == Some(0);
        if !self.ran_work
            && closed_cleanly
            && let Some(session) = self.session.as_mut()
        {
            session.in_call = false;
        }
        Ok(())
    }

    /// Rolls back. Nothing of the work commits whatever happens here: if the
    /// rollback cannot be sent, the connection is closed, which rolls back.
    pub async fn rollback(mut self) {
        self.notice_a_dropped_statement();
        #[cfg(feature = "fake")]
        if let Some(fake) = self.fake.take() {
            (*fake).rollback();
            return;
        }
        let Some(session) = self.session.as_mut() else {
            return;
        };
        let connection = &mut session.connection;
        let rolled_back = tokio::time::timeout(self.call_timeout, async {
            connection
                .simple_query("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;")
                .await?
                .into_results()
                .await
        })
        .await;
        if matches!(rolled_back, Ok(Ok(_))) && !self.ran_work {
            session.in_call = false;
        }
    }

    /// The statement to send for `sql`, checked on the server before and
    /// after it runs, unless an earlier statement failed.
    fn guarded(&mut self, sql: &str) -> Result<String, Error> {
        self.notice_a_dropped_statement();
        if let Some(first) = &self.aborted {
            return Err(Error::TransactionAborted {
                reason: format!("an earlier statement failed ({first}); nothing more is sent"),
            });
        }
        if let Some(reason) = self.expired() {
            self.aborted = Some(reason.clone());
            return Err(Error::TransactionAborted { reason });
        }
        self.ran_work = true;
        self.in_flight = true;
        let still_fenced = batches::still_fenced(self.engine);
        Ok(format!("{still_fenced}\n{sql}\n{still_fenced}"))
    }

    /// Why nothing more may be sent, once the lease's local deadline passed.
    fn expired(&self) -> Option<String> {
        (Instant::now() >= self.deadline)
            .then(|| "the lease's time ran out on the local clock; the transaction does not outlast it".to_string())
    }

    /// How long the next statement may take: the call timeout, and never
    /// past the lease's local deadline.
    fn statement_bound(&self) -> Duration {
        self.call_timeout
            .min(self.deadline.saturating_duration_since(Instant::now()))
    }

    /// Ends the transaction when the last statement's future was dropped
    /// before its answer: its reply is unread, so nothing more can be sent
    /// on the connection, and closing it rolls back.
    fn notice_a_dropped_statement(&mut self) {
        if std::mem::take(&mut self.in_flight) {
            self.session = None;
            self.aborted.get_or_insert_with(|| {
                "a statement's future was dropped before its answer; the connection was closed, which rolls back"
                    .to_string()
            });
        }
    }

    /// The transaction's connection, unless it was closed.
    fn connection(&mut self) -> Result<&mut crate::connection::Connection, Error> {
        match self.session.as_mut() {
            Some(session) => Ok(&mut session.connection),
            None => Err(Error::TransactionAborted {
                reason: "its connection was closed after a statement failed; nothing more is sent".to_string(),
            }),
        }
    }

    /// A statement's result; its failure ends the transaction. A statement
    /// whose reply was left unread would go on holding the fence row on the
    /// server while the caller keeps the transaction: one that timed out is
    /// asked to stop (a TDS Attention, which with `XACT_ABORT ON` also rolls
    /// the transaction back on SQL Server), and the connection is closed
    /// either way, which rolls back.
    async fn settle<T>(
        &mut self,
        bound: Duration,
        result: Result<Result<T, tiberius::error::Error>, tokio::time::error::Elapsed>,
    ) -> Result<T, Error> {
        self.in_flight = false;
        let error = match result {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(tiberius::error::Error::Server(token))) => Error::Server {
                procedure: STATEMENT,
                number: token.code(),
                class: token.class(),
                message: token.message().to_string(),
            },
            Ok(Err(error)) => {
                self.session = None;
                Error::Network {
                    procedure: STATEMENT,
                    reason: error.to_string(),
                    timed_out: false,
                }
            }
            Err(_) => {
                if let Some(mut session) = self.session.take() {
                    cancel_on_server(&mut session.connection, STATEMENT).await;
                }
                Error::timed_out(STATEMENT, bound)
            }
        };
        self.aborted = Some(error.to_string());
        Err(error)
    }
}
