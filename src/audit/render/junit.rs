//! `--format junit`: one test case per rule, so CI systems list each rule
//! as passed, failed (findings) or errored (cannot verify).

use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};

use super::super::{AcceptedUnverifiable, Report, Rule, RuleOutcome, Step};

pub(super) fn render(report: &Report) -> String {
    let mut suite = TestSuite::new(format!("fencepost check of {}", report.target));
    for &rule in &report.rules_checked {
        let status = match report.outcome(rule) {
            RuleOutcome::Passed => TestCaseStatus::success(),
            RuleOutcome::Failed => {
                let findings: Vec<String> = report
                    .findings_of(rule)
                    .map(|f| {
                        let path: String = f
                            .path
                            .iter()
                            .enumerate()
                            .map(|(i, s)| format!("\npath {}: {} [{}] cut: {}", i + 1, s.step, s.evidence, s.cut))
                            .collect();
                        format!(
                            "{} {} {}: {}\nfix: {}{path}",
                            f.principal.as_deref().unwrap_or("-"),
                            f.object,
                            f.permission.as_deref().unwrap_or("-"),
                            f.why,
                            f.fix
                        )
                    })
                    .collect();
                let mut description = findings.join("\n\n");
                for c in report.cannot_verify_of(rule) {
                    description.push_str(&format!("\n\ncannot verify the rest: {}", c.reason));
                }
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                status
                    .set_message(format!("{} finding(s)", findings.len()))
                    .set_type("finding")
                    .set_description(description);
                status
            }
            RuleOutcome::CannotVerify => {
                let reasons: Vec<&str> = report.cannot_verify_of(rule).map(|c| c.reason.as_str()).collect();
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
                status
                    .set_message("cannot verify")
                    .set_type("cannot_verify")
                    .set_description(reasons.join("\n"));
                status
            }
            // Not verified, and not a failure either: a CI system lists it as
            // skipped, with the rule's reason and what accepted it.
            RuleOutcome::AcceptedUnverifiable => {
                let accepted: Vec<&AcceptedUnverifiable> = report.accepted_of(rule).collect();
                let by: Vec<&str> = accepted.iter().map(|c| c.accepted_by.as_str()).collect();
                let reasons: Vec<&str> = accepted.iter().map(|c| c.reason.as_str()).collect();
                let mut status = TestCaseStatus::skipped();
                status
                    .set_message(format!("accepted-unverifiable (by {})", by.join(", ")))
                    .set_type("accepted_unverifiable")
                    .set_description(reasons.join("\n"));
                status
            }
        };
        let mut case = TestCase::new(format!("{} {}", rule.id(), rule.title()), status);
        case.set_classname("fencepost.check");

        // The reachability rule's case says whom the policy trusts to reach
        // the fence, whatever its outcome.
        if rule == Rule::ReachesFence && !report.trusted.is_empty() {
            let trusted: Vec<String> = report
                .trusted
                .iter()
                .map(|t| {
                    format!(
                        "trusted: {} ({}) can {}: {}",
                        t.principal,
                        t.trusted_as,
                        t.reaches.join(", "),
                        Step::chain(&t.principal, &t.path)
                    )
                })
                .collect();
            case.set_system_out(trusted.join("\n"));
        }
        suite.add_test_case(case);
    }
    let mut junit = quick_junit::Report::new("fencepost check");
    junit.add_test_suite(suite);
    // Serializing to memory fails only on invalid XML names, and ours are fixed.
    let mut xml = junit.to_string().expect("a report serializes to JUnit XML");
    if !xml.ends_with('\n') {
        xml.push('\n');
    }
    xml
}
