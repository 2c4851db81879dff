//! `--format json`: the report plus what a pipeline branches on, with rules
//! named by id.

use serde::Serialize;

use super::super::{AcceptedUnverifiable, CannotVerify, Finding, Report, RuleOutcome, TrustedReach};

#[derive(Serialize)]
struct Document<'a> {
    target: &'a str,
    status: &'static str,
    exit_code: i32,
    rules: Vec<RuleLine>,
    findings: &'a [Finding],
    cannot_verify: &'a [CannotVerify],
    /// Rules that could not be verified and that the operator accepted, each
    /// with the rule's reason and what accepted it: always present, so a
    /// pipeline sees what it took on trust.
    accepted_unverifiable: &'a [AcceptedUnverifiable],
    /// Principals the policy trusts that reach the fence, with their paths.
    trusted: &'a [TrustedReach],
}

#[derive(Serialize)]
struct RuleLine {
    id: &'static str,
    title: &'static str,
    outcome: &'static str,
}

pub(super) fn render(report: &Report) -> String {
    let document = Document {
        target: &report.target,
        status: super::status(report),
        exit_code: report.exit_code(),
        rules: report
            .rules_checked
            .iter()
            .map(|&rule| RuleLine {
                id: rule.id(),
                title: rule.title(),
                outcome: match report.outcome(rule) {
                    RuleOutcome::Passed => "passed",
                    RuleOutcome::Failed => "failed",
                    RuleOutcome::CannotVerify => "cannot_verify",
                    RuleOutcome::AcceptedUnverifiable => "accepted_unverifiable",
                },
            })
            .collect(),
        findings: &report.findings,
        cannot_verify: &report.cannot_verify,
        accepted_unverifiable: &report.accepted_unverifiable,
        trusted: &report.trusted,
    };
    // Only strings, numbers and lists: serializing cannot fail.
    let mut json = serde_json::to_string_pretty(&document).expect("a report serializes to JSON");
    json.push('\n');
    json
}
