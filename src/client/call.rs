//! One procedure call: one request, one round trip, exactly one row back.

use futures_util::TryStreamExt;
use tiberius::{FromSql, QueryItem, Row, ToSql};
use time::OffsetDateTime;

use super::config::ClientConfig;
use super::contract::Procedure;
use super::error::Error;
use super::pool::{LastConnectError, Manager};

/// Sends `EXEC <procedure> ...` with `arguments` bound in contract order and
/// returns its single row. The call is bounded by `timeout` from check-out to
/// the last byte of the reply.
pub(crate) async fn call(
    pool: &bb8::Pool<Manager>,
    last_connect_error: &LastConnectError,
    config: &ClientConfig,
    procedure: Procedure,
    arguments: &[&dyn ToSql],
) -> Result<Reply, Error> {
    let timeout = config.call_timeout;
    let mut session = checkout(pool, last_connect_error, config).await?;
    session.in_call = true;
    let statement = procedure.statement();
    // Read item by item: tiberius reports a server error only where its token
    // arrives, and collecting the whole reply at once would drop the rows read
    // before it, such as a publish's `Published`.
    let exchange = async {
        let mut stream = match session.connection.query(statement, arguments).await {
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
    let mut rows = match tokio::time::timeout(timeout, exchange).await {
        // `in_call` stays set: the reply may still be on its way, so the pool
        // drops this connection.
        Err(_) => return Err(Error::timed_out(procedure.name(), timeout)),
        Ok(Err((rows, error))) => {
            if keeps_connection(server_error_class(&error)) {
                session.in_call = false;
                session.last_used = tokio::time::Instant::now();
            }
            return Err(error_after(procedure, &rows, error));
        }
        Ok(Ok(rows)) => rows,
    };
    session.in_call = false;
    session.last_used = tokio::time::Instant::now();
    if rows.len() != 1 {
        return Err(Error::UnexpectedReply {
            procedure: procedure.name(),
            detail: format!("{} rows instead of exactly one", rows.len()),
        });
    }
    Ok(Reply {
        procedure,
        row: rows.remove(0),
    })
}

/// The severity of a server error, `None` for any other failure.
fn server_error_class(error: &tiberius::error::Error) -> Option<u8> {
    match error {
        tiberius::error::Error::Server(token) => Some(token.class()),
        _ => None,
    }
}

/// Whether a connection may go back to the pool after a failed call. After a
/// server error of class below 20 it is in step: the driver reads the rest of
/// the reply before the next request. Class 20 and above ends the session on
/// the server (a fatal error), and any other failure (network, protocol)
/// leaves the reply half read: such a connection is discarded.
pub(crate) fn keeps_connection(server_error_class: Option<u8>) -> bool {
    server_error_class.is_some_and(|class| class < 20)
}

/// The error of a call that failed after `rows` had arrived. A publish whose
/// row said it committed (`Published`, `AlreadyPublished`) and whose reply
/// then carried an error did commit, or may have: it is an unexpected reply,
/// which `publish` reports as `OutcomeUnknown` with the operation id, never as
/// a server error that would read as "nothing was written".
fn error_after(procedure: Procedure, rows: &[Row], error: tiberius::error::Error) -> Error {
    let committed = procedure == Procedure::Publish
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

/// Sorts a driver error into the client's kinds. The contract's own numbers
/// become [`Error::Rejected`] with the parameter they are about.
pub(crate) fn classify(procedure: Procedure, error: tiberius::error::Error) -> Error {
    use tiberius::error::Error as E;
    match error {
        E::Server(token) => Error::from_server(procedure.name(), token.code(), token.message().to_string()),
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

/// The single row a procedure answered, read by column name.
pub(crate) struct Reply {
    procedure: Procedure,
    row: Row,
}

impl Reply {
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
    fn a_connection_goes_back_to_the_pool_only_after_a_server_error_below_class_20() {
        assert!(keeps_connection(Some(16)));
        assert!(keeps_connection(Some(19)));
        assert!(!keeps_connection(Some(20)), "fatal: the server ended the session");
        assert!(!keeps_connection(Some(25)));
        assert!(!keeps_connection(None), "a network or protocol failure");
    }
}
