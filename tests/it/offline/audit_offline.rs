//! `check --offline` over the T-SQL that ships, and over edits of it that
//! each break one rule.

use crate::support;

use fencepost::audit::{Policy, Report, Rule, ShippedScripts, Source, lint_offline};
use fencepost::source::normalize;

fn shipped() -> ShippedScripts {
    let pairs = |v: Vec<(String, String)>| v.into_iter().map(|(n, t)| Source::new(n, t)).collect();
    ShippedScripts {
        procedures: pairs(support::fixtures::shipped_procedures()),
        permissions: pairs(support::fixtures::shipped_permissions()),
    }
}

fn lint(sources: &ShippedScripts) -> Report {
    lint_offline(sources, &Policy::default())
}

fn ids(report: &Report) -> Vec<(&'static str, String)> {
    report
        .findings
        .iter()
        .map(|f| (f.rule.id(), f.object.clone()))
        .collect()
}

#[test]
fn what_ships_passes() {
    let report = lint(&shipped());
    assert_eq!(report.findings, vec![], "{report:#?}");
    assert_eq!(report.exit_code(), 0);
    assert_eq!(report.rules_checked, Rule::OFFLINE.to_vec());
}

/// `(file, text)` pairs with line ends as the binary keeps them.
fn normalized(files: Vec<(String, String)>) -> Vec<(String, String)> {
    files.into_iter().map(|(f, t)| (f, normalize(&t))).collect()
}

fn pairs_of(sources: &[Source]) -> Vec<(String, String)> {
    sources.iter().map(|s| (s.name.clone(), s.text.clone())).collect()
}

#[test]
fn the_embedded_sources_are_what_the_folders_hold() {
    let embedded = fencepost::deploy::Sources::embedded().expect("embedded sources");
    let mut migrations: Vec<(String, String)> = embedded
        .migrations()
        .iter()
        .map(|m| {
            (
                m.file().to_string(),
                m.migration().sql().unwrap_or_default().to_string(),
            )
        })
        .collect();
    migrations.sort();
    assert_eq!(migrations, normalized(support::fixtures::shipped_migrations()));
    // What `check --offline` lints when given no folder.
    let from_binary = ShippedScripts::from(&embedded);
    assert_eq!(
        pairs_of(&from_binary.procedures),
        normalized(support::fixtures::shipped_procedures())
    );
    assert_eq!(
        pairs_of(&from_binary.permissions),
        normalized(support::fixtures::shipped_permissions())
    );
    assert_eq!(lint(&from_binary).exit_code(), 0);
}

#[test]
fn a_shipped_grant_on_a_table_is_refused() {
    let mut s = shipped();
    s.permissions.push(Source::new(
        "060_oops.sql",
        "GRANT UPDATE ON fence.Resource TO fence_service;",
    ));
    assert_eq!(ids(&lint(&s)), [("FP101", "fence.resource".to_string())]);
}

#[test]
fn grants_hidden_in_dynamic_sql_or_to_other_principals_are_refused() {
    let mut s = shipped();
    s.permissions.push(Source::new(
        "060_oops.sql",
        "EXEC (N'GRANT EXECUTE ON SCHEMA::fence_api TO fence_service');\n\
         GRANT EXECUTE ON fence_api.Acquire TO public;\nGRANT CREATE PROCEDURE TO fence_operator;",
    ));
    let found = ids(&lint(&s));
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found.iter().all(|(id, _)| *id == "FP101"));
}

#[test]
fn force_release_to_fence_service_is_beyond_its_role() {
    let mut s = shipped();
    s.permissions.push(Source::new(
        "060_oops.sql",
        "GRANT EXECUTE ON fence_admin.ForceRelease TO fence_service;",
    ));
    assert_eq!(ids(&lint(&s)), [("FP007", "fence_admin.ForceRelease".to_string())]);
}

#[test]
fn a_procedure_with_dynamic_sql_is_refused() {
    let mut s = shipped();
    let publish = s
        .procedures
        .iter_mut()
        .find(|p| p.name == "fence_api.Publish.sql")
        .unwrap();
    publish.text = publish
        .text
        .replace("SET NOCOUNT ON;", "SET NOCOUNT ON;\n    EXEC sp_executesql @Payload;");
    let report = lint(&s);
    assert_eq!(ids(&report), [("FP010", "fence_api.Publish".to_string())]);
    assert_eq!(report.exit_code(), 1);
}

#[test]
fn a_fence_api_procedure_without_its_grant_is_refused() {
    let mut s = shipped();
    let service = s
        .permissions
        .iter_mut()
        .find(|p| p.name == "020_fence_service.sql")
        .unwrap();
    service.text = service
        .text
        .replace("GRANT EXECUTE ON fence_api.Inspect TO fence_service;", "");
    assert_eq!(ids(&lint(&s)), [("FP102", "fence_api.Inspect".to_string())]);
}
