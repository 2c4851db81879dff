//! The result of a check: findings, rules that could not be verified, and the
//! rules that ran.

use serde::{Deserialize, Serialize};

use super::finding::Step;
use super::{CannotVerify, Finding, Rule};

/// The result of [`evaluate`](super::evaluate) or
/// [`lint_offline`](super::lint_offline).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// What was checked: a database name, or the shipped sources.
    pub target: String,
    /// Every rule that was applied, in id order.
    pub rules_checked: Vec<Rule>,
    /// Ways past the fence, in rule order.
    pub findings: Vec<Finding>,
    /// Rules the catalog could not answer, in rule order.
    pub cannot_verify: Vec<CannotVerify>,
    /// Principals that reach the fence and that the policy trusts (dbo,
    /// db_owner, the names given with `--trust`), with their paths: not
    /// findings, but never left unsaid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted: Vec<TrustedReach>,
}

/// A trusted principal that can write the fence, run fence_admin or change
/// the shipped procedures, and the path it has.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TrustedReach {
    /// The principal (`deployer`, `login sa`).
    pub principal: String,
    /// Why it is trusted: named by the policy, or a member of a principal
    /// that is (`member of db_owner`).
    pub trusted_as: String,
    /// What it reaches (`write the fence tables`).
    pub reaches: Vec<String>,
    /// Its shortest path to the first of them.
    pub path: Vec<Step>,
}

/// How a single rule came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleOutcome {
    /// No finding and nothing left unverified.
    Passed,
    /// At least one finding.
    Failed,
    /// No finding, but the catalog could not show everything the rule needs.
    CannotVerify,
}

impl Report {
    /// The process exit status for pipelines: 0 when clean, 1 when there is a
    /// finding (a proven way past the fence outranks what could not be
    /// checked), 2 when nothing was found but something could not be verified.
    pub fn exit_code(&self) -> i32 {
        if !self.findings.is_empty() {
            1
        } else if !self.cannot_verify.is_empty() {
            2
        } else {
            0
        }
    }

    /// How `rule` came out.
    pub fn outcome(&self, rule: Rule) -> RuleOutcome {
        if self.findings.iter().any(|f| f.rule == rule) {
            RuleOutcome::Failed
        } else if self.cannot_verify.iter().any(|c| c.rule == rule) {
            RuleOutcome::CannotVerify
        } else {
            RuleOutcome::Passed
        }
    }

    /// The findings of one rule.
    pub fn findings_of(&self, rule: Rule) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(move |f| f.rule == rule)
    }

    /// The reasons one rule could not be verified.
    pub fn cannot_verify_of(&self, rule: Rule) -> impl Iterator<Item = &CannotVerify> {
        self.cannot_verify.iter().filter(move |c| c.rule == rule)
    }

    /// Sorts and de-duplicates, so output is stable whatever order the
    /// catalog listed things in.
    pub(crate) fn normalize(mut self) -> Self {
        self.rules_checked.sort();
        self.rules_checked.dedup();
        self.findings.sort();
        self.findings.dedup();
        self.cannot_verify.sort();
        self.cannot_verify.dedup();
        self.trusted.sort();
        self.trusted.dedup();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding() -> Finding {
        Finding {
            path: Vec::new(),
            rule: Rule::Trustworthy,
            principal: None,
            object: "db".into(),
            permission: None,
            why: "w".into(),
            fix: "f".into(),
        }
    }

    #[test]
    fn exit_code_is_zero_only_when_clean() {
        let mut report = Report {
            rules_checked: vec![Rule::Trustworthy],
            ..Report::default()
        };
        assert_eq!(report.exit_code(), 0);
        report.cannot_verify.push(CannotVerify {
            rule: Rule::Trustworthy,
            reason: "r".into(),
        });
        assert_eq!(report.exit_code(), 2);
        report.findings.push(finding());
        assert_eq!(report.exit_code(), 1);
        report.cannot_verify.clear();
        assert_eq!(report.exit_code(), 1);
    }
}
