//! Snapshots of each output format, for a clean deployment and for one with
//! findings and rules that cannot be verified.

use crate::support;

use fencepost::audit::{Engine, Format, ObjectKind, Policy, Report, Rule, RuleOutcome, Visibility, evaluate, render};
use support::fixtures::*;

pub(crate) fn clean_report() -> Report {
    evaluate(&clean(), &Policy::default())
}

/// The clean deployment as `read_catalog` sees it on Babelfish, after two
/// attacks. Babelfish does not chain ownership, its `sys.database_permissions`
/// is always empty, it has no `sys.server_permissions`, no fn_my_permissions
/// (only sysadmin establishes what the checking login sees), no TRUSTWORTHY
/// database and no `cross db ownership chaining` option, and it lists object
/// names lower-cased.
pub(crate) fn broken_report() -> Report {
    let mut c = clean();
    c.engine = Engine {
        chains_ownership: false,
        azure_database: false,
        product: "Babelfish for PostgreSQL".into(),
        security_definer: None,
    };
    c.permissions.clear();
    c.visibility = Some(Visibility {
        sysadmin: true,
        view_definition: None,
        view_security_definition: None,
    });
    c.trustworthy_databases = Some(Vec::new());
    c.server_settings = None;
    let server = c.server.as_mut().expect("the clean fixture shows server facts");
    server.permissions_unreadable =
        Some("Babelfish for PostgreSQL has no server permission catalog (sys.server_permissions)".into());
    c.memberships.push(member("db_datawriter", "orders_svc"));
    c.objects.push(module(
        "dbo",
        "RepairLease",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.RepairLease AS UPDATE fence.Resource SET Owner = NULL;",
    ));
    for o in &mut c.objects {
        o.name = o.name.to_lowercase();
    }
    evaluate(&c, &Policy::default())
}

#[test]
fn text_of_a_clean_check() {
    insta::assert_snapshot!(render(&clean_report(), Format::Text));
}

#[test]
fn text_with_findings_and_cannot_verify() {
    insta::assert_snapshot!(render(&broken_report(), Format::Text));
}

#[test]
fn json_with_findings_and_cannot_verify() {
    let out = render(&broken_report(), Format::Json);
    let parsed: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(parsed["exit_code"], 1);
    insta::assert_snapshot!(out);
}

#[test]
fn json_of_a_clean_check() {
    let out = render(&clean_report(), Format::Json);
    let parsed: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(parsed["status"], "clean");
    assert_eq!(parsed["rules"].as_array().unwrap().len(), Rule::LIVE.len());
}

#[test]
fn junit_has_one_test_case_per_rule() {
    let out = render(&broken_report(), Format::Junit);
    assert_eq!(out.matches("<testcase ").count(), Rule::LIVE.len());
    assert_eq!(out.matches("<failure ").count(), 2);
    insta::assert_snapshot!(out);
}

#[test]
fn junit_of_a_clean_check() {
    let out = render(&clean_report(), Format::Junit);
    assert!(!out.contains("<failure") && !out.contains("<error"));
    insta::assert_snapshot!(out);
}

/// A clean deployment on Azure SQL Database, where FP002 and FP015 can never
/// be verified, with both accepted as `check --accept-unverifiable
/// FP002,FP015` accepts them.
pub(crate) fn azure_accepted_report() -> Report {
    let mut c = clean();
    c.engine.azure_database = true;
    c.engine.product = "Azure SQL Database".into();
    let mut report = evaluate(&c, &Policy::default());
    assert_eq!(
        report.exit_code(),
        3,
        "unaccepted, the platform's gaps keep it from passing"
    );
    for rule in [Rule::ServerControl, Rule::ServiceIsDbo] {
        assert!(report.accept_unverifiable(rule, "--accept-unverifiable"));
    }
    report
}

#[test]
fn a_clean_azure_catalog_passes_with_its_accepted_rules_recorded_as_text() {
    let report = azure_accepted_report();
    assert_eq!(report.exit_code(), 0);
    insta::assert_snapshot!(render(&report, Format::Text));
}

#[test]
fn a_clean_azure_catalog_passes_with_its_accepted_rules_recorded_as_json() {
    let out = render(&azure_accepted_report(), Format::Json);
    let parsed: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(parsed["status"], "clean");
    assert_eq!(parsed["exit_code"], 0);
    let outcomes: Vec<(&str, &str)> = parsed["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["outcome"] != "passed")
        .map(|r| (r["id"].as_str().unwrap(), r["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(
        outcomes,
        [("FP002", "accepted_unverifiable"), ("FP015", "accepted_unverifiable")]
    );
    insta::assert_snapshot!(out);
}

#[test]
fn a_clean_azure_catalog_passes_with_its_accepted_rules_recorded_as_junit() {
    let out = render(&azure_accepted_report(), Format::Junit);
    assert!(!out.contains("<failure") && !out.contains("<error"), "{out}");
    assert_eq!(out.matches("<skipped ").count(), 2, "{out}");
    insta::assert_snapshot!(out);
}

#[test]
fn accepting_a_rule_that_found_something_leaves_it_failed_in_every_format() {
    let mut report = broken_report();
    let failed: Vec<Rule> = report.findings.iter().map(|f| f.rule).collect();
    let before = report.clone();
    for rule in failed {
        assert!(!report.accept_unverifiable(rule, "--accept-unverifiable"));
    }
    let passed = Rule::LIVE
        .into_iter()
        .find(|&r| report.outcome(r) == RuleOutcome::Passed)
        .expect("a rule that passed");
    assert!(!report.accept_unverifiable(passed, "--accept-unverifiable"));
    assert_eq!(report, before);
    assert_eq!(render(&report, Format::Json), render(&before, Format::Json));
}
