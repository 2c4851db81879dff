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
    /// this database under the same key prefix (sp_getapplock answered -1,
    /// timed out).
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
    /// sp_getapplock refused the run's application lock for another reason
    /// than a run holding it: -2 cancelled, -3 chosen as a deadlock victim,
    /// -999 a parameter or call error (or no answer at all).
    #[error(
        "the selftest's application lock {resource:?} was not granted: sp_getapplock answered {answered:?} ({}); \
         nothing was run: try again, and if it persists check the login may call sp_getapplock in this database",
        applock_answer(.answered)
    )]
    RunLockRefused {
        /// The application lock's name.
        resource: String,
        /// What sp_getapplock answered.
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

/// What an sp_getapplock answer other than a grant or a timeout means.
fn applock_answer(answered: &Option<i32>) -> &'static str {
    match answered {
        Some(-2) => "the request was cancelled",
        Some(-3) => "chosen as a deadlock victim",
        Some(-999) => "a parameter or call error",
        Some(_) => "an answer sp_getapplock is not documented to give",
        None => "no answer",
    }
}
