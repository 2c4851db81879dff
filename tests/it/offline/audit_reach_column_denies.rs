//! Column GRANTs against table DENYs, and grants a covering DENY removes,
//! on layouts written from "DENY Object Permissions" and "common criteria
//! compliance enabled Server Configuration Option": a column-level GRANT
//! overrides a table-level DENY, kept for backward compatibility, unless
//! the server option is on; a DENY on the schema or the database, of the
//! permission or one that covers it, to the grantee, a role of it or
//! public, refuses it whatever the column. FP003 and FP027 judge a grant
//! the same way: a grant every DENY removes is named by neither, one that
//! survives by both.

use crate::support;

use fencepost::audit::{Catalog, Permission, PermissionState, Report, Rule, Securable, ServerSettings};
use support::fixtures::*;

fn deny(grantee: &str, permission: &str, on: Securable) -> Permission {
    Permission {
        state: PermissionState::Deny,
        ..grant(grantee, permission, on)
    }
}

fn column(schema: &str, table: &str, column: &str) -> Securable {
    Securable::Object {
        schema: schema.into(),
        name: table.into(),
        column: Some(column.into()),
    }
}

/// `etl`, a user of its own login, granted UPDATE on the Generation column
/// of fence.Resource and denied UPDATE on the table.
fn column_grant_against_table_deny() -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    c.permissions
        .push(grant("etl", "UPDATE", column("fence", "Resource", "Generation")));
    c.permissions.push(deny("etl", "UPDATE", object("fence", "Resource")));
    c
}

fn common_criteria(c: &mut Catalog, on: Option<bool>) {
    c.server_settings = Some(ServerSettings {
        cross_db_ownership_chaining: false,
        common_criteria_compliance: on,
    });
}

/// Whether a finding of `report` names `who` with a path to the fence.
fn with_path(report: &Report, who: &str) -> bool {
    report
        .findings
        .iter()
        .any(|f| f.principal.as_deref() == Some(who) && !f.path.is_empty())
}

/// Every finding of `report` that names `who`, by rule id.
pub(super) fn rules_naming(report: &Report, who: &str) -> Vec<&'static str> {
    report
        .findings
        .iter()
        .filter(|f| f.principal.as_deref() == Some(who))
        .map(|f| f.rule.id())
        .collect()
}

#[test]
fn a_column_grant_beats_a_table_deny_when_common_criteria_is_off() {
    let mut c = column_grant_against_table_deny();
    common_criteria(&mut c, Some(false));
    let report = check(&c);
    let named: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.principal.as_deref() == Some("etl") && !f.path.is_empty())
        .collect();
    assert_eq!(named.len(), 1, "{report:#?}");
    assert!(
        named[0].path[0].step.contains("UPDATE on fence.Resource")
            && named[0].path[0].step.contains("column-level GRANT overrides"),
        "{:#?}",
        named[0]
    );
    assert!(rules_naming(&report, "etl").contains(&"FP003"), "{report:#?}");
}

#[test]
fn a_column_grant_beats_a_table_deny_when_the_option_cannot_be_read() {
    // The weaker assumption: the option is off.
    let mut c = column_grant_against_table_deny();
    common_criteria(&mut c, None);
    let report = check(&c);
    assert!(with_path(&report, "etl"), "{report:#?}");
    c.server_settings = None;
    let report = check(&c);
    assert!(with_path(&report, "etl"), "{report:#?}");
}

#[test]
fn a_table_deny_beats_a_column_grant_under_common_criteria() {
    let mut c = column_grant_against_table_deny();
    common_criteria(&mut c, Some(true));
    let report = check(&c);
    assert!(rules_naming(&report, "etl").is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn a_schema_deny_beats_a_column_grant_whatever_the_option() {
    let mut c = column_grant_against_table_deny();
    common_criteria(&mut c, Some(false));
    c.permissions.push(deny("etl", "UPDATE", schema("fence")));
    let report = check(&c);
    assert!(rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

/// `etl` granted UPDATE on the fence schema.
fn schema_grant() -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    c.permissions.push(grant("etl", "UPDATE", schema("fence")));
    c
}

#[test]
fn a_schema_grant_alone_is_named_by_fp003_and_fp027() {
    let report = check(&schema_grant());
    let rules = rules_naming(&report, "etl");
    assert!(rules.contains(&"FP003"), "{report:#?}");
    assert!(with_path(&report, "etl"), "{report:#?}");
}

#[test]
fn deny_control_on_the_schema_removes_the_grant_from_fp003() {
    let mut c = schema_grant();
    c.permissions.push(deny("etl", "CONTROL", schema("fence")));
    let report = check(&c);
    assert!(rules_naming(&report, "etl").is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn deny_update_on_the_database_removes_a_table_grant_from_fp003() {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    c.permissions.push(grant("etl", "UPDATE", object("fence", "Resource")));
    c.permissions.push(deny("etl", "UPDATE", Securable::Database));
    let report = check(&c);
    assert!(rules_naming(&report, "etl").is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn a_deny_on_the_schema_to_public_removes_the_grant_from_fp003() {
    let mut c = schema_grant();
    c.permissions.push(deny("public", "UPDATE", schema("fence")));
    let report = check(&c);
    assert!(rules_naming(&report, "etl").is_empty(), "{report:#?}");
}

#[test]
fn a_deny_elsewhere_or_of_another_right_leaves_fp003_naming_the_grant() {
    // The controls: a DENY on another schema, or of a right UPDATE does
    // not need, removes nothing.
    let mut c = schema_grant();
    c.permissions.push(deny("etl", "CONTROL", schema("dbo")));
    c.permissions.push(deny("etl", "SELECT", schema("fence")));
    let report = check(&c);
    assert!(rules_naming(&report, "etl").contains(&"FP003"), "{report:#?}");
    // A DENY to one member of a role leaves the role's grant named.
    let mut c = clean();
    c.principals.push(role("loaders"));
    c.principals.push(user("etl", Some("etl")));
    c.principals.push(user("etl2", Some("etl2")));
    c.memberships.push(member("loaders", "etl"));
    c.memberships.push(member("loaders", "etl2"));
    c.permissions.push(grant("loaders", "UPDATE", schema("fence")));
    c.permissions.push(deny("etl", "CONTROL", schema("fence")));
    let report = check(&c);
    assert!(
        report
            .findings_of(Rule::WriteAccess)
            .any(|f| f.principal.as_deref() == Some("loaders")),
        "{report:#?}"
    );
}
