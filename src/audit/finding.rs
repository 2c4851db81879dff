//! What a rule reports: a finding (the fence is open) or a rule it could not
//! verify (the catalog does not show enough to tell).

use serde::{Deserialize, Serialize};

use super::Rule;

/// One way past the fence, with the statement that closes it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Finding {
    /// The rule that found it.
    pub rule: Rule,
    /// The principal who can get past the fence, when it is about one.
    pub principal: Option<String>,
    /// The object, schema, database or module it is about.
    pub object: String,
    /// The permission, membership or construct at fault.
    pub permission: Option<String>,
    /// Why it breaks the fence.
    pub why: String,
    /// The statement (or step) that would close it.
    pub fix: String,
    /// How the principal gets there, step by step, when the reachability
    /// rule traced it: each step with its catalog evidence and the statement
    /// that cuts it. Empty for a finding about no principal's path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub path: Vec<Step>,
}

/// One step of a path to the fence: one principal becoming another,
/// changing code, or holding a right on a goal.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Step {
    /// What the step does (`member of db_datawriter`).
    pub step: String,
    /// Where the catalog shows it (`sys.database_role_members`).
    pub evidence: String,
    /// The statement that removes this step.
    pub cut: String,
}

impl Step {
    /// The steps as one line: `etl → member of db_datawriter → ...`.
    pub fn chain(start: &str, path: &[Step]) -> String {
        let mut line = start.to_string();
        for s in path {
            line.push_str(" → ");
            line.push_str(&s.step);
        }
        line
    }
}

/// A rule whose answer the catalog cannot give, with the reason.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CannotVerify {
    /// The rule.
    pub rule: Rule,
    /// What the catalog lacks.
    pub reason: String,
}

/// A rule that could not be verified and that the operator accepted as one
/// the platform can never show (`check --accept-unverifiable`): still
/// reported, with the rule's reason and who accepted it, but no longer
/// keeping the check from passing.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AcceptedUnverifiable {
    /// The rule.
    pub rule: Rule,
    /// What the catalog lacks, as the rule gave it.
    pub reason: String,
    /// What accepted it (`--accept-unverifiable`, `environment prod`).
    pub accepted_by: String,
}
