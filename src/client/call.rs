//! One procedure call: one request, one round trip, exactly one row back.

use futures_util::TryStreamExt;
use tiberius::{FromSql, QueryItem, Row, ToSql};
use time::OffsetDateTime;

use std::time::Duration;

use super::config::ClientConfig;
use super::contract::Procedure;
use super::error::{Error, FATAL_CLASS};
use super::pool::{LastConnectError, Manager, Session};
use crate::connection::Connection;

/// Sends `EXEC <procedure> ...` with `arguments` bound in contract order on a
/// connection from `pool` and returns its rows: exactly one, or for a
/// procedure that [answers rows](Procedure::answers_rows) any number. The
/// call is bounded by `timeout` from check-out to the last byte of the reply.
pub(crate) async fn call(
    pool: &bb8::Pool<Manager>,
    last_connect_error: &LastConnectError,
    config: &ClientConfig,
    procedure: Procedure,
    arguments: &[&dyn ToSql],
) -> Result<Vec<Reply>, Error> {
    let mut session = checkout(pool, last_connect_error, config).await?;
    call_on(&mut session, config, procedure, arguments).await
}

/// [`call`] on a session the caller already holds: one that must be the
/// same across statements, such as a call another session watches.
/// Arguments left out of the end of the procedure's parameters take their
/// declared defaults.
pub(crate) async fn call_on(
    session: &mut Session,
    config: &ClientConfig,
    procedure: Procedure,
    arguments: &[&dyn ToSql],
) -> Result<Vec<Reply>, Error> {
    let statement = procedure.statement_for(arguments.len());
    let rows = (!procedure.answers_rows()).then_some(1);
    batch_on(session, config, procedure, &statement, arguments, rows).await
}

/// [`call_on`] for a batch around one call of `procedure`: `statement` runs
/// with `arguments` bound as `@P1`, `@P2`, ..., and its rows, of every result
/// set in order, are what it answers; exactly `rows` of them when given.
pub(crate) async fn batch_on(
    session: &mut Session,
    config: &ClientConfig,
    procedure: Procedure,
    statement: &str,
    arguments: &[&dyn ToSql],
    rows: Option<usize>,
) -> Result<Vec<Reply>, Error> {
    let expected = rows;
    let timeout = config.call_timeout;
    session.in_call = true;
    // Read item by item: tiberius reports a server error only where its token
    // arrives, and collecting the whole reply at once would drop the rows read
    // before it, such as a publish's `Published`.
    let connection = &mut session.connection;
    let exchange = async {
        let mut stream = match connection.query(statement, arguments).await {
            Ok(stream) => stream,
            Err(error) => return Err((Vec::new(), error)),
        };
        let mut rows = Vec::new();
        loop {
            match stream.try_next().await {
                Ok(Some(QueryItem::Row(row))) => rows.push(row),
                Ok(Some(QueryItem::Metadata(_))) => {}
                Ok(None) => return Ok(rows),
                Err(error) => return Err((rows, error)),
            }
        }
    };
    let outcome = tokio::time::timeout(timeout, exchange).await;
    let rows = match outcome {
        Err(_) => {
            // `in_call` stays set: the pool drops this connection whatever
            // the cancel below achieves.
            cancel_on_server(&mut session.connection, procedure.name()).await;
            return Err(Error::timed_out(procedure.name(), timeout));
        }
        Ok(Err((rows, error))) => {
            if keeps_connection(server_error(&error)) {
                session.in_call = false;
                session.last_used = tokio::time::Instant::now();
            }
            return Err(error_after(procedure, &rows, error));
        }
        Ok(Ok(rows)) => rows,
    };
    session.in_call = false;
    session.last_used = tokio::time::Instant::now();
    if let Some(expected) = expected
        && rows.len() != expected
    {
        let exactly = if expected == 1 {
            "one".to_string()
        } else {
            expected.to_string()
        };
        return Err(Error::UnexpectedReply {
            procedure: procedure.name(),
            detail: format!("{} rows instead of exactly {exactly}", rows.len()),
        });
    }
    Ok(rows.into_iter().map(|row| Reply { procedure, row }).collect())
}

/// How long a request that ran past its call's bound is given to stop on the
/// server before its connection is dropped anyway. SQL Server acknowledges
/// an Attention at once, even for a request waiting on a lock.
const CANCEL_GRACE: Duration = Duration::from_secs(1);

/// Asks the server to stop the request still running on `connection` (a TDS
/// Attention) and waits, within [`CANCEL_GRACE`], for its acknowledgement.
/// Without it a request queued on the fence row's lock would run once the
/// lock is free, after the caller gave up: a publish would commit, an
/// acquire take the lease under an owner nobody holds any more. Once
/// acknowledged, the request has ended for good. A connection that does not
/// answer in time (half open, the server gone, or an engine that reads an
/// Attention only between requests, as Babelfish 4.2 does) cancels nothing,
/// and is dropped all the same: then only a replay of the publish settles
/// it, since the request may still run.
pub(crate) async fn cancel_on_server(connection: &mut Connection, procedure: &str) {
    match tokio::time::timeout(CANCEL_GRACE, connection.cancel_query()).await {
        Ok(Ok(())) => tracing::debug!(procedure, "the server stopped a call that ran out of time"),
        Ok(Err(error)) => {
            tracing::debug!(procedure, %error, "cancelling a call that ran out of time failed")
        }
        Err(_) => tracing::debug!(procedure, "the server did not acknowledge the cancel in time"),
    }
}

/// Errors after which a session's transaction state is not what the next
/// call expects: 266 (a procedure left `@@TRANCOUNT` changed), 3902/3903
/// (COMMIT/ROLLBACK without a transaction), 3930 (an uncommittable
/// transaction), 3998 (an uncommittable transaction rolled back at the end
/// of the batch). Listed for the reader: [`keeps_connection`] keeps fewer.
#[cfg(test)]
const TRANSACTION_STATE_ERRORS: [u32; 5] = [266, 3902, 3903, 3930, 3998];

/// Whether a connection may go back to the pool after a failed call. Only
/// after an error the contract raises (501xx: input refused before anything
/// changed, or AssertHolder's refusals) or a deadlock or lock time-out (the
/// server rolled the statement's transaction back) is the session known to
/// be as the next call expects: the driver has read the reply to its end, and
/// no transaction is left open. Any other server error is rare and may leave
/// session state behind (an open transaction after 266, say); any other
/// failure (network, protocol) leaves the reply half read. Such connections
/// are discarded; the price is one new connection.
pub(crate) fn keeps_connection(server_error: Option<(u32, u8)>) -> bool {
    server_error.is_some_and(|(number, class)| {
        class < FATAL_CLASS && (CONTRACT_ERRORS.contains(&number) || LOCK_ERRORS.contains(&number))
    })
}

/// The number and class of a server error, `None` for any other failure.
pub(crate) fn server_error(error: &tiberius::error::Error) -> Option<(u32, u8)> {
    match error {
        tiberius::error::Error::Server(token) => Some((token.code(), token.class())),
        _ => None,
    }
}

/// The error numbers the contract raises.
const CONTRACT_ERRORS: std::ops::RangeInclusive<u32> = 50100..=50199;
/// Deadlock victim and lock request time-out: the server rolled back.
const LOCK_ERRORS: [u32; 2] = [1205, 1222];

/// The error of a call that failed after `rows` had arrived. A publish (or a
/// set's publish, `PublishSet`) whose row said it committed (`Published`, `AlreadyPublished`) and whose reply
/// then carried an error did commit, or may have: it is an unexpected reply,
/// which `publish` reports as `OutcomeUnknown` with the operation id, never as
/// a server error that would read as "nothing was written". So is a fatal
/// error (class 20 and above), which can end the session after the
/// procedure's COMMIT and before its row.
fn error_after(procedure: Procedure, rows: &[Row], error: tiberius::error::Error) -> Error {
    let publishes = matches!(procedure, Procedure::Publish | Procedure::PublishSet);
    let committed = publishes
        && rows.iter().any(|row| {
            // Case-blind, as `Reply::get`: some engines fold column names.
            let outcome = row
                .columns()
                .iter()
                .position(|c| c.name().eq_ignore_ascii_case("Outcome"))
                .and_then(|index| row.try_get::<&str, _>(index).ok().flatten());
            matches!(outcome, Some("Published" | "AlreadyPublished"))
        });
    if committed {
        return Error::UnexpectedReply {
            procedure: procedure.name(),
            detail: format!("the server reported an error after the row that answered the publish: {error}"),
        };
    }
    if publishes
        && let tiberius::error::Error::Server(token) = &error
        && token.class() >= FATAL_CLASS
    {
        return Error::UnexpectedReply {
            procedure: procedure.name(),
            detail: format!("a fatal server error ended the session before the publish answered: {error}"),
        };
    }
    classify(procedure, error)
}

/// A pooled connection, or why none could be had (nothing was sent).
///
/// The pool checks a connection that sat idle for longer than
/// `idle_check_after` with one `SELECT 1` of at most `idle_check_timeout`
/// and replaces it when that fails (see `pool::IdleCheck`): after a server
/// restart every pooled connection is dead, and the call must not be the one
/// that finds out. A connection in steady use is handed out unchecked, so a
/// lease call stays one round trip. All of it, checks and new connections,
/// fits in `checkout_timeout`.
pub(crate) async fn checkout<'p>(
    pool: &'p bb8::Pool<Manager>,
    last_connect_error: &LastConnectError,
    config: &ClientConfig,
) -> Result<bb8::PooledConnection<'p, Manager>, Error> {
    get(pool, last_connect_error, config).await
}

/// A connection from `pool`, or why none came within `checkout_timeout`: the
/// last failure to connect while connections keep failing, otherwise that the
/// pool stayed busy or a connection was still being opened.
async fn get<'p>(
    pool: &'p bb8::Pool<Manager>,
    last_connect_error: &LastConnectError,
    config: &ClientConfig,
) -> Result<bb8::PooledConnection<'p, Manager>, Error> {
    match pool.get().await {
        Ok(session) => Ok(session),
        Err(bb8::RunError::User(error)) => Err(Error::Connect(error)),
        Err(bb8::RunError::TimedOut) => {
            let waited = config.checkout_timeout.as_secs_f64();
            let open = pool.state().connections;
            let reason = last_connect_error.describe().unwrap_or_else(|| {
                if open == 0 {
                    format!("no connection opened within {waited:.1} s")
                } else {
                    format!("all {open} connections stayed busy for {waited:.1} s")
                }
            });
            Err(Error::Unavailable { reason })
        }
    }
}

/// Sorts the driver error of a statement that is not a procedure call (`what`
/// names it in messages): a server error with its number, or a network one.
pub(crate) fn classify_statement(what: &'static str, error: tiberius::error::Error) -> Error {
    match error.code() {
        Some(number) => Error::Server {
            procedure: what,
            number,
            class: server_error(&error).map_or(16, |(_, class)| class),
            message: error.to_string(),
        },
        None => Error::Network {
            procedure: what,
            reason: error.to_string(),
            timed_out: false,
        },
    }
}

/// Sorts a driver error into the client's kinds. The contract's own numbers
/// become [`Error::Rejected`] with the parameter they are about.
pub(crate) fn classify(procedure: Procedure, error: tiberius::error::Error) -> Error {
    use tiberius::error::Error as E;
    match error {
        E::Server(token) => Error::from_server(
            procedure.name(),
            token.code(),
            token.class(),
            token.message().to_string(),
        ),
        E::Io { kind, message } => Error::Network {
            procedure: procedure.name(),
            reason: message,
            timed_out: kind == std::io::ErrorKind::TimedOut,
        },
        other => Error::Network {
            procedure: procedure.name(),
            reason: other.to_string(),
            timed_out: false,
        },
    }
}

/// One row a procedure answered, read by column name.
pub(crate) struct Reply {
    procedure: Procedure,
    row: Row,
}

impl Reply {
    /// A reply of `procedure` made of `row`, for the tests of what decodes it
    /// and for the fake's answers.
    #[cfg(any(test, feature = "fake"))]
    pub(crate) fn of(procedure: Procedure, row: Row) -> Reply {
        Reply { procedure, row }
    }

    /// The `Outcome` column.
    pub(crate) fn outcome(&self) -> Result<&str, Error> {
        self.required::<&str>("Outcome")
    }

    /// A column that may be NULL.
    pub(crate) fn get<'a, T: FromSql<'a>>(&'a self, column: &str) -> Result<Option<T>, Error> {
        // Found and read by the same case-blind match: some engines fold
        // column names.
        let Some(index) = self
            .row
            .columns()
            .iter()
            .position(|c| c.name().eq_ignore_ascii_case(column))
        else {
            return Err(self.unexpected(format!("no column {column}")));
        };
        self.row
            .try_get::<T, _>(index)
            .map_err(|e| self.unexpected(format!("column {column}: {e}")))
    }

    /// A column the outcome promises is not NULL.
    pub(crate) fn required<'a, T: FromSql<'a>>(&'a self, column: &str) -> Result<T, Error> {
        self.get(column)?
            .ok_or_else(|| self.unexpected(format!("{column} is NULL")))
    }

    /// A `datetime2` column, which holds UTC by contract.
    pub(crate) fn utc(&self, column: &str) -> Result<Option<OffsetDateTime>, Error> {
        Ok(self.get::<time::PrimitiveDateTime>(column)?.map(|t| t.assume_utc()))
    }

    /// A `datetime2` column that must not be NULL.
    pub(crate) fn required_utc(&self, column: &str) -> Result<OffsetDateTime, Error> {
        self.utc(column)?
            .ok_or_else(|| self.unexpected(format!("{column} is NULL")))
    }

    /// An outcome name this client does not know.
    pub(crate) fn unknown_outcome(&self) -> Error {
        match self.outcome() {
            Ok(name) => self.unexpected(format!("unknown outcome '{name}'")),
            Err(e) => e,
        }
    }

    pub(crate) fn unexpected(&self, detail: String) -> Error {
        Error::UnexpectedReply {
            procedure: self.procedure.name(),
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_goes_back_to_the_pool_after_a_contract_refusal_or_a_deadlock() {
        assert!(keeps_connection(Some((50101, 16))));
        assert!(keeps_connection(Some((50110, 16))));
        assert!(keeps_connection(Some((1205, 13))));
        assert!(
            !keeps_connection(Some((50110, 20))),
            "fatal: the server ended the session"
        );
    }

    #[test]
    fn a_connection_whose_transaction_state_may_be_off_is_discarded() {
        for number in TRANSACTION_STATE_ERRORS {
            assert!(!keeps_connection(Some((number, 16))), "{number}");
        }
        assert!(!keeps_connection(Some((208, 16))), "a schema drift error");
        let network = tiberius::error::Error::Io {
            kind: std::io::ErrorKind::ConnectionReset,
            message: "reset".into(),
        };
        assert!(
            !keeps_connection(server_error(&network)),
            "a network failure leaves the reply half read"
        );
    }
}
