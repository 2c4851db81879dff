//! A fence in memory for a service's own tests (feature `fake`): a
//! [`Client`] whose calls run on [`fencepost::model`](crate::model) instead
//! of a server, on a clock the test controls, with faults the test scripts.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), fencepost::client::Error> {
//! use std::time::Duration;
//!
//! use fencepost::Client;
//! use fencepost::client::fake::Fault;
//! use fencepost::client::{Acquire, Error, Procedure};
//!
//! let client = Client::fake();
//! client.provision("report").await?;
//! let Acquire::Acquired(lease) = client.acquire("report", Duration::from_secs(30)).await? else {
//!     unreachable!("nobody else holds it")
//! };
//! // The publish commits, and its reply is lost on the way back.
//! client.as_fake().unwrap().fail_next(Procedure::Publish, Fault::ReplyLost);
//! let id = uuid::Uuid::new_v4();
//! assert!(matches!(client.publish(&lease, id, "42").await, Err(Error::OutcomeUnknown { .. })));
//! // Its replay settles it.
//! assert_eq!(client.publish(&lease, id, "42").await?, fencepost::client::Publish::AlreadyPublished);
//! # Ok(())
//! # }
//! ```
//!
//! The fake is the same [`Client`] type a service holds, so the code under
//! test needs no generic parameter: build it with [`Client::fake`] (or
//! [`Fake::client`], for several workers on one fence), drive the clock with
//! tokio's paused time (`#[tokio::test(start_paused = true)]`,
//! `tokio::time::advance`), script faults with [`Fake::fail_next`] and its
//! siblings, and look at the fence with [`Fake::fence`] and at fenced
//! transactions with [`Fake::fenced_writes`].
//!
//! Lease sets and slots (contract 1.8) run on the model as the other calls
//! do; a fenced transaction over a set is refused with
//! [`Error::Unavailable`] (nothing is sent).
//!
//! What it does not model: locks (a caller's transaction never makes
//! another call wait, and nothing waits for the 5 s bounds, 50127 or
//! 50129), isolation levels, the engine's own clock (the fake's is tokio's),
//! deadlocks and the engine's errors unless scripted, the handover signal
//! (a waiting acquire polls), and the rows of a fenced transaction's
//! statements (they are recorded, and answer no rows). docs/client.md says
//! more.

mod arguments;
mod fault;
mod rows;
mod writes;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tiberius::ToSql;
use time::OffsetDateTime;
use tokio::time::Instant;

pub use fault::Fault;
pub use writes::{FencedWrite, Statement, WriteEnd};

use super::call::Reply;
use super::error::FATAL_CLASS;
use super::{Client, ClientConfig, Error, Procedure};
use crate::connection::ConnectionString;
use crate::model::{Answer, Call, Fence, Refusal, Session};
use fault::Faults;

/// The fake's fence, clock and faults, shared by every [`Client`] made on
/// it. Cloning is cheap and shares them.
#[derive(Clone)]
pub struct Fake {
    shared: Arc<Shared>,
}

struct Shared {
    /// The server clock's reading at `started`.
    base: OffsetDateTime,
    started: Instant,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    fence: Fence,
    faults: Faults,
    writes: Vec<FencedWrite>,
}

impl std::fmt::Debug for Fake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fake").field("now", &self.now()).finish_non_exhaustive()
    }
}

impl Default for Fake {
    fn default() -> Self {
        Fake::new()
    }
}

/// What one call of the fake did: whether the model ran it and what it
/// answered, and what the client is told.
pub(crate) struct Exchange {
    /// The model's answer, when the call reached the fence.
    pub(crate) ran: Option<Result<Answer, Refusal>>,
    /// The failure the client sees instead of the answer, if any.
    pub(crate) failed: Option<Error>,
    /// An `AssertHolder` in a transaction: the key's source version before
    /// and after the call, which a rollback restores.
    pub(crate) source_version_before: Option<RaisedVersion>,
}

/// The source version a fenced transaction's `AssertHolder` found and left:
/// its rollback puts back `before` only while the key still holds `after`
/// (a reset made meanwhile stands, as it would behind the server's lock).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RaisedVersion {
    pub(crate) before: Option<i64>,
    pub(crate) after: Option<i64>,
}

impl Client {
    /// A client of a new, empty fake fence (feature `fake`): see
    /// [`fake`](crate::client::fake). Its server clock starts at the wall
    /// clock's time and then follows tokio's, so a test on paused time
    /// moves it with `tokio::time::advance` or by sleeping.
    pub fn fake() -> Client {
        Fake::new().client()
    }

    /// The fake this client runs on, to script its faults and read its
    /// fence; `None` for a client of a server.
    pub fn as_fake(&self) -> Option<&Fake> {
        match &self.backend {
            super::Backend::Fake(fake) => Some(fake),
            super::Backend::Server => None,
        }
    }
}

impl Fake {
    /// An empty fence (a database just deployed) whose clock starts now.
    pub fn new() -> Fake {
        Fake::starting_at(OffsetDateTime::now_utc())
    }

    /// An empty fence whose server clock reads `base` now, and then moves
    /// with tokio's clock.
    pub fn starting_at(base: OffsetDateTime) -> Fake {
        Fake {
            shared: Arc::new(Shared {
                base,
                started: Instant::now(),
                state: Mutex::new(State::default()),
            }),
        }
    }

    /// A client on this fence with default settings: another worker, or
    /// an operator, beside the first.
    pub fn client(&self) -> Client {
        self.client_with(|_| {}).expect("the default settings are valid")
    }

    /// A client on this fence with the settings `configure` makes (a call
    /// timeout, renewal settings, ...); settings no client can honour are
    /// refused as [`Client::connect_with`] refuses them.
    pub fn client_with(&self, configure: impl FnOnce(&mut ClientConfig)) -> Result<Client, Error> {
        let mut config = ClientConfig::new(
            ConnectionString::parse("Server=tcp:fencepost-fake.invalid,1433;Database=fake;User ID=fake;Password=fake")
                .expect("the fake's connection string parses"),
        );
        configure(&mut config);
        config.check()?;
        let mut client = Client::unconnected(config);
        client.backend = super::Backend::Fake(self.clone());
        Ok(client)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding it left nothing half done:
        // each change is one model call.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The fake server's clock now, to 100 ns as `datetime2(7)` keeps it.
    pub fn now(&self) -> OffsetDateTime {
        let now = self.shared.base + (Instant::now() - self.shared.started);
        let nanos = now.nanosecond();
        now.replace_nanosecond(nanos - nanos % 100)
            .expect("a nanosecond rounded down stays in range")
    }

    /// A copy of the fence as it is now: its keys, tenures and records.
    pub fn fence(&self) -> Fence {
        self.state().fence.clone()
    }

    /// Runs `call` on the fence at the fake's clock, with no fault and
    /// outside any client: what another party (a worker in another
    /// process, an operator) does meanwhile.
    pub fn call(&self, call: &Call) -> Result<Answer, Refusal> {
        let now = self.now();
        self.state().fence.call(call, Session::Autocommit, now)
    }

    /// The next call of `procedure` that has no fault scripted yet meets
    /// `fault`: each call of this queues one more.
    pub fn fail_next(&self, procedure: Procedure, fault: Fault) {
        self.state().faults.next_call(procedure, fault);
    }

    /// The `nth` call of `procedure` from now (1 is the next) meets `fault`.
    pub fn fail_call(&self, procedure: Procedure, nth: u64, fault: Fault) {
        self.state().faults.call(procedure, nth, fault);
    }

    /// Every call of `procedure` meets `fault`, until
    /// [`clear_faults`](Fake::clear_faults).
    pub fn fail_every(&self, procedure: Procedure, fault: Fault) {
        self.state().faults.every(procedure, fault);
    }

    /// No more faults: every scripted one is dropped.
    pub fn clear_faults(&self) {
        self.state().faults.clear();
    }

    /// How many calls of `procedure` the fake's clients made (a fenced
    /// transaction's begin and commit each count as an `AssertHolder`).
    pub fn calls(&self, procedure: Procedure) -> u64 {
        self.state().faults.calls(procedure)
    }

    /// Every fenced transaction begun on the fake, oldest first, with its
    /// statements and how it ended.
    pub fn fenced_writes(&self) -> Vec<FencedWrite> {
        self.state().writes.clone()
    }

    /// Records a fenced transaction that began holding `key` at
    /// `generation`; answers its index.
    pub(crate) fn begin_write(&self, key: &str, generation: i64) -> usize {
        let mut state = self.state();
        state.writes.push(FencedWrite {
            key: key.to_string(),
            generation,
            statements: Vec::new(),
            end: WriteEnd::Open,
        });
        state.writes.len() - 1
    }

    pub(crate) fn record_statement(&self, write: usize, sql: &str, params: &[&dyn ToSql]) {
        let statement = Statement {
            sql: sql.to_string(),
            params: params.iter().map(|p| format!("{:?}", p.to_sql())).collect(),
        };
        self.state().writes[write].statements.push(statement);
    }

    /// Ends a fenced transaction as `end`; a rollback puts back the source
    /// version its `AssertHolder` raised.
    pub(crate) fn end_write(&self, write: usize, end: WriteEnd, restore: Option<RaisedVersion>) {
        let mut state = self.state();
        if end != WriteEnd::Committed
            && let Some(raised) = restore
        {
            let key = state.writes[write].key.clone();
            if state.fence.resource(&key).map(|row| row.source_version) == Some(raised.after) {
                state.fence.restore_source_version(&key, raised.before);
            }
        }
        state.writes[write].end = end;
    }

    /// One call of `procedure`, as a client sends it: its scripted fault,
    /// then the model at the fake's clock, within the client's call
    /// timeout.
    pub(crate) async fn exchange(
        &self,
        timeout: Duration,
        procedure: Procedure,
        call: &Call,
        session: Session,
    ) -> Exchange {
        let fault = self.state().faults.next(procedure);
        let name = procedure.name();
        let failed = |error: Error| Exchange {
            ran: None,
            failed: Some(error),
            source_version_before: None,
        };
        let lost = |what: &str| Error::Network {
            procedure: name,
            reason: format!("the fake {what}"),
            timed_out: false,
        };
        let run = async {
            match fault {
                Some(Fault::RequestLost) => return failed(lost("lost the request before it reached the fence")),
                Some(Fault::ServerError(number)) => {
                    let message = format!("the fake raised error {number}");
                    return failed(server_error(procedure, number, 16, message));
                }
                Some(Fault::Fatal) => {
                    let message = "Cannot continue the execution because the session is in the kill state.".to_string();
                    return failed(server_error(procedure, 596, 21, message));
                }
                Some(Fault::Delay(delay)) => tokio::time::sleep(delay).await,
                Some(Fault::ReplyLost) | None => {}
            }
            let (answer, before) = self.apply(call, session);
            Exchange {
                ran: Some(answer),
                failed: (fault == Some(Fault::ReplyLost)).then(|| lost("lost the reply after the call committed")),
                source_version_before: before,
            }
        };
        match tokio::time::timeout(timeout, run).await {
            Ok(exchange) => exchange,
            Err(_) => failed(Error::timed_out(name, timeout)),
        }
    }

    /// The model's answer to `call` now, and for an `AssertHolder` in a
    /// transaction the key's source version before and after it.
    fn apply(&self, call: &Call, session: Session) -> (Result<Answer, Refusal>, Option<RaisedVersion>) {
        let now = self.now();
        let mut state = self.state();
        let key = match call {
            Call::AssertHolder {
                resource_key: Some(key),
                ..
            } if session == Session::InTransaction => Some(key),
            _ => None,
        };
        let version = |fence: &crate::model::Fence, key: &str| fence.resource(key).and_then(|r| r.source_version);
        let before = key.map(|key| version(&state.fence, key));
        let answer = state.fence.call(call, session, now);
        let raised = key.zip(before).map(|(key, before)| RaisedVersion {
            before,
            after: version(&state.fence, key),
        });
        (answer, raised)
    }

    /// A call of `procedure` with `arguments` bound in contract order, as
    /// the client's `call` makes it on a server: its rows, or the error.
    pub(crate) async fn call_rows(
        &self,
        config: &ClientConfig,
        procedure: Procedure,
        arguments: &[&dyn ToSql],
    ) -> Result<Vec<Reply>, Error> {
        let call = arguments::call(procedure, arguments)?;
        let exchange = self
            .exchange(config.call_timeout, procedure, &call, Session::Autocommit)
            .await;
        if let Some(error) = exchange.failed {
            return Err(error);
        }
        match exchange.ran.expect("a call that did not fail ran") {
            Ok(answer) => Ok(rows::replies(procedure, &answer)),
            Err(refusal) => Err(server_error(procedure, refusal.number, 16, refusal.message.to_string())),
        }
    }
}

/// A server error raised on a call of `procedure`, as the client reads one:
/// a fatal one on a publish may have come after its commit, so the publish
/// is unanswered (as `call::error_after` has it for a server).
fn server_error(procedure: Procedure, number: u32, class: u8, message: String) -> Error {
    if procedure == Procedure::Publish && class >= FATAL_CLASS {
        return Error::UnexpectedReply {
            procedure: procedure.name(),
            detail: format!("a fatal server error ended the session before the publish answered: {message}"),
        };
    }
    Error::from_server(procedure.name(), number, class, message)
}
