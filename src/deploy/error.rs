//! What can go wrong reading the shipped T-SQL or deploying it.

use std::time::Duration;

use crate::connection::ConnectError;

use super::blocker::Blocker;
use super::report::Committed;
use crate::source::SourceError;

/// A deployment that could not be completed. Each migration and each
/// procedure commits in its own transaction, so a failure rolls back only the
/// one that failed: what committed before it stays, and
/// [`DeployError::Incomplete`] says what that was. Permission scripts are not
/// transactional: the batches of one that ran before its failure stay applied.
///
/// A cause is kept as `source` only, never repeated in the message, so a
/// chain printed with `{:#}` shows each once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeployError {
    /// The sources are invalid.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The server could not be reached or refused the login.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The plan refuses the deploy: nothing was changed.
    #[error(transparent)]
    Blocked(#[from] Blocker),
    /// Another deployment holds the deploy lock.
    #[error(
        "{}; this deploy waited {:.1}s for it: wait for that deployment to finish, or raise --lock-timeout",
        .holder.as_ref().map_or_else(
            || "another deployment holds the deploy lock on this database (this engine cannot show which session)".to_string(),
            |h| format!("the deploy lock on this database is held by {h}")),
        .waited.as_secs_f64())]
    LockTimeout {
        /// How long this deploy waited.
        waited: Duration,
        /// The session holding the lock, when the engine can show it.
        holder: Option<LockHolder>,
    },
    /// A batch of a script failed on the server. A migration's or a
    /// procedure's changes were rolled back; a permission script's earlier
    /// batches stay applied.
    #[error("{file}, batch {batch} (line {line}): {message}")]
    BatchFailed {
        /// The script, e.g. `migrations/V2__x.sql`.
        file: String,
        /// Which batch, counting from 1.
        batch: usize,
        /// The script line where the server reported the error.
        line: usize,
        /// The server's message, with its error number.
        message: String,
    },
    /// A statement of a migration waited longer than the migration lock
    /// timeout for a lock another transaction held: the migration was rolled
    /// back and is not recorded.
    #[error(
        "{file}, batch {batch} (line {line}): waited more than {seconds} s for a lock ({message}): another \
         transaction holds a lock on what the migration changes, such as a service's open transaction on a fence \
         table; the migration was rolled back and is not recorded. Deploy again once that transaction has ended, \
         or allow a longer wait with --migration-lock-timeout"
    )]
    MigrationLockTimeout {
        /// The migration, e.g. `migrations/V2__x.sql`.
        file: String,
        /// Which batch, counting from 1.
        batch: usize,
        /// The script line where the server reported the error.
        line: usize,
        /// The timeout, in seconds.
        seconds: f64,
        /// The server's message, with its error number.
        message: String,
    },
    /// A migration batch committed, rolled back or opened a transaction of
    /// its own, or turned on IMPLICIT_TRANSACTIONS: the migration was rolled
    /// back (when it ran in a transaction) and not recorded.
    #[error(
        "{file}, batch {batch} (line {line}): {problem}; the migration is not recorded \
         (a migration leaves BEGIN, COMMIT and ROLLBACK to the runner)"
    )]
    TransactionMisuse {
        /// The migration, e.g. `migrations/V2__x.sql`.
        file: String,
        /// Which batch, counting from 1.
        batch: usize,
        /// The script line where the batch begins.
        line: usize,
        /// What the batch did to the transaction.
        problem: String,
    },
    /// A script left a transaction open at the end of the deploy (a
    /// permission script's BEGIN TRANSACTION, or IMPLICIT_TRANSACTIONS): what
    /// ran inside it never committed and was rolled back.
    #[error(
        "a permission script left {open} transaction(s) open (a BEGIN TRANSACTION without COMMIT, or \
         IMPLICIT_TRANSACTIONS ON); what ran inside it was rolled back, so the permissions are not all applied"
    )]
    TransactionLeftOpen {
        /// `@@TRANCOUNT` when the deploy ended.
        open: i32,
    },
    /// A grant names a user the database does not have.
    #[error(
        "cannot add {member} to {role}: the database has no user {member} (create it first, e.g. \
         CREATE USER [{member}] FOR LOGIN [{member}])"
    )]
    NoSuchUser {
        /// The user named.
        member: String,
        /// The role it was to join.
        role: String,
    },
    /// A grant would put the deploying user in a fence role.
    #[error(
        "refusing to add {member} to {role}: {member} is the user this deploy runs as (or a role it is in); a \
         deploy login in a fence role holds that role's rights, and on SQL Server the role's DENY on schema fence \
         makes its next deploy fail (error 229). Grant the role to the service's own user instead"
    )]
    GrantToDeployingUser {
        /// The user or role named.
        member: String,
        /// The role it was to join.
        role: String,
    },
    /// A migration marked to run without a transaction failed part-way.
    #[error(
        "migration {name} runs without a transaction (`-- fencepost: no-transaction`) and stopped in its \
         batch {batch}: what ran before the failure stays applied; it is not recorded, so the next deploy \
         runs it again from its first batch"
    )]
    PartlyApplied {
        /// The migration, e.g. `V2__x`.
        name: String,
        /// The batch that failed, counting from 1 (one past the last, when
        /// recording it failed).
        batch: usize,
        /// Why it stopped.
        #[source]
        cause: Box<DeployError>,
    },
    /// A deploy failed after committing some changes, which stay.
    #[error("the deploy stopped part-way; {committed}")]
    Incomplete {
        /// What committed before the failure.
        committed: Box<Committed>,
        /// Why it stopped.
        #[source]
        cause: Box<DeployError>,
    },
    /// Any other server or network failure.
    #[error("{context}")]
    Server {
        /// What fencepost was doing.
        context: String,
        /// The driver's error.
        #[source]
        source: tiberius::error::Error,
    },
    /// The server answered, but not in the shape fencepost asked for (a
    /// missing row or result set, a status outside the documented ones). Not
    /// a driver error: the driver read the reply fine.
    #[error("{context}: {detail}")]
    Unexpected {
        /// What fencepost was doing.
        context: String,
        /// What came back instead.
        detail: String,
    },
}

/// A read of the database identity fails as the deploy's other reads do.
impl From<crate::identity::ReadError> for DeployError {
    fn from(error: crate::identity::ReadError) -> Self {
        Self::Server {
            context: error.context.into(),
            source: error.source,
        }
    }
}

impl DeployError {
    pub(crate) fn server(context: impl Into<String>) -> impl FnOnce(tiberius::error::Error) -> Self {
        let context = context.into();
        move |source| Self::Server { context, source }
    }

    pub(crate) fn unexpected(context: impl Into<String>, detail: impl std::fmt::Display) -> Self {
        Self::Unexpected {
            context: context.into(),
            detail: detail.to_string(),
        }
    }
}

/// The session that holds the deploy lock, as the server describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockHolder {
    /// The session id (`@@SPID` of the holder).
    pub session_id: i32,
    /// The login it runs as.
    pub login: String,
    /// The client machine it connected from.
    pub host: String,
    /// The application name it gave.
    pub program: String,
}

impl std::fmt::Display for LockHolder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "session {} (login {}, host {}, program {})",
            self.session_id, self.login, self.host, self.program
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_timeout_names_the_holder_and_how_long_this_deploy_waited() {
        let error = DeployError::LockTimeout {
            waited: Duration::from_millis(1500),
            holder: Some(LockHolder {
                session_id: 57,
                login: "deploy".into(),
                host: "ci-1".into(),
                program: "fencepost".into(),
            }),
        };
        assert_eq!(
            error.to_string(),
            "the deploy lock on this database is held by session 57 (login deploy, host ci-1, program fencepost); \
             this deploy waited 1.5s for it: wait for that deployment to finish, or raise --lock-timeout"
        );
    }

    #[test]
    fn a_lock_timeout_says_when_the_engine_cannot_show_the_holder() {
        let error = DeployError::LockTimeout {
            waited: Duration::from_secs(2),
            holder: None,
        };
        let text = error.to_string();
        assert!(text.contains("this engine cannot show which session"), "{text}");
        assert!(text.contains("this deploy waited 2.0s"), "{text}");
    }

    fn driver() -> tiberius::error::Error {
        tiberius::error::Error::Io {
            kind: std::io::ErrorKind::ConnectionReset,
            message: "connection reset by peer".into(),
        }
    }

    fn batch_failed() -> DeployError {
        DeployError::BatchFailed {
            file: "migrations/V2__x.sql".into(),
            batch: 1,
            line: 3,
            message: "Msg 2714: There is already an object named 'x'".into(),
        }
    }

    #[test]
    fn no_message_repeats_its_cause() {
        let unreadable = SourceError::Unreadable {
            path: "/x/migrations".into(),
            source: std::io::Error::other("permission denied"),
        };
        let token = ConnectError::AccessTokenProvider {
            server: "db:1433".into(),
            source: "the identity endpoint answered 500".into(),
        };
        let errors = [
            DeployError::Source(unreadable),
            DeployError::Connect(token),
            DeployError::PartlyApplied {
                name: "V2__x".into(),
                batch: 1,
                cause: Box::new(batch_failed()),
            },
            DeployError::Incomplete {
                committed: Box::default(),
                cause: Box::new(DeployError::server("running migrations/V2__x.sql, batch 1")(driver())),
            },
            DeployError::server("reading the deployed state")(driver()),
            DeployError::from(crate::identity::ReadError {
                context: "reading the database identity",
                source: driver(),
            }),
        ];
        for error in &errors {
            assert!(std::error::Error::source(error).is_some(), "{error:?} has a cause");
            crate::says_once::assert_each_cause_said_once(error);
        }
    }

    #[test]
    fn an_unexpected_answer_is_not_dressed_as_a_driver_error() {
        let error = DeployError::unexpected("releasing the deploy lock", "no transaction count came back");
        assert_eq!(
            error.to_string(),
            "releasing the deploy lock: no transaction count came back"
        );
        assert!(std::error::Error::source(&error).is_none());
    }
}
