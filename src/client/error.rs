//! What can go wrong when calling the fence procedures, sorted by what the
//! caller should do about it.

use std::time::Duration;

use uuid::Uuid;

use super::contract::{ContractVersion, Procedure};
use super::parameter::Parameter;
use crate::connection::ConnectError;

/// A failed call. Refusals that are part of the contract (`Busy`, `Lost`,
/// `Superseded`, ...) are not errors: they are outcome values.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The client refused the input before any round trip.
    #[error("{parameter}: {reason}")]
    InvalidInput {
        /// The parameter at fault.
        parameter: Parameter,
        /// What is wrong with it.
        reason: String,
    },
    /// A [`ClientConfig`](super::ClientConfig) setting no client can honour,
    /// refused by [`Client::connect_with`](super::Client::connect_with)
    /// before any connection is opened.
    #[error("ClientConfig::{setting} {reason}")]
    InvalidConfig {
        /// The setter, e.g. `call_timeout`.
        setting: &'static str,
        /// What is wrong with its value.
        reason: &'static str,
    },
    /// The procedure refused the input with one of the contract's error
    /// numbers (50101–50109, and 50120–50126 and 50130 of the operators'
    /// procedures). Nothing was changed.
    #[error("{procedure} refused {parameter} (error {number}): {message}")]
    Rejected {
        /// The procedure, e.g. `fence_api.Publish`.
        procedure: &'static str,
        /// The documented error number.
        number: u32,
        /// The parameter the number is about.
        parameter: Parameter,
        /// The server's message.
        message: String,
    },
    /// The server reported an error outside the contract (permissions, a
    /// deadlock, a missing procedure, ...). Of a publish, only an error below
    /// class 20 comes as this: the server answered, and nothing committed.
    /// A fatal one (class 20 and above: the session ended mid-reply) is
    /// [`Error::OutcomeUnknown`].
    #[error("{procedure} failed on the server (error {number}, class {class}): {message}")]
    Server {
        /// The procedure that was called, or what else was sent.
        procedure: &'static str,
        /// The server's error number.
        number: u32,
        /// The error's severity: below 11 informational, 11–16 the caller's
        /// statement failed, 17–19 a resource or software problem, 20 and
        /// above fatal to the session.
        class: u8,
        /// The server's message.
        message: String,
    },
    /// No connection could be opened or taken from the pool; nothing was
    /// sent. Its message is the connect error's own ("cannot connect to
    /// ..."), so a cause chain printed with `{:#}` shows it once.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The pool had no connection to give within the time allowed and could
    /// not open one; nothing was sent.
    #[error("no connection available: {reason}")]
    Unavailable {
        /// The last connection failure seen, or that the pool stayed busy.
        reason: String,
    },
    /// The connection failed or the reply did not arrive in time. For every
    /// procedure except `Publish`, `ForceRelease` and `ResetSourceVersion` a
    /// retry is safe; a publish reports [`Error::OutcomeUnknown`] instead, an
    /// operator command [`Error::OperatorOutcomeUnknown`] (after replaying it
    /// once with its operation id), and a fenced transaction's commit
    /// [`Error::CommitUnknown`].
    #[error("{procedure}: {reason}")]
    Network {
        /// The procedure that was called.
        procedure: &'static str,
        /// What the driver reported.
        reason: String,
        /// Whether the call gave up waiting (rather than the connection failing).
        timed_out: bool,
    },
    /// A publish may have reached the server but its answer never came back:
    /// it may or may not have committed. Settle it by replaying the publish
    /// with the same lease, operation id and payload: a committed one answers
    /// `AlreadyPublished` (the payload is never written twice), and one that
    /// never arrived is judged afresh, refused once the lease has ended,
    /// since an expired lease is never revived. A replay's answer is final.
    /// `Client::outcome` is final only once the first send can no longer
    /// arrive: one still queued on the fence row's lock commits after it.
    ///
    /// Not [`is_transient`](Error::is_transient): a generic retry that made
    /// a *new* publish, or re-ran the work, could publish a second time.
    #[error(
        "the outcome of publish {operation_id} is unknown ({reason}); replay it with the same lease, operation id and \
         payload to settle it"
    )]
    OutcomeUnknown {
        /// The operation id of the publish.
        operation_id: Uuid,
        /// Why the reply was lost.
        reason: String,
    },
    /// An operator command ([`Admin::force_release`](super::Admin::force_release)
    /// and its variants, [`Admin::reset_source_version`](super::Admin::reset_source_version))
    /// may have reached the server, but no answer came back: neither to the
    /// call nor to the one replay the client sent with the same operation
    /// id, on a new connection, within the call's time budget. It may or may
    /// not have applied. Send it again with the same operation id
    /// ([`Admin::force_release_as`](super::Admin::force_release_as),
    /// [`Admin::reset_source_version_as`](super::Admin::reset_source_version_as),
    /// `fencepost lease ... --operation-id`): if it applied, that answers
    /// what it did then and changes nothing; if it never arrived, it applies
    /// now.
    ///
    /// Not [`is_transient`](Error::is_transient): the same command under a
    /// *new* operation id applies again, and a second force-release fences
    /// whoever acquired the lease since.
    #[error(
        "the outcome of {procedure} with operation id {operation_id} is unknown ({reason}); send it again with the \
         same operation id to settle it: a replay answers what the first call did and changes nothing"
    )]
    OperatorOutcomeUnknown {
        /// The procedure, `fence_admin.ForceRelease` or
        /// `fence_admin.ResetSourceVersion`.
        procedure: &'static str,
        /// The command's operation id.
        operation_id: Uuid,
        /// Why no answer came: the call's failure and its replay's.
        reason: String,
    },
    /// A fenced transaction's `COMMIT` was sent but its answer never came
    /// back: the work's writes may or may not have committed. Nothing retries
    /// it, and a retry of the work is safe only if its writes are idempotent
    /// or it first checks whether they landed (for example a row keyed by an
    /// id the work chose before it began).
    #[error(
        "the commit of a fenced transaction is unknown ({reason}); check whether its writes landed before redoing them"
    )]
    CommitUnknown {
        /// Why the answer was lost.
        reason: String,
    },
    /// A fenced transaction was rolled back, or had already ended, before its
    /// work was done: a statement failed, or the work's own SQL committed,
    /// rolled back or left a transaction open. Nothing more was sent after
    /// the failure and nothing was committed by the client; see the reason
    /// for what the work's own SQL may have done.
    #[error("the fenced transaction was rolled back: {reason}")]
    TransactionAborted {
        /// What ended it.
        reason: String,
    },
    /// The fence refused a fenced transaction's lease when it came to commit
    /// (asserted again in the request that commits): the lease was
    /// superseded, had expired, or a newer source was committed meanwhile.
    /// Everything the transaction wrote was rolled back; nothing of it
    /// committed.
    #[error("the fence refused the commit ({reason}): the transaction was rolled back and nothing of it committed")]
    CommitRefused {
        /// Why the fence refused the lease.
        reason: super::RefusalReason,
    },
    /// A call of a guard that needs the fence row was made while that
    /// guard's own fenced transaction holds the row: it would wait on its
    /// own holder. Nothing was sent; commit or roll back the transaction
    /// first (a publish can be a write in the transaction itself).
    #[error("{call} was called while this guard's fenced transaction is open; commit or roll it back first")]
    FencedTransactionOpen {
        /// The call that was refused.
        call: &'static str,
    },
    /// The reply did not have the shape the contract promises.
    #[error("{procedure} answered outside the contract: {detail}")]
    UnexpectedReply {
        /// The procedure that was called.
        procedure: &'static str,
        /// What was wrong with the reply.
        detail: String,
    },
    /// A watched force-release or recovery
    /// ([`Admin::force_release_watched`](super::Admin::force_release_watched),
    /// [`Admin::recover_watched`](super::Admin::recover_watched)) failed
    /// while another session's open transaction held a fence row: the
    /// procedure gave up waiting for it. Nothing changed. End that session to
    /// roll its transaction back (or let it finish), then call again.
    #[error("{procedure} gave up waiting for the fence row, which session {session} holds in an open transaction")]
    Blocked {
        /// The procedure that was called.
        procedure: &'static str,
        /// The server session whose transaction holds the fence row.
        session: i32,
        /// How the call failed.
        #[source]
        cause: Box<Error>,
    },
    /// A watched force-release with [`WhenBlocked::Kill`](super::admin::WhenBlocked::Kill)
    /// ended session `killed`, whose open transaction held the fence row,
    /// and its second call then gave up waiting too, behind `session`: a
    /// session that took the row meanwhile, or `killed` itself when its
    /// rollback outlasted the procedure's bound. Nothing was fenced, and
    /// `session` was not ended: one force-release ends one session.
    #[error(
        "{procedure} gave up waiting for the fence row again after session {killed} was ended: session {session} holds it \
         now"
    )]
    BlockedAfterKill {
        /// The procedure that was called.
        procedure: &'static str,
        /// The session that was ended.
        killed: i32,
        /// The session that held the fence row when the second call gave up.
        session: i32,
        /// How the second call failed.
        #[source]
        cause: Box<Error>,
    },
    /// Ending the session that blocked a watched force-release failed
    /// (`KILL` needs ALTER ANY CONNECTION on SQL Server, KILL DATABASE
    /// CONNECTION on Azure SQL Database). Nothing was fenced.
    #[error(
        "ending session {session} failed (KILL needs ALTER ANY CONNECTION on SQL Server, KILL DATABASE CONNECTION on \
         Azure SQL Database): {reason}"
    )]
    KillFailed {
        /// The session that was to be ended.
        session: i32,
        /// What the server answered.
        reason: String,
    },
    /// [`Client::verify_contract`](super::Client::verify_contract) refused to
    /// start: this client's own login can write the fence table directly, so
    /// a lease taken with it would fence nothing. Connect as a login that
    /// holds only the `fence_service` role, or opt out with
    /// [`ClientConfig::allow_privileged_login`](super::ClientConfig::allow_privileged_login).
    #[error(
        "refusing to start: the login of this client (user {user}) can write the fence directly: {}; connect as a \
         login that holds only the fence_service role, or opt out with ClientConfig::allow_privileged_login",
        .reasons.join("; ")
    )]
    PrivilegedLogin {
        /// The session's user in the database.
        user: String,
        /// Each reason, one per entry.
        reasons: Vec<String>,
    },
    /// The database does not hold the procedures this client expects.
    #[error("the database does not hold the fence_api contract {version} this client expects: {}", .problems.join("; "))]
    ContractMismatch {
        /// The contract version this client speaks.
        version: ContractVersion,
        /// Each missing or different procedure or parameter, one per entry.
        problems: Vec<String>,
    },
}

/// Server error numbers after which the same call may simply be tried again:
/// deadlock victim and the Azure SQL "try again" family (a lock time-out,
/// on either engine, is too: `tsql::is_lock_timeout`).
const TRANSIENT_SERVER_ERRORS: &[u32] = &[
    1205, 4221, 10928, 10929, 40143, 40197, 40501, 40540, 40613, 49918, 49919, 49920,
];

/// What `Acquire`, `ForceRelease` and `ResetSourceVersion` raise on SQL
/// Server after waiting 5 s for a fence row or its table.
const ROW_WAIT_GIVEN_UP: u32 = 50129;

/// The operator commands that are idempotent only by operation id: the same
/// call under a new id applies again.
const OPERATOR_COMMANDS: [&str; 3] = [
    "fence_admin.ForceRelease",
    "fence_admin.ResetSourceVersion",
    "fence_admin.Retire",
];

/// The lowest class of a server error that ends the session.
pub(crate) const FATAL_CLASS: u8 = 20;

impl Error {
    /// The server's error number, when the server reported the error.
    pub fn server_number(&self) -> Option<u32> {
        match self {
            Error::Rejected { number, .. } | Error::Server { number, .. } => Some(*number),
            _ => None,
        }
    }

    /// The parameter at fault, for input refused by the client or the procedure.
    pub fn parameter(&self) -> Option<Parameter> {
        match self {
            Error::InvalidInput { parameter, .. } | Error::Rejected { parameter, .. } => Some(*parameter),
            _ => None,
        }
    }

    /// The operation id of a publish or an operator command whose outcome
    /// is unknown: the one to send it again with.
    pub fn unknown_operation(&self) -> Option<Uuid> {
        match self {
            Error::OutcomeUnknown { operation_id, .. } | Error::OperatorOutcomeUnknown { operation_id, .. } => {
                Some(*operation_id)
            }
            _ => None,
        }
    }

    /// True when the same call, with the same arguments, may succeed if tried
    /// again: network failures, timeouts, an exhausted pool, transient server
    /// errors and fatal ones (a new connection is a new session). An unknown
    /// publish, operator command or commit outcome is not: it is settled by a
    /// replay with the same operation id, or by checking the writes, never by
    /// a blind retry; nor is a network error of an operator command
    /// (`ForceRelease`, `ResetSourceVersion`), which the same call with a new
    /// operation id could apply twice.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Network { procedure, .. } => !OPERATOR_COMMANDS.contains(procedure),
            Error::Unavailable { .. } => true,
            Error::Connect(e) => matches!(
                e,
                ConnectError::Unreachable { .. }
                    | ConnectError::TimedOut { .. }
                    | ConnectError::HandshakeTimedOut { .. }
                    | ConnectError::ClosedDuringLogin { .. }
            ),
            Error::Server {
                number, class, message, ..
            } => {
                *class >= FATAL_CLASS
                    || TRANSIENT_SERVER_ERRORS.contains(number)
                    || crate::tsql::is_lock_timeout(*number, message)
            }
            _ => false,
        }
    }

    /// True when `Acquire` gave up waiting for its fence row, which another
    /// transaction held past the procedure's bound: error 50129 (SQL Server:
    /// an `Acquire` deployed before such a wait was answered with `Busy`, or
    /// one called inside the caller's transaction) or the engine's lock
    /// time-out (Babelfish, where no procedure can catch it). The
    /// procedure's transaction rolled back, so nothing was granted: this is
    /// contention, which the client answers as `Busy`, not a failure.
    pub(crate) fn gave_up_waiting_for_the_row(&self) -> bool {
        match self {
            Error::Server { number, message, .. } => {
                *number == ROW_WAIT_GIVEN_UP || crate::tsql::is_lock_timeout(*number, message)
            }
            _ => false,
        }
    }

    /// Whether the server said the procedure called does not exist: a
    /// database older than the contract version that added it.
    pub(crate) fn procedure_is_missing(&self) -> bool {
        match self {
            Error::Server {
                procedure,
                number,
                message,
                ..
            } => crate::tsql::is_missing_procedure(*number, message, procedure),
            _ => false,
        }
    }

    /// An error the server raised in `procedure`: one of the contract's numbers
    /// becomes [`Error::Rejected`] with the parameter that number is about,
    /// whatever the message says; any other number stays a server error.
    pub(crate) fn from_server(procedure: &'static str, number: u32, class: u8, message: String) -> Self {
        let parameter = match number {
            // PublishSet has no @OperationId: its operation ids come in @Leases.
            50107 if procedure == Procedure::PublishSet.name() => Some(Parameter::Leases),
            _ => Parameter::for_error_number(number),
        };
        match parameter {
            Some(parameter) => Error::Rejected {
                procedure,
                number,
                parameter,
                message,
            },
            None => Error::Server {
                procedure,
                number,
                class,
                message,
            },
        }
    }

    pub(crate) fn invalid(parameter: Parameter, reason: impl Into<String>) -> Self {
        Error::InvalidInput {
            parameter,
            reason: reason.into(),
        }
    }

    pub(crate) fn timed_out(procedure: &'static str, after: Duration) -> Self {
        Error::Network {
            procedure,
            reason: format!("no reply within {} ms", after.as_millis()),
            timed_out: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadlock_is_transient_but_a_permission_error_is_not() {
        let server = |number| Error::Server {
            procedure: "fence_api.Acquire",
            number,
            class: 14,
            message: String::new(),
        };
        assert!(server(1205).is_transient());
        assert!(!server(229).is_transient());
        assert_eq!(server(229).server_number(), Some(229));
    }

    #[test]
    fn a_lock_timeout_is_transient_on_either_engine() {
        let server = |number, message: &str| Error::Server {
            procedure: "fence_api.Acquire",
            number,
            class: 16,
            message: message.into(),
        };
        assert!(server(1222, "Lock request time out period exceeded.").is_transient());
        assert!(server(33557097, "canceling statement due to lock timeout").is_transient());
        assert!(
            !server(33557097, "relation \"x\" does not exist").is_transient(),
            "Babelfish's generic number alone says nothing"
        );
    }

    #[test]
    fn a_wait_for_the_row_given_up_on_either_engine_is_contention_and_other_errors_are_not() {
        let server = |number, message: &str| Error::Server {
            procedure: "fence_api.Acquire",
            number,
            class: 16,
            message: message.into(),
        };
        assert!(server(50129, "Waited 5 seconds for the fence row or its table.").gave_up_waiting_for_the_row());
        assert!(server(33557097, "canceling statement due to lock timeout").gave_up_waiting_for_the_row());
        assert!(!server(33557097, "relation \"x\" does not exist").gave_up_waiting_for_the_row());
        assert!(!server(1205, "deadlock victim").gave_up_waiting_for_the_row());
        let refused = Error::from_server("fence_api.Acquire", 50103, 16, "bad length".into());
        assert!(!refused.gave_up_waiting_for_the_row());
    }

    #[test]
    fn a_fatal_error_is_transient_for_an_idempotent_call() {
        // The session ended; a new connection is a new session.
        let fatal = Error::Server {
            procedure: "fence_api.Renew",
            number: 596,
            class: 21,
            message: "Cannot continue the execution because the session is in the kill state.".into(),
        };
        assert!(fatal.is_transient());
    }

    #[test]
    fn a_rejection_is_neither_transient_nor_nameless() {
        // The message names no parameter: the parameter must come from 50103.
        let message = "a lease lasts from 1 to 86400 seconds";
        let e = Error::from_server("fence_api.Acquire", 50103, 16, message.into());
        assert!(matches!(e, Error::Rejected { .. }), "{e:?}");
        assert!(!e.is_transient());
        assert_eq!(e.parameter(), Some(Parameter::LeaseSeconds));
        assert!(e.to_string().contains("@LeaseSeconds"), "{e}");
    }

    #[test]
    fn a_server_error_outside_the_contract_names_no_parameter() {
        let e = Error::from_server(
            "fence_api.Acquire",
            229,
            14,
            "The EXECUTE permission was denied.".into(),
        );
        assert!(matches!(e, Error::Server { number: 229, .. }), "{e:?}");
        assert_eq!(e.parameter(), None);
    }

    #[test]
    fn an_unknown_outcome_carries_its_operation_id_into_the_message() {
        let op = Uuid::new_v4();
        let e = Error::OutcomeUnknown {
            operation_id: op,
            reason: "connection reset".into(),
        };
        assert_eq!(e.unknown_operation(), Some(op));
        assert!(!e.is_transient(), "a blind retry could publish twice");
        assert!(e.to_string().contains(&op.to_string()));
    }

    #[test]
    fn a_network_error_of_an_operator_command_is_not_transient() {
        let network = |procedure| Error::Network {
            procedure,
            reason: "connection reset".into(),
            timed_out: false,
        };
        assert!(network("fence_api.Renew").is_transient());
        for procedure in OPERATOR_COMMANDS {
            assert!(!network(procedure).is_transient(), "{procedure} could apply twice");
        }
        assert_eq!(
            OPERATOR_COMMANDS,
            [
                super::super::contract::Procedure::ForceRelease.name(),
                super::super::contract::Procedure::ResetSourceVersion.name(),
                super::super::contract::Procedure::Retire.name()
            ]
        );
    }

    #[test]
    fn a_refused_operation_id_of_an_operator_command_names_the_parameter() {
        let refused = Error::from_server(
            "fence_admin.ForceRelease",
            50130,
            16,
            "@OperationId was already used by another operator command or for another resource.".into(),
        );
        assert!(matches!(refused, Error::Rejected { number: 50130, .. }), "{refused:?}");
        assert_eq!(refused.parameter(), Some(Parameter::OperationId));
        assert!(!refused.is_transient());
    }

    #[test]
    fn an_operation_id_refused_by_publish_set_names_its_leases() {
        let message =
            "@Leases: the OperationId for \"a\" was already used by a publish to another resource or generation.";
        let refused = Error::from_server(Procedure::PublishSet.name(), 50107, 16, message.into());
        assert_eq!(refused.parameter(), Some(Parameter::Leases));
        let single = Error::from_server(Procedure::Publish.name(), 50107, 16, "@OperationId".into());
        assert_eq!(single.parameter(), Some(Parameter::OperationId));
    }

    #[test]
    fn no_message_repeats_its_cause() {
        let refused = || Error::Server {
            procedure: "fence_admin.ForceRelease",
            number: 1222,
            class: 16,
            message: "Lock request time out period exceeded.".into(),
        };
        let errors = [
            Error::Blocked {
                procedure: "fence_admin.ForceRelease",
                session: 57,
                cause: Box::new(refused()),
            },
            Error::BlockedAfterKill {
                procedure: "fence_admin.ForceRelease",
                killed: 57,
                session: 58,
                cause: Box::new(refused()),
            },
            Error::Connect(ConnectError::AccessTokenProvider {
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
