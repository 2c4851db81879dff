//! Metrics through the `metrics` facade (cargo feature `metrics`, on by
//! default): the application installs the recorder and picks the exporter.
//! Labels are low-cardinality only: a procedure, an outcome, a reason; never
//! a key or an id. The names, units and labels are listed in the README
//! ("Metrics").

use std::time::Duration;

use super::config::ClientConfig;
use super::contract::Procedure;
use super::error::Error;

/// The duration histogram of OpenTelemetry's database client conventions, in
/// seconds.
pub const OPERATION_DURATION: &str = "db.client.operation.duration";
/// Acquisitions by outcome (`Acquired`, `Busy`, `NotProvisioned`, `error`).
pub const ACQUISITIONS: &str = "fencepost.acquisitions";
/// Publishes by outcome (`Published`, `AlreadyPublished`, each refusal, `error`).
pub const PUBLICATIONS: &str = "fencepost.publications";
/// Renewals by result (`Renewed`, `Lost`, `error`).
pub const RENEWALS: &str = "fencepost.renewals";
/// Leases a guard lost, by reason (`renewal`: a renewal answered Lost;
/// `unconfirmed`: none was confirmed in time).
pub const LEASES_LOST: &str = "fencepost.leases.lost";
/// Publishes whose outcome was unknown, by how they were settled
/// (`unsettled` when `run_fenced` gave up; `settle` answers: `AlreadyPublished`,
/// `Published`, a refusal, `error`).
pub const OUTCOMES_UNKNOWN: &str = "fencepost.outcomes.unknown";
/// How long `acquire_waiting` waited until it held the lease, in seconds.
pub const HANDOVER_WAIT: &str = "fencepost.handover.wait";
/// Guards holding a lease now.
pub const GUARDS_HELD: &str = "fencepost.guards.held";
/// The pool's connections, by state (`idle`, `in_use`), sampled at each call.
pub const POOL_CONNECTIONS: &str = "fencepost.pool.connections";
/// The sessions waiting acquires block on the handover signal on, by state
/// (`idle`, `in_use`), sampled as a waiter takes one.
pub const SIGNAL_SESSIONS: &str = "fencepost.signal.sessions";

/// The bucket boundaries, in seconds, the conventions recommend for
/// [`OPERATION_DURATION`]; exporters that need them configured take these.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
];

#[cfg(feature = "metrics")]
mod on {
    use super::*;
    use metrics::{Label, Unit, counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram};

    /// Describes each metric once, with its unit.
    pub(crate) fn describe() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            describe_histogram!(OPERATION_DURATION, Unit::Seconds, "Duration of fence procedure calls.");
            describe_counter!(ACQUISITIONS, Unit::Count, "Lease acquisitions by outcome.");
            describe_counter!(PUBLICATIONS, Unit::Count, "Fenced publishes by outcome.");
            describe_counter!(RENEWALS, Unit::Count, "Lease renewals by result.");
            describe_counter!(LEASES_LOST, Unit::Count, "Leases a guard lost, by reason.");
            describe_counter!(
                OUTCOMES_UNKNOWN,
                Unit::Count,
                "Publishes with an unknown outcome, by how settled."
            );
            describe_histogram!(HANDOVER_WAIT, Unit::Seconds, "Time acquire_waiting waited for a lease.");
            describe_gauge!(GUARDS_HELD, Unit::Count, "Guards holding a lease now.");
            describe_gauge!(POOL_CONNECTIONS, Unit::Count, "Pool connections by state.");
            describe_gauge!(SIGNAL_SESSIONS, Unit::Count, "Handover signal sessions by state.");
        });
    }

    /// Records one call: the conventions' duration histogram, with what
    /// tells one database's calls from another's (`db.namespace`,
    /// `server.address`, `server.port`) and, on a server error, its number
    /// (`db.response.status_code`); a waiting attempt, whose duration holds
    /// its deliberate wait on the handover signal, in a series of its own
    /// (`fencepost.attempt = "waiting"`).
    pub(crate) fn call_ended(
        config: &ClientConfig,
        procedure: Procedure,
        elapsed: Duration,
        ended: Result<&str, &Error>,
        waiting: bool,
    ) {
        let target = config.connection_string.telemetry_target();
        let mut labels = vec![
            Label::new("db.system.name", "microsoft.sql_server"),
            Label::new("db.operation.name", "EXECUTE"),
            Label::new("db.stored_procedure.name", procedure.name()),
            Label::new("server.address", target.address),
        ];
        if let Some(namespace) = target.namespace {
            labels.push(Label::new("db.namespace", namespace));
        }
        if let Some(port) = target.port {
            labels.push(Label::new("server.port", port.to_string()));
        }
        match ended {
            Ok(outcome) => labels.push(Label::new("fencepost.outcome", outcome.to_string())),
            Err(error) => {
                labels.push(Label::new("error.type", super::super::span::error_type(error)));
                if let Some(number) = error.server_number() {
                    labels.push(Label::new("db.response.status_code", number.to_string()));
                }
            }
        }
        if waiting {
            labels.push(Label::new("fencepost.attempt", "waiting"));
        }
        histogram!(OPERATION_DURATION, labels).record(elapsed.as_secs_f64());
        let outcome = ended.map_or("error".to_string(), str::to_string);
        match procedure {
            Procedure::Acquire => counter!(ACQUISITIONS, "outcome" => outcome).increment(1),
            Procedure::Publish => counter!(PUBLICATIONS, "outcome" => outcome).increment(1),
            Procedure::Renew => counter!(RENEWALS, "result" => outcome).increment(1),
            _ => {}
        }
    }

    /// One lease's answer in a call that renewed many.
    pub(crate) fn renewal_result(outcome: &'static str) {
        counter!(RENEWALS, "result" => outcome).increment(1);
    }

    pub(crate) fn lease_lost(reason: &'static str) {
        counter!(LEASES_LOST, "reason" => reason).increment(1);
    }

    pub(crate) fn outcome_unknown(settled: String) {
        counter!(OUTCOMES_UNKNOWN, "settled" => settled).increment(1);
    }

    pub(crate) fn handover_wait(waited: Duration) {
        histogram!(HANDOVER_WAIT).record(waited.as_secs_f64());
    }

    pub(crate) fn guards_held(change: f64) {
        gauge!(GUARDS_HELD).increment(change);
    }

    pub(crate) fn pool(pool: &bb8::Pool<super::super::pool::Manager>) {
        sample(POOL_CONNECTIONS, pool);
    }

    pub(crate) fn signal_sessions(pool: &bb8::Pool<super::super::pool::Manager>) {
        sample(SIGNAL_SESSIONS, pool);
    }

    fn sample(name: &'static str, pool: &bb8::Pool<super::super::pool::Manager>) {
        let state = pool.state();
        let in_use = state.connections - state.idle_connections;
        gauge!(name, "state" => "idle").set(f64::from(state.idle_connections));
        gauge!(name, "state" => "in_use").set(f64::from(in_use));
    }
}

#[cfg(not(feature = "metrics"))]
mod on {
    use super::*;

    pub(crate) fn describe() {}
    pub(crate) fn call_ended(_: &ClientConfig, _: Procedure, _: Duration, _: Result<&str, &Error>, _: bool) {}
    pub(crate) fn renewal_result(_: &'static str) {}
    pub(crate) fn lease_lost(_: &'static str) {}
    pub(crate) fn outcome_unknown(_: String) {}
    pub(crate) fn handover_wait(_: Duration) {}
    pub(crate) fn guards_held(_: f64) {}
    pub(crate) fn pool(_: &bb8::Pool<super::super::pool::Manager>) {}
    pub(crate) fn signal_sessions(_: &bb8::Pool<super::super::pool::Manager>) {}
}

pub(crate) use on::*;
