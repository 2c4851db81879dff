//! The default output: a table with one line per rule, then the detail a
//! reviewer acts on.

use std::fmt::Write;

use super::super::{Report, RuleOutcome};

pub(super) fn render(report: &Report) -> String {
    let mut out = String::new();
    let headline = match report.exit_code() {
        super::super::EXIT_CLEAN if !report.accepted_unverifiable.is_empty() => format!(
            "clean: nothing but the shipped procedures can write the fence, {} accepted unverified",
            count(accepted_rules(report).len(), "rule", "rules")
        ),
        super::super::EXIT_CLEAN => "clean: nothing but the shipped procedures can write the fence".to_string(),
        super::super::EXIT_FINDINGS => format!(
            "FAILED: {} found",
            count(report.findings.len(), "way", "ways") + " past the fence"
        ),
        _ => "CANNOT VERIFY: no way past the fence found, but not everything could be checked".to_string(),
    };
    let _ = writeln!(
        out,
        "fencepost check of {}: {headline} (exit {})",
        report.target,
        report.exit_code()
    );
    let _ = writeln!(out);
    let _ = writeln!(out, "{:<6} {:<14} TITLE", "RULE", "RESULT");
    for &rule in &report.rules_checked {
        let result = match report.outcome(rule) {
            RuleOutcome::Passed => "pass".to_string(),
            RuleOutcome::Failed => format!("FAIL ({})", report.findings_of(rule).count()),
            RuleOutcome::CannotVerify => "CANNOT VERIFY".to_string(),
            RuleOutcome::AcceptedUnverifiable => "accepted".to_string(),
        };
        let _ = writeln!(out, "{:<6} {:<14} {}", rule.id(), result, rule.title());
    }
    for f in &report.findings {
        let _ = writeln!(out);
        let _ = writeln!(out, "{} {}", f.rule.id(), f.rule.title());
        if let Some(p) = &f.principal {
            let _ = writeln!(out, "  principal   {p}");
        }
        let _ = writeln!(out, "  object      {}", f.object);
        if let Some(p) = &f.permission {
            let _ = writeln!(out, "  permission  {p}");
        }
        let _ = writeln!(out, "  why         {}", f.why);
        let _ = writeln!(out, "  fix         {}", f.fix);
        path(&mut out, &f.path);
    }
    // Trust is the policy's to give, and the report's to show.
    if !report.trusted.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "trusted by the policy, not findings: {} the fence",
            count(report.trusted.len(), "principal reaches", "principals reach")
        );
        for t in &report.trusted {
            let _ = writeln!(out, "  {} ({}) can {}", t.principal, t.trusted_as, t.reaches.join(", "));
            let _ = writeln!(out, "    {}", super::super::Step::chain(&t.principal, &t.path));
        }
    }
    // One engine gap usually blinds several rules; say it once.
    let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
    for c in &report.cannot_verify {
        match reasons.iter_mut().find(|(r, _)| *r == c.reason) {
            Some((_, rules)) => rules.push(c.rule.id()),
            None => reasons.push((&c.reason, vec![c.rule.id()])),
        }
    }
    for (reason, rules) in reasons {
        let _ = writeln!(out);
        let _ = writeln!(out, "cannot verify {}", rules.join(", "));
        let _ = writeln!(out, "  reason      {reason}");
    }
    // Accepted rules are the operator's word, and the report's to show.
    for c in &report.accepted_unverifiable {
        let _ = writeln!(out);
        let _ = writeln!(out, "accepted unverified {} (by {})", c.rule.id(), c.accepted_by);
        let _ = writeln!(out, "  reason      {}", c.reason);
    }
    out
}

/// The ids of the accepted rules, each once.
fn accepted_rules(report: &Report) -> Vec<&'static str> {
    let mut ids: Vec<&str> = report.accepted_unverifiable.iter().map(|c| c.rule.id()).collect();
    ids.dedup();
    ids
}

/// A finding's path, one step a line with its evidence and its cut.
fn path(out: &mut String, path: &[super::super::Step]) {
    for (i, s) in path.iter().enumerate() {
        let label = if i == 0 { "path" } else { "" };
        let _ = writeln!(out, "  {label:<11} {}. {}", i + 1, s.step);
        let _ = writeln!(out, "  {:<11}    evidence  {}", "", s.evidence);
        let _ = writeln!(out, "  {:<11}    cut       {}", "", s.cut);
    }
}

fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
