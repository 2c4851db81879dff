//! Why a selftest could not run at all (as opposed to a check that failed,
//! which is a line of the report).

use crate::client;
use crate::connection::ConnectError;

/// A selftest that could not start. Each variant says what to fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SelftestError {
    /// The database could not be reached.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The database does not hold the procedures the checks call.
    #[error(
        "the database does not hold the fence contract the selftest calls ({}): run `fencepost migrate` against it first",
        .problems.join("; ")
    )]
    NotDeployed {
        /// Each missing or different procedure or parameter.
        problems: Vec<String>,
    },
    /// The key prefix is unusable.
    #[error("--key-prefix {prefix:?}: {reason}")]
    InvalidPrefix {
        /// The prefix given.
        prefix: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A check was asked for by a name no check has.
    #[error("no check is named {name:?}; the checks are: {known}")]
    UnknownCheck {
        /// The name asked for.
        name: String,
        /// Every check's name.
        known: String,
    },
    /// A client call made before the checks failed.
    #[error("{what}")]
    Client {
        /// What the selftest was doing.
        what: String,
        /// The client's error.
        #[source]
        source: client::Error,
    },
    /// Another selftest holds the run's application lock: it runs against
    /// this database under the same key prefix.
    #[error(
        "another fencepost selftest is running against this database with the same key prefix (it holds the \
         application lock {resource:?}; waited {waited_s} s, sp_getapplock answered {answered:?}): wait for it to \
         end, or run this one with another --key-prefix"
    )]
    AnotherRun {
        /// The application lock's name.
        resource: String,
        /// How long the run waited for it.
        waited_s: u64,
        /// What sp_getapplock answered (-1: timed out).
        answered: Option<i32>,
    },
    /// Taking the run's application lock failed.
    #[error("taking the selftest's application lock {resource:?} (sp_getapplock)")]
    RunLock {
        /// The application lock's name.
        resource: String,
        /// The server's error.
        #[source]
        source: tiberius::error::Error,
    },
    /// Reading the engine's settings failed.
    #[error("reading the engine's settings")]
    Settings(#[source] tiberius::error::Error),
}
