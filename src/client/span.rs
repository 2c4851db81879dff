//! One span per procedure call, shaped as OpenTelemetry's semantic
//! conventions for a database client call on SQL Server (stable since
//! conventions v1.33): a CLIENT span named `EXECUTE <procedure>`, with
//! `db.system.name`, `db.operation.name`, `db.stored_procedure.name`,
//! `db.namespace`, `server.address` and `server.port`, and on an error
//! `db.response.status_code` and `error.type`. `tracing-opentelemetry` reads
//! `otel.name`, `otel.kind` and `otel.status_code` as the span's name, kind
//! and status. fencepost's own fields are under `fencepost.*`; an owner id or
//! a payload never is.

use tracing::field::Empty;
use uuid::Uuid;

use super::config::ClientConfig;
use super::contract::Procedure;
use super::error::Error;

/// What a call is about, as far as it may be shown.
#[derive(Clone, Copy, Default)]
pub(crate) struct About<'a> {
    pub(crate) key: Option<&'a str>,
    pub(crate) generation: Option<i64>,
    pub(crate) operation_id: Option<Uuid>,
    /// A waiting attempt: an Acquire that first waited on the handover
    /// signal, whose duration holds that deliberate wait.
    pub(crate) waiting: bool,
}

impl<'a> About<'a> {
    pub(crate) fn key(key: &'a str) -> Self {
        About {
            key: Some(key),
            ..About::default()
        }
    }

    pub(crate) fn lease(lease: &'a super::Lease) -> Self {
        About {
            key: Some(lease.key()),
            generation: Some(lease.generation()),
            operation_id: None,
            waiting: false,
        }
    }

    pub(crate) fn operation(mut self, operation_id: Uuid) -> Self {
        self.operation_id = Some(operation_id);
        self
    }

    /// Marks a waiting attempt (`fencepost.attempt = "waiting"`).
    pub(crate) fn waiting(mut self) -> Self {
        self.waiting = true;
        self
    }
}

/// The span of one call of `procedure`, not yet entered.
pub(crate) fn call_span(config: &ClientConfig, procedure: Procedure, about: About<'_>) -> tracing::Span {
    let target = config.connection_string.telemetry_target();
    let span = tracing::info_span!(
        target: "fencepost::client",
        "EXECUTE",
        otel.name = %format_args!("EXECUTE {}", procedure.name()),
        otel.kind = "client",
        otel.status_code = Empty,
        db.system.name = "microsoft.sql_server",
        db.operation.name = "EXECUTE",
        db.stored_procedure.name = procedure.name(),
        db.namespace = Empty,
        db.response.status_code = Empty,
        error.type = Empty,
        server.address = %target.address,
        server.port = Empty,
        fencepost.resource_key = about.key,
        fencepost.generation = about.generation,
        fencepost.operation_id = about.operation_id.map(tracing::field::display),
        fencepost.outcome = Empty,
        fencepost.attempt = about.waiting.then_some("waiting"),
    );
    if let Some(namespace) = &target.namespace {
        span.record("db.namespace", namespace.as_str());
    }
    if let Some(port) = target.port {
        // As an i64: the conventions type the port as an int, and
        // tracing-opentelemetry exports an unsigned field as its text.
        span.record("server.port", i64::from(port));
    }
    span
}

/// `run_fenced`'s span, parent of its calls and its guard's renewals.
pub(crate) fn run_fenced_span(key: &str) -> tracing::Span {
    tracing::info_span!(
        target: "fencepost::client",
        "fencepost.run_fenced",
        fencepost.resource_key = key,
        fencepost.generation = Empty,
        fencepost.outcome = Empty,
    )
}

/// `run_fenced_set`'s span, parent of its calls and its guard's renewals:
/// the set's keys (in the order given) and how many there are.
pub(crate) fn run_fenced_set_span(keys: &[&str]) -> tracing::Span {
    tracing::info_span!(
        target: "fencepost::client",
        "fencepost.run_fenced_set",
        fencepost.resource_keys = keys.join(", "),
        // An i64, as OpenTelemetry's integer attributes are.
        fencepost.key_count = i64::try_from(keys.len()).unwrap_or(i64::MAX),
        fencepost.outcome = Empty,
    )
}

/// A guard's renewals, parent of each Renew call.
pub(crate) fn renewals_span(lease: &super::Lease) -> tracing::Span {
    tracing::info_span!(
        target: "fencepost::client",
        "fencepost.renewals",
        fencepost.resource_key = lease.key(),
        fencepost.generation = lease.generation(),
    )
}

/// A fenced transaction, parent of its AssertHolder call.
pub(crate) fn fenced_transaction_span(lease: &super::Lease) -> tracing::Span {
    tracing::info_span!(
        target: "fencepost::client",
        "fencepost.fenced_transaction",
        fencepost.resource_key = lease.key(),
        fencepost.generation = lease.generation(),
        fencepost.outcome = Empty,
    )
}

/// Records how a call ended: its contract outcome (a refusal is an outcome,
/// not an error), or the error and its kind.
pub(crate) fn record_end(span: &tracing::Span, ended: Result<&str, &Error>) {
    match ended {
        Ok(outcome) => {
            span.record("fencepost.outcome", outcome);
        }
        Err(error) => {
            span.record("otel.status_code", "ERROR");
            span.record("error.type", error_type(error));
            if let Some(number) = error.server_number() {
                span.record("db.response.status_code", tracing::field::display(number));
            }
        }
    }
}

/// `error.type`: the server's error number when it raised one, as the
/// conventions ask, otherwise a low-cardinality name for the failure.
pub(crate) fn error_type(error: &Error) -> String {
    if let Some(number) = error.server_number() {
        return number.to_string();
    }
    match error {
        Error::InvalidInput { .. } => "invalid_input",
        Error::InvalidConfig { .. } => "invalid_config",
        Error::Connect(_) => "connect",
        Error::Unavailable { .. } => "unavailable",
        Error::Network { timed_out: true, .. } => "timeout",
        Error::Network { .. } => "network",
        Error::OutcomeUnknown { .. } => "outcome_unknown",
        Error::CommitUnknown { .. } => "commit_unknown",
        Error::TransactionAborted { .. } => "transaction_aborted",
        Error::UnexpectedReply { .. } => "unexpected_reply",
        Error::PrivilegedLogin { .. } => "privileged_login",
        Error::ContractMismatch { .. } => "contract_mismatch",
        Error::Blocked { .. } => "blocked",
        Error::KillFailed { .. } => "kill_failed",
        _ => "other",
    }
    .to_string()
}
