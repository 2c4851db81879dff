//! The result of a check: findings, rules that could not be verified, and the
//! rules that ran.

use serde::{Deserialize, Serialize};

use super::finding::Step;
use super::{AcceptedUnverifiable, CannotVerify, Finding, Rule};

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
    /// Rules that could not be verified and that the operator accepted by
    /// name as ones the platform can never show: recorded, never silent, but
    /// no longer keeping the check from passing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accepted_unverifiable: Vec<AcceptedUnverifiable>,
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
    /// No finding, and what the catalog could not show the operator accepted
    /// as something this platform never shows.
    AcceptedUnverifiable,
}

/// Exit status: clean, or only accepted "cannot verify" rules.
pub const EXIT_CLEAN: i32 = 0;
/// Exit status: at least one finding.
pub const EXIT_FINDINGS: i32 = 1;
/// Exit status: no finding, but a rule could not be verified (the login
/// lacks the rights to see, or the platform cannot show it) and was not
/// accepted. Distinct from 2, which the command uses when it could not run
/// at all (no connection, bad input).
pub const EXIT_CANNOT_VERIFY: i32 = 3;

impl Report {
    /// The process exit status for pipelines: 1 when there is a finding (a
    /// proven way past the fence outranks what could not be checked), else 3
    /// when something could not be verified and was not accepted, else 0
    /// (clean, accepted rules included).
    pub fn exit_code(&self) -> i32 {
        if !self.findings.is_empty() {
            EXIT_FINDINGS
        } else if !self.cannot_verify.is_empty() {
            EXIT_CANNOT_VERIFY
        } else {
            EXIT_CLEAN
        }
    }

    /// Accepts `rule`'s "cannot verify" as something this platform can never
    /// show, recording `accepted_by` (the flag or file that said so) beside
    /// the rule's reason. Only a rule whose outcome is
    /// [`RuleOutcome::CannotVerify`] changes: one with findings (and what it
    /// could not verify beside them) or one that passed stays as it was.
    /// Returns whether the rule was accepted.
    pub fn accept_unverifiable(&mut self, rule: Rule, accepted_by: &str) -> bool {
        if self.outcome(rule) != RuleOutcome::CannotVerify {
            return false;
        }
        let (accepted, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.cannot_verify)
            .into_iter()
            .partition(|c| c.rule == rule);
        self.cannot_verify = kept;
        self.accepted_unverifiable
            .extend(accepted.into_iter().map(|c| AcceptedUnverifiable {
                rule: c.rule,
                reason: c.reason,
                accepted_by: accepted_by.to_string(),
            }));
        self.accepted_unverifiable.sort();
        self.accepted_unverifiable.dedup();
        true
    }

    /// How `rule` came out.
    pub fn outcome(&self, rule: Rule) -> RuleOutcome {
        if self.findings.iter().any(|f| f.rule == rule) {
            RuleOutcome::Failed
        } else if self.cannot_verify.iter().any(|c| c.rule == rule) {
            RuleOutcome::CannotVerify
        } else if self.accepted_unverifiable.iter().any(|c| c.rule == rule) {
            RuleOutcome::AcceptedUnverifiable
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

    /// The accepted "cannot verify" reasons of one rule.
    pub fn accepted_of(&self, rule: Rule) -> impl Iterator<Item = &AcceptedUnverifiable> {
        self.accepted_unverifiable.iter().filter(move |c| c.rule == rule)
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
        self.accepted_unverifiable.sort();
        self.accepted_unverifiable.dedup();
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
        assert_eq!(report.exit_code(), 3);
        report.findings.push(finding());
        assert_eq!(report.exit_code(), 1);
        report.cannot_verify.clear();
        assert_eq!(report.exit_code(), 1);
    }

    fn unverified(rule: Rule) -> CannotVerify {
        CannotVerify {
            rule,
            reason: "the platform hides it".into(),
        }
    }

    #[test]
    fn accepting_a_rule_that_cannot_verify_records_it_and_clears_the_exit() {
        let mut report = Report {
            rules_checked: vec![Rule::ServerControl, Rule::ServiceIsDbo],
            cannot_verify: vec![unverified(Rule::ServerControl), unverified(Rule::ServiceIsDbo)],
            ..Report::default()
        };
        assert!(report.accept_unverifiable(Rule::ServerControl, "--accept-unverifiable"));
        assert_eq!(report.outcome(Rule::ServerControl), RuleOutcome::AcceptedUnverifiable);
        assert_eq!(report.exit_code(), 3, "FP015 is still unverified");
        assert!(report.accept_unverifiable(Rule::ServiceIsDbo, "environment prod"));
        assert_eq!(report.exit_code(), 0);
        assert_eq!(
            report.accepted_unverifiable,
            [
                AcceptedUnverifiable {
                    rule: Rule::ServerControl,
                    reason: "the platform hides it".into(),
                    accepted_by: "--accept-unverifiable".into(),
                },
                AcceptedUnverifiable {
                    rule: Rule::ServiceIsDbo,
                    reason: "the platform hides it".into(),
                    accepted_by: "environment prod".into(),
                },
            ]
        );
    }

    #[test]
    fn accepting_a_rule_that_passed_or_found_something_changes_nothing() {
        let mut report = Report {
            rules_checked: vec![Rule::Trustworthy, Rule::GuestConnect],
            findings: vec![finding()],
            cannot_verify: vec![unverified(Rule::Trustworthy)],
            ..Report::default()
        };
        let before = report.clone();
        assert!(!report.accept_unverifiable(Rule::Trustworthy, "--accept-unverifiable"));
        assert!(!report.accept_unverifiable(Rule::GuestConnect, "--accept-unverifiable"));
        assert_eq!(report, before);
        assert_eq!(report.exit_code(), 1);
    }
}
