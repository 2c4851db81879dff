//! Every check, in the order a run takes them: the design's semantics
//! first, then the behaviours of a caller's transaction, then what needs
//! other rights or a scratch database.

mod attention;
mod caller_modes;
mod cut;
mod database_wide;
mod expiry;
mod generation;
mod handover;
mod list_prefix;
mod operator;
mod publish_once;
mod races;
mod recovery_fork;
mod row_lock;
mod service_login;

use super::check::Check;
pub(crate) use database_wide::{NOT_ASKED, is_database_wide};

/// The checks a run takes, in order.
pub(crate) const ALL: &[Check] = &[
    handover::SUPERSEDED_PUBLISH,
    handover::LATE_CALLS,
    expiry::CHECK,
    publish_once::ONE_PER_GENERATION,
    publish_once::REPLAY,
    generation::CHECK,
    races::OVERLAPPING_ACQUIRES,
    races::PUBLISH_RACES_ACQUIRE,
    cut::CHECK,
    row_lock::HELD_BY_CALLER,
    row_lock::WAIT_IN_CALLER_TRANSACTION,
    caller_modes::IMPLICIT_TRANSACTIONS,
    caller_modes::SNAPSHOT,
    caller_modes::SAVEPOINT,
    attention::CHECK,
    operator::FORCE_RELEASE,
    list_prefix::CHECK,
    service_login::CHECK,
    recovery_fork::CHECK,
    database_wide::RECOVER_BEHIND_OPEN_TRANSACTION,
    database_wide::PROVISION_BESIDE_RECOVER,
    database_wide::PRUNE_BELOW_ESCALATION,
];

/// The names of every check, in order.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    ALL.iter().map(|c| c.name)
}
