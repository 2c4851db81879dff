//! Rights granted on a synonym itself, on layouts written from "Synonyms
//! (Database Engine)" (a synonym is a securable: CONTROL, DELETE, EXECUTE,
//! INSERT, SELECT, TAKE OWNERSHIP and UPDATE are granted on it) and
//! "Ownership Chains": the statement is checked on the synonym, and while
//! the synonym has its base object's owner the base object is not checked
//! at all, so a grant on a dbo synonym for a fence table or a fence_admin
//! procedure reaches it. FP027 names the grantee; a synonym of another
//! owner breaks the chain and hands nothing on.

use crate::support;

use fencepost::audit::{Catalog, ObjectKind, PermissionState, Securable};
use support::fixtures::*;

fn with_etl() -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    c
}

fn synonym(c: &mut Catalog, schema: &str, name: &str, base: &str) {
    c.objects.push(module(schema, name, ObjectKind::Synonym, base));
}

/// The steps of the FP027 findings naming `who` for `goal`, joined.
fn path(c: &Catalog, who: &str, goal: &str) -> Option<String> {
    reaching(c, who)
        .into_iter()
        .find(|f| f.permission.as_deref() == Some(goal))
        .map(|f| step_texts(&f).join(" | "))
}

const WRITE: &str = "write the fence tables";
const ADMIN: &str = "run fence_admin procedures";

#[test]
fn update_on_a_dbo_synonym_for_a_fence_table_names_the_grantee() {
    let mut c = with_etl();
    synonym(&mut c, "dbo", "Leases", "[fence].[Resource]");
    c.permissions.push(grant("etl", "UPDATE", object("dbo", "Leases")));
    let steps = path(&c, "etl", WRITE).expect("etl is named");
    assert!(steps.contains("UPDATE on the synonym dbo.Leases"), "{steps}");
    assert!(steps.contains("stands for fence.Resource"), "{steps}");
}

#[test]
fn execute_on_a_dbo_synonym_for_a_fence_admin_procedure_names_the_grantee() {
    let mut c = with_etl();
    synonym(&mut c, "dbo", "Force", "[fence_admin].[ForceRelease]");
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "Force")));
    let steps = path(&c, "etl", ADMIN).expect("etl is named");
    assert!(steps.contains("EXECUTE on the synonym dbo.Force"), "{steps}");
}

#[test]
fn control_on_a_synonym_for_a_fence_table_named_by_three_parts_names_the_grantee() {
    let mut c = with_etl();
    synonym(&mut c, "dbo", "Leases", "[orders].[fence].[Resource]");
    c.permissions.push(grant("etl", "CONTROL", object("dbo", "Leases")));
    let report = check(&c);
    let named: Vec<_> = report
        .findings
        .iter()
        .filter(|f| f.principal.as_deref() == Some("etl"))
        .collect();
    // CONTROL on an object dbo owns is FP005's too, which carries the path.
    let steps: Vec<&str> = named.iter().flat_map(|f| step_texts(f)).collect();
    assert!(
        steps
            .iter()
            .any(|s| s.contains("on the synonym dbo.Leases (by the hierarchy") && s.contains("fence.Resource")),
        "{named:#?}"
    );
}

#[test]
fn a_deny_on_the_fence_schema_does_not_stop_a_write_through_an_unbroken_chain() {
    let mut c = with_etl();
    synonym(&mut c, "dbo", "Leases", "[fence].[Resource]");
    c.permissions.push(grant("etl", "DELETE", object("dbo", "Leases")));
    c.permissions.push(fencepost::audit::Permission {
        state: PermissionState::Deny,
        ..grant("etl", "DELETE", schema("fence"))
    });
    assert!(path(&c, "etl", WRITE).is_some(), "{:#?}", check(&c));
}

#[test]
fn a_synonym_owned_by_another_principal_breaks_the_chain_and_names_no_one() {
    let mut c = with_etl();
    c.principals.push(user("tools_owner", None));
    c.schemas.push(fencepost::audit::Schema {
        name: "tools".into(),
        owner: "tools_owner".into(),
    });
    synonym(&mut c, "tools", "Leases", "[fence].[Resource]");
    synonym(&mut c, "tools", "Force", "[fence_admin].[ForceRelease]");
    c.permissions.push(grant("etl", "UPDATE", object("tools", "Leases")));
    c.permissions.push(grant("etl", "EXECUTE", object("tools", "Force")));
    assert_eq!(path(&c, "etl", WRITE), None, "{:#?}", check(&c));
    assert_eq!(path(&c, "etl", ADMIN), None, "{:#?}", check(&c));
}

#[test]
fn select_on_a_synonym_for_a_fence_table_writes_nothing() {
    let mut c = with_etl();
    synonym(&mut c, "dbo", "Leases", "[fence].[Resource]");
    c.permissions.push(grant("etl", "SELECT", object("dbo", "Leases")));
    assert_eq!(path(&c, "etl", WRITE), None, "{:#?}", check(&c));
}

#[test]
fn a_principal_holding_nothing_on_the_synonyms_is_not_named() {
    // The synonyms themselves are FP008's (code beside the shipped code);
    // FP027 names no one for them without a right on them.
    let mut c = with_etl();
    synonym(&mut c, "dbo", "Leases", "[fence].[Resource]");
    synonym(&mut c, "dbo", "Force", "[fence_admin].[ForceRelease]");
    let report = check(&c);
    assert!(
        report.findings.iter().all(|f| f.principal.as_deref() != Some("etl")),
        "{report:#?}"
    );
    assert!(
        report
            .findings_of(fencepost::audit::Rule::ReachesFence)
            .next()
            .is_none(),
        "{report:#?}"
    );
}
