//! Why a bench run stopped.

use crate::client;
use crate::connection::ConnectError;

/// A run that could not start or finish. Each variant says what to fix; a
/// cause is kept as `source` only, so `{:#}` prints it once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// The database could not be reached.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The database does not hold the procedures the client calls.
    #[error(
        "the database does not hold the fence contract the bench calls ({}): run `fencepost migrate` against it first",
        .problems.join("; ")
    )]
    NotDeployed {
        /// Each missing or different procedure or parameter.
        problems: Vec<String>,
    },
    /// A client call failed.
    #[error("{scenario}")]
    Client {
        /// What the bench was doing.
        scenario: String,
        /// The client's error.
        #[source]
        source: client::Error,
    },
    /// A statement the bench sends itself failed.
    #[error("{what}")]
    Server {
        /// What the bench was doing.
        what: String,
        /// The driver's error.
        #[source]
        source: tiberius::error::Error,
    },
    /// The run was stopped (Ctrl-C) before it finished; nothing was reported,
    /// and its keys and scratch table were removed as after a full run.
    #[error("interrupted: the run stopped before it finished, so nothing was measured in full")]
    Interrupted,
    /// An answer the bench cannot count as the operation it measures.
    #[error("{scenario}: {detail}")]
    Unexpected {
        /// The scenario.
        scenario: String,
        /// What came back.
        detail: String,
    },
}

impl BenchError {
    pub(crate) fn client(scenario: &str) -> impl FnOnce(client::Error) -> BenchError + '_ {
        move |source| BenchError::Client {
            scenario: scenario.to_string(),
            source,
        }
    }

    pub(crate) fn server(what: &str) -> impl FnOnce(tiberius::error::Error) -> BenchError + '_ {
        move |source| BenchError::Server {
            what: what.to_string(),
            source,
        }
    }

    pub(crate) fn unexpected(scenario: &str, detail: impl std::fmt::Display) -> BenchError {
        BenchError::Unexpected {
            scenario: scenario.to_string(),
            detail: detail.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_message_repeats_its_cause() {
        let errors = [
            BenchError::client("acquire")(client::Error::Unavailable {
                reason: "the pool stayed busy".into(),
            }),
            BenchError::server("creating the scratch table")(tiberius::error::Error::Io {
                kind: std::io::ErrorKind::ConnectionReset,
                message: "connection reset by peer".into(),
            }),
            BenchError::Connect(ConnectError::AccessTokenProvider {
                server: "db:1433".into(),
                source: "the identity endpoint answered 500".into(),
            }),
        ];
        for error in &errors {
            assert!(std::error::Error::source(error).is_some(), "{error:?} has a cause");
            crate::says_once::assert_each_cause_said_once(error);
        }
    }
}
