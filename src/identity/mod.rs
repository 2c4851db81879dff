//! The database's identity: on SQL Server the recovery fork of
//! `sys.database_recovery_status`, which changes when a database is restored
//! from a backup or a secondary takes over. A fence's generations only rise
//! within one identity: after a restore the database may hold generations
//! lower than ones already handed out, so a stale holder could publish again.
//! The first deploy that can read the identity records it in
//! fence.DatabaseIdentity; `fencepost lease recover` acknowledges a new one
//! after raising every generation. `status` and `check` compare the two.
//!
//! What the deploy, the audit and the lease commands share: the types, the
//! comparison, the SQL that reads either identity and the words an operator
//! is told. The two reads live in [`read`](read_current) beside it.

use std::fmt;

use serde::Serialize;
use uuid::Uuid;

mod read;

pub use read::{ReadError, read_current, read_recorded};

/// What `status`, `check` and `migrate` tell an operator when the identity
/// changed.
pub const RESTORED_MESSAGE: &str =
    "the database was restored or failed over since its identity was recorded: run `fencepost lease recover`";

/// Why an identity cannot be compared on engines that do not show one.
pub const CANNOT_VERIFY_REASON: &str = "the engine does not show a recovery fork";

/// The current identity as one row of one `uniqueidentifier` column, or no
/// row where the engine shows none (Babelfish has the view, empty).
pub const CURRENT_IDENTITY_SQL: &str =
    "SELECT recovery_fork_guid FROM sys.database_recovery_status WHERE database_id = DB_ID()";

/// The recorded identity as one row (fork, when, by whom), or no row when none
/// is recorded or the table does not exist yet (a database deployed before
/// it). Through `sp_executesql` so that a missing table is not a compile
/// error of the caller's batch. Babelfish writes style 127 with a space for
/// the `T`.
pub const RECORDED_IDENTITY_SQL: &str = "IF OBJECT_ID(N'fence.DatabaseIdentity', N'U') IS NOT NULL
    EXEC sys.sp_executesql N'SELECT RecoveryForkGuid, REPLACE(CONVERT(nvarchar(33), RecordedAtUtc, 127), N'' '', N''T'') + N''Z'', RecordedBy
        FROM fence.DatabaseIdentity WHERE Singleton = 1';";

/// The identity recorded in fence.DatabaseIdentity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RecordedIdentity {
    /// The recovery fork.
    pub recovery_fork: Uuid,
    /// When it was recorded (RFC 3339, UTC).
    pub recorded_at_utc: String,
    /// `deploy` or `recover`.
    pub recorded_by: String,
}

/// How the database's identity compares with the one recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum IdentityState {
    /// The recorded identity is the current one.
    Matches,
    /// None is recorded yet, and the engine shows one (the next deploy
    /// records it).
    NotRecorded,
    /// The database was restored or failed over since the identity was
    /// recorded.
    Changed {
        /// What was recorded.
        recorded: Uuid,
        /// What the database shows now.
        current: Uuid,
    },
    /// The engine does not show the identity, so a restore cannot be told.
    CannotVerify,
}

/// Compares the recorded identity with the current one. Pure, so that the
/// engines this runs on (where one of the two is always missing) do not
/// decide which cases are tested.
pub fn compare(recorded: Option<Uuid>, current: Option<Uuid>) -> IdentityState {
    match (recorded, current) {
        (_, None) => IdentityState::CannotVerify,
        (None, Some(_)) => IdentityState::NotRecorded,
        (Some(recorded), Some(current)) if recorded == current => IdentityState::Matches,
        (Some(recorded), Some(current)) => IdentityState::Changed { recorded, current },
    }
}

impl IdentityState {
    /// True when the database was restored or failed over.
    pub fn is_changed(self) -> bool {
        matches!(self, Self::Changed { .. })
    }
}

/// The words `status` shows after "database identity: ".
impl fmt::Display for IdentityState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Matches => write!(f, "recorded, matches"),
            Self::NotRecorded => write!(f, "not recorded yet: `fencepost migrate` records it"),
            Self::Changed { recorded, current } => write!(
                f,
                "restored or failed over (recorded {recorded}, now {current}): run `fencepost lease recover`"
            ),
            Self::CannotVerify => write!(f, "cannot verify: {CANNOT_VERIFY_REASON}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Uuid = Uuid::from_u128(0xa);
    const B: Uuid = Uuid::from_u128(0xb);

    #[test]
    fn the_same_fork_matches() {
        assert_eq!(compare(Some(A), Some(A)), IdentityState::Matches);
    }

    #[test]
    fn another_fork_is_a_restore_or_failover_naming_both() {
        let state = compare(Some(A), Some(B));
        assert_eq!(
            state,
            IdentityState::Changed {
                recorded: A,
                current: B
            }
        );
        assert!(state.is_changed());
        let text = state.to_string();
        assert!(text.contains(&A.to_string()) && text.contains(&B.to_string()), "{text}");
        assert!(
            text.contains("restored or failed over") && text.contains("fencepost lease recover"),
            "{text}"
        );
    }

    #[test]
    fn nothing_recorded_on_an_engine_that_shows_the_fork_is_not_recorded() {
        assert_eq!(compare(None, Some(A)), IdentityState::NotRecorded);
    }

    #[test]
    fn an_engine_that_shows_no_fork_cannot_verify_whatever_was_recorded() {
        assert_eq!(compare(None, None), IdentityState::CannotVerify);
        assert_eq!(compare(Some(A), None), IdentityState::CannotVerify);
        assert_eq!(
            IdentityState::CannotVerify.to_string(),
            "cannot verify: the engine does not show a recovery fork"
        );
        assert!(!IdentityState::CannotVerify.is_changed());
    }

    #[test]
    fn states_serialize_with_a_tag() {
        let json = serde_json::to_value(compare(Some(A), Some(B))).unwrap();
        assert_eq!(json["state"], "changed");
        assert_eq!(json["recorded"], A.to_string());
        assert_eq!(
            serde_json::to_value(IdentityState::Matches).unwrap()["state"],
            "matches"
        );
    }
}
