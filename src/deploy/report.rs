//! What a deploy changed: the report of one that finished, and what one that
//! failed part-way had committed.

use std::fmt;

use serde::Serialize;
use serde::ser::{SerializeStruct, Serializer};

use super::blocker::Blocker;
use super::identity::{IdentityState, RESTORED_MESSAGE};
use super::plan::{Plan, ProcedureState};

/// One thing a deploy changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Change {
    /// A migration was applied.
    Migration {
        /// e.g. `V1__lease_tables`.
        name: String,
    },
    /// A procedure was created or altered to the shipped text.
    Procedure {
        /// `schema.name`.
        name: String,
        /// Why it was deployed: missing, changed, drifted or untracked.
        was: ProcedureState,
    },
    /// A procedure fencepost had deployed and no longer ships was dropped.
    RetiredProcedure {
        /// `schema.name`.
        name: String,
    },
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Migration { name } => write!(f, "migration {name}"),
            Self::Procedure { name, .. } => write!(f, "procedure {name}"),
            Self::RetiredProcedure { name } => write!(f, "the drop of retired procedure {name}"),
        }
    }
}

/// What a deploy found and did, or, for a dry run, what one would do.
#[derive(Clone, Debug)]
pub struct MigrateReport {
    /// The plan, as found before any change.
    pub plan: Plan,
    /// What was changed, in order; empty for a dry run or an up-to-date database.
    pub changes: Vec<Change>,
    /// Permission scripts re-applied (they are idempotent); empty for a dry run.
    pub permissions_applied: Vec<String>,
    /// True when nothing was changed because it was a dry run.
    pub dry_run: bool,
    /// How long the deploy waited for another deployment's lock.
    pub lock_wait_seconds: f64,
    /// Round trips made to the server, lock included.
    pub round_trips: usize,
    /// The id of the fence.Deployment row that records this deploy; `None`
    /// for a dry run, or sources that do not ship the table.
    pub deployment_id: Option<i32>,
    /// How the database identity compared with the recorded one after the
    /// deploy; `None` when nothing was recorded.
    pub database_identity: Option<IdentityState>,
    /// What needs an operator although the deploy succeeded.
    pub warnings: Vec<String>,
    /// For a dry run, what would stop a deploy of the plan with the same
    /// options, as [`Plan::would_stop`] finds it; `None` for a deploy,
    /// which stops with it as its error instead.
    pub would_stop: Option<Blocker>,
}

/// The warnings only when there are some, and `would_stop` (as the
/// blocker's message, or null) only for a dry run.
impl Serialize for MigrateReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut document = serializer.serialize_struct("MigrateReport", 10)?;
        document.serialize_field("plan", &self.plan)?;
        document.serialize_field("changes", &self.changes)?;
        document.serialize_field("permissions_applied", &self.permissions_applied)?;
        document.serialize_field("dry_run", &self.dry_run)?;
        document.serialize_field("lock_wait_seconds", &self.lock_wait_seconds)?;
        document.serialize_field("round_trips", &self.round_trips)?;
        document.serialize_field("deployment_id", &self.deployment_id)?;
        document.serialize_field("database_identity", &self.database_identity)?;
        match self.warnings.is_empty() {
            true => document.skip_field("warnings")?,
            false => document.serialize_field("warnings", &self.warnings)?,
        }
        match self.dry_run {
            true => document.serialize_field("would_stop", &self.would_stop.as_ref().map(ToString::to_string))?,
            false => document.skip_field("would_stop")?,
        }
        document.end()
    }
}

impl MigrateReport {
    /// The warnings a deploy that found `identity` gives.
    pub fn identity_warnings(identity: Option<IdentityState>) -> Vec<String> {
        match identity {
            Some(state) if state.is_changed() => vec![RESTORED_MESSAGE.to_owned()],
            _ => Vec::new(),
        }
    }
}

/// What a deploy that failed part-way had committed. It stays: each
/// migration and procedure committed on its own, and the next deploy
/// continues from there.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Committed {
    /// Migrations and procedures committed before the failure, in order.
    pub changes: Vec<Change>,
    /// Permission scripts applied in full before the failure.
    pub permissions_applied: Vec<String>,
    /// Procedures this deploy created that may hold none of their grants:
    /// the permission scripts grant them, and they did not all run.
    pub without_grants: Vec<String>,
}

impl Committed {
    /// What `changes` and `permissions_applied` leave committed, when the
    /// permission scripts did not all run.
    pub fn new(changes: Vec<Change>, permissions_applied: Vec<String>) -> Self {
        let without_grants = changes
            .iter()
            .filter_map(|c| match c {
                Change::Procedure {
                    name,
                    was: ProcedureState::Missing,
                } => Some(name.clone()),
                _ => None,
            })
            .collect();
        Self {
            changes,
            permissions_applied,
            without_grants,
        }
    }

    /// True when nothing was committed.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.permissions_applied.is_empty()
    }
}

impl fmt::Display for Committed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let done: Vec<String> = self
            .changes
            .iter()
            .map(ToString::to_string)
            .chain(self.permissions_applied.iter().map(|p| format!("permissions/{p}")))
            .collect();
        if done.is_empty() {
            write!(f, "nothing was committed")?;
        } else {
            write!(f, "committed and kept: {}", done.join(", "))?;
        }
        if !self.without_grants.is_empty() {
            write!(
                f,
                "; created without their grants until the permission scripts run: {}",
                self.without_grants.join(", ")
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_procedure_is_listed_as_without_grants_and_an_altered_one_is_not() {
        let committed = Committed::new(
            vec![
                Change::Migration { name: "V2__b".into() },
                Change::Procedure {
                    name: "fence_api.New".into(),
                    was: ProcedureState::Missing,
                },
                Change::Procedure {
                    name: "fence_api.Old".into(),
                    was: ProcedureState::Changed,
                },
            ],
            vec!["010_roles.sql".into()],
        );
        assert_eq!(committed.without_grants, ["fence_api.New"]);
        assert_eq!(
            committed.to_string(),
            "committed and kept: migration V2__b, procedure fence_api.New, procedure fence_api.Old, \
             permissions/010_roles.sql; created without their grants until the permission scripts run: \
             fence_api.New"
        );
    }
}
