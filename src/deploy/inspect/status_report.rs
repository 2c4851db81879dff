//! Everything `fencepost status` shows, read in one place, with the verdict
//! that decides its exit status: the plan, the contract version, the deploy
//! history, the database identity, SECURITY DEFINER on Babelfish and, when
//! asked, the diff of each drifted procedure.

use std::collections::BTreeMap;

use serde::{Serialize, Serializer};

use super::contract_version::read_contract_version;
use super::definition::{definition_diff, read_definition};
use super::history::{DeployHistory, Deployment, read_history};
use super::identity::{read_current_identity, read_recorded_identity};
use super::security_definer::{SecurityDefiner, read as read_security_definer};
use super::status::status;
use crate::client::ContractVersion;
use crate::connection::Connection;
use crate::deploy::error::DeployError;
use crate::deploy::plan::{MigrationStatus, Plan, ProcedureState, ProcedureStatus};
use crate::deploy::rights::DeployRights;
use crate::identity::{self, IdentityState, RecordedIdentity};
use crate::source::Sources;

/// What a status read reads beyond the plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatusOptions {
    /// List the last `n` deployments; `None` reads only the last one, and
    /// lists none.
    pub history: Option<u32>,
    /// Read the definition of each drifted procedure and diff it with the
    /// shipped text.
    pub diff: bool,
}

/// A drifted procedure's definition on the server, beside the shipped text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcedureDiff {
    /// `schema.name`.
    pub name: String,
    /// The unified diff from the shipped text to the server's, or `None`
    /// when this login cannot read the server's definition.
    pub diff: Option<String>,
}

/// What `fencepost status` shows. It serializes as `status --format json`
/// prints it, less the server and database, which the connection string
/// names.
#[derive(Clone, Debug)]
pub struct StatusReport {
    /// What ships compared with what the database holds.
    pub plan: Plan,
    /// The version `fence_api.ContractVersion` answers, `None` where it is
    /// not deployed.
    pub contract_version: Option<ContractVersion>,
    /// The recent deployments.
    pub history: DeployHistory,
    /// Whether [`history`](Self::history) is listed (`--history`), or only
    /// its last deployment shown.
    pub history_listed: bool,
    /// The identity recorded in fence.DatabaseIdentity.
    pub recorded_identity: Option<RecordedIdentity>,
    /// How the database's identity now compares with the recorded one.
    pub identity: IdentityState,
    /// Whether the fence procedures are SECURITY DEFINER where the engine
    /// needs them to be.
    pub security_definer: SecurityDefiner,
    /// The drifted procedures' diffs, in the plan's order; `None` unless
    /// asked for.
    pub diffs: Option<Vec<ProcedureDiff>>,
}

impl StatusReport {
    /// True when nothing needs an operator: the plan is current, the fence
    /// procedures run as their owner, and the database was not restored
    /// since its identity was recorded. An engine that shows no identity is
    /// not a reason to act; a restore is. The rights this login lacks for a
    /// deploy are shown, not judged here: a monitoring login that may only
    /// read looks at a current fence and must see it current.
    pub fn is_current(&self) -> bool {
        self.plan.is_current() && self.security_definer.is_current() && !self.identity.is_changed()
    }
}

/// Reads what `fencepost status` shows, changing nothing.
pub async fn status_report(
    conn: &mut Connection,
    sources: &Sources,
    options: &StatusOptions,
) -> Result<StatusReport, DeployError> {
    let plan = status(conn, sources).await?;
    let security_definer = read_security_definer(conn).await?;
    let contract_version = read_contract_version(conn).await?;
    // Without a list asked for, the last deployment only.
    let history = read_history(conn, options.history.unwrap_or(1)).await?;
    let recorded_identity = read_recorded_identity(conn).await?;
    let identity = identity::compare(
        recorded_identity.as_ref().map(|r| r.recovery_fork),
        read_current_identity(conn).await?,
    );
    let diffs = match options.diff {
        true => Some(drift_diffs(conn, sources, &plan).await?),
        false => None,
    };
    Ok(StatusReport {
        plan,
        contract_version,
        history,
        history_listed: options.history.is_some(),
        recorded_identity,
        identity,
        security_definer,
        diffs,
    })
}

/// Each drifted procedure with its diff from the shipped text.
async fn drift_diffs(conn: &mut Connection, sources: &Sources, plan: &Plan) -> Result<Vec<ProcedureDiff>, DeployError> {
    let mut diffs = Vec::new();
    for status in plan.procedures.iter().filter(|p| p.state == ProcedureState::Drifted) {
        let Some(shipped) = sources.procedures().iter().find(|p| p.qualified_name() == status.name) else {
            continue;
        };
        let server = read_definition(conn, &status.name).await?;
        diffs.push(ProcedureDiff {
            name: status.name.clone(),
            diff: server.map(|text| definition_diff(shipped, &text)),
        });
    }
    Ok(diffs)
}

impl Serialize for StatusReport {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Document {
            current: self.is_current(),
            contract_version: self.contract_version.map(|v| format!("{}.{}", v.major, v.minor)),
            migrations: &self.plan.migrations,
            procedures: &self.plan.procedures,
            rights: &self.plan.rights,
            deployments: Deployments {
                recorded: self.history.recorded,
                last: self.history.recent.first(),
                recent: self.history_listed.then_some(&self.history.recent[..]),
            },
            database_identity: Identity {
                state: self.identity,
                recorded_identity: self.recorded_identity.as_ref(),
                message: self.identity.to_string(),
            },
            diffs: self
                .diffs
                .as_ref()
                .map(|diffs| diffs.iter().map(|d| (d.name.as_str(), d.diff.as_deref())).collect()),
            babelfish_security_definer: match &self.security_definer {
                // Only Babelfish needs it; other engines' documents stay as
                // they were before it.
                SecurityDefiner::NotNeeded => None,
                definer => Some(definer),
            },
        }
        .serialize(serializer)
    }
}

/// The shape of a serialized [`StatusReport`].
#[derive(Serialize)]
struct Document<'a> {
    current: bool,
    contract_version: Option<String>,
    migrations: &'a [MigrationStatus],
    procedures: &'a [ProcedureStatus],
    rights: &'a DeployRights,
    deployments: Deployments<'a>,
    database_identity: Identity<'a>,
    /// By procedure name.
    #[serde(skip_serializing_if = "Option::is_none")]
    diffs: Option<BTreeMap<&'a str, Option<&'a str>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    babelfish_security_definer: Option<&'a SecurityDefiner>,
}

/// The count, the last deployment, and the list when asked for.
#[derive(Serialize)]
struct Deployments<'a> {
    recorded: i32,
    last: Option<&'a Deployment>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recent: Option<&'a [Deployment]>,
}

/// The identity's state (with both forks when they differ), what was
/// recorded, and the line `status` prints.
#[derive(Serialize)]
struct Identity<'a> {
    #[serde(flatten)]
    state: IdentityState,
    recorded_identity: Option<&'a RecordedIdentity>,
    message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(id: i32, migrations: i32) -> Deployment {
        Deployment {
            id,
            deployed_at_utc: "2026-01-02T03:04:05.1234567Z".into(),
            login: "deployer".into(),
            fencepost_version: "9.9.9".into(),
            migrations_applied: migrations,
            procedures_applied: 2,
            database_identity: None,
        }
    }

    fn report(history_listed: bool) -> StatusReport {
        StatusReport {
            plan: Plan {
                cannot_give_roles_to_dbo: None,
                schema_not_owned_by_dbo: None,
                rights: Default::default(),
                migrations: vec![],
                procedures: vec![],
                permissions: vec![],
            },
            contract_version: None,
            history: DeployHistory {
                recorded: 7,
                recent: vec![deployment(7, 0), deployment(6, 3)],
            },
            history_listed,
            recorded_identity: None,
            identity: IdentityState::CannotVerify,
            security_definer: SecurityDefiner::NotNeeded,
            diffs: None,
        }
    }

    #[test]
    fn the_json_carries_the_state_the_message_and_the_list_only_when_asked() {
        let document = serde_json::to_value(report(false)).unwrap();
        let identity = &document["database_identity"];
        assert_eq!(identity["state"], "cannot_verify");
        assert_eq!(
            identity["message"],
            "cannot verify: the engine does not show a recovery fork"
        );
        assert!(identity["recorded_identity"].is_null());
        let history = &document["deployments"];
        assert_eq!(history["recorded"], 7);
        assert_eq!(history["last"]["login"], "deployer");
        assert!(history.get("recent").is_none());
        let listed = serde_json::to_value(report(true)).unwrap();
        assert_eq!(listed["deployments"]["recent"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn the_diffs_and_the_security_definer_appear_only_when_they_apply() {
        let document = serde_json::to_value(report(false)).unwrap();
        assert!(document.get("diffs").is_none());
        assert!(document.get("babelfish_security_definer").is_none());
        assert_eq!(document["current"], true);
        let mut drifted = report(false);
        drifted.diffs = Some(vec![ProcedureDiff {
            name: "fence_api.A".into(),
            diff: None,
        }]);
        drifted.security_definer = SecurityDefiner::Babelfish {
            not_security_definer: vec!["fence_api.a".into()],
        };
        let document = serde_json::to_value(&drifted).unwrap();
        assert!(document["diffs"]["fence_api.A"].is_null());
        assert_eq!(document["babelfish_security_definer"]["state"], "babelfish");
        assert_eq!(document["current"], false);
    }
}
