//! Foreign keys on a fence table that cascade, on layouts written from
//! "Primary and foreign key constraints" and "Cascading Referential
//! Integrity Constraints": ON DELETE or ON UPDATE CASCADE, SET NULL or SET
//! DEFAULT make a DELETE or UPDATE of the referenced table write the fence
//! table's rows, and cascades go on through keys of the tables they write.
//! Only the statement on the referenced table is checked, so FP027 names
//! whoever may run it, with the key and the statement that drops it.

use crate::support;

use fencepost::audit::{Catalog, ForeignKey, ObjectKind, PermissionState, ReferentialAction, Rule, Securable};
use support::fixtures::*;

/// `clean()` with `etl`, a user holding only CONNECT, and the tables
/// `dbo.Tenants` and `dbo.Regions`.
fn with_etl() -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions.push(grant("etl", "CONNECT", Securable::Database));
    for t in ["Tenants", "Regions"] {
        c.objects.push(fencepost::audit::Object {
            definition: None,
            ..module("dbo", t, ObjectKind::Table, "")
        });
    }
    c
}

fn key(
    name: &str,
    table: &str,
    referenced: &str,
    on_delete: ReferentialAction,
    on_update: ReferentialAction,
) -> ForeignKey {
    ForeignKey {
        name: name.into(),
        table: table.into(),
        referenced: referenced.into(),
        referenced_columns: vec!["TenantId".into()],
        on_delete,
        on_update,
    }
}

fn add_key(c: &mut Catalog, k: ForeignKey) {
    c.foreign_keys.get_or_insert_with(Vec::new).push(k);
}

/// fence.Resource's key to dbo.Tenants with the given actions.
fn tenant_key(c: &mut Catalog, on_delete: ReferentialAction, on_update: ReferentialAction) {
    add_key(
        c,
        key(
            "FK_Resource_Tenant",
            "fence.Resource",
            "dbo.Tenants",
            on_delete,
            on_update,
        ),
    );
}

/// The steps of the one FP027 write finding naming `who`, joined.
fn write_path(c: &Catalog, who: &str) -> String {
    let found: Vec<_> = reaching(c, who)
        .into_iter()
        .filter(|f| f.permission.as_deref() == Some("write the fence tables"))
        .collect();
    assert_eq!(found.len(), 1, "{:#?}", check(c));
    found[0]
        .path
        .iter()
        .map(|s| format!("{} [cut: {}]", s.step, s.cut))
        .collect::<Vec<_>>()
        .join(" | ")
}

fn names(c: &Catalog, who: &str) -> bool {
    !reaching(c, who).is_empty()
}

#[test]
fn delete_on_a_table_a_fence_key_references_on_delete_cascade_names_the_grantee() {
    let mut c = with_etl();
    tenant_key(&mut c, ReferentialAction::Cascade, ReferentialAction::NoAction);
    c.permissions.push(grant("etl", "DELETE", object("dbo", "Tenants")));
    let path = write_path(&c, "etl");
    for part in [
        "DELETE on dbo.Tenants",
        "FK_Resource_Tenant (ON DELETE CASCADE)",
        "REVOKE DELETE ON OBJECT::[dbo].[Tenants] FROM [etl];",
        "ALTER TABLE [fence].[Resource] DROP CONSTRAINT [FK_Resource_Tenant];",
    ] {
        assert!(path.contains(part), "{part} not in {path}");
    }
    let f = only(&check(&c), Rule::ReachesFence);
    assert!(f.iter().all(|f| f.principal.as_deref() == Some("etl")), "{f:#?}");
}

#[test]
fn update_of_the_referenced_column_with_on_update_set_null_names_the_grantee() {
    let mut c = with_etl();
    tenant_key(&mut c, ReferentialAction::NoAction, ReferentialAction::SetNull);
    c.permissions.push(grant(
        "etl",
        "UPDATE",
        Securable::Object {
            schema: "dbo".into(),
            name: "Tenants".into(),
            column: Some("TenantId".into()),
        },
    ));
    let path = write_path(&c, "etl");
    assert!(path.contains("UPDATE on dbo.Tenants (TenantId)"), "{path}");
    assert!(path.contains("ON UPDATE SET NULL"), "{path}");
}

#[test]
fn update_of_another_column_of_the_referenced_table_writes_nothing_through_the_key() {
    let mut c = with_etl();
    tenant_key(&mut c, ReferentialAction::NoAction, ReferentialAction::Cascade);
    c.permissions.push(grant(
        "etl",
        "UPDATE",
        Securable::Object {
            schema: "dbo".into(),
            name: "Tenants".into(),
            column: Some("DisplayName".into()),
        },
    ));
    assert!(!names(&c, "etl"), "{:#?}", check(&c));
}

#[test]
fn delete_with_on_delete_no_action_writes_nothing_and_the_report_stays_clean() {
    let mut c = with_etl();
    tenant_key(&mut c, ReferentialAction::NoAction, ReferentialAction::NoAction);
    c.permissions.push(grant("etl", "DELETE", object("dbo", "Tenants")));
    c.permissions.push(grant("etl", "UPDATE", object("dbo", "Tenants")));
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn delete_on_the_referenced_table_s_schema_writes_through_on_delete_set_default() {
    let mut c = with_etl();
    tenant_key(&mut c, ReferentialAction::SetDefault, ReferentialAction::NoAction);
    c.permissions.push(grant("etl", "DELETE", schema("dbo")));
    let path = write_path(&c, "etl");
    for part in ["DELETE on dbo.Tenants (by the hierarchy", "ON DELETE SET DEFAULT"] {
        assert!(path.contains(part), "{part} not in {path}");
    }
}

#[test]
fn a_cascade_through_a_second_table_names_the_grantee_on_the_first_with_both_keys() {
    let mut c = with_etl();
    tenant_key(&mut c, ReferentialAction::Cascade, ReferentialAction::NoAction);
    add_key(
        &mut c,
        key(
            "FK_Tenants_Region",
            "dbo.Tenants",
            "dbo.Regions",
            ReferentialAction::Cascade,
            ReferentialAction::NoAction,
        ),
    );
    c.permissions.push(grant("etl", "DELETE", object("dbo", "Regions")));
    let path = write_path(&c, "etl");
    for part in ["DELETE on dbo.Regions", "FK_Tenants_Region", "FK_Resource_Tenant"] {
        assert!(path.contains(part), "{part} not in {path}");
    }
}

#[test]
fn execute_on_a_procedure_deleting_from_the_referenced_table_names_the_grantee() {
    let mut c = with_etl();
    tenant_key(&mut c, ReferentialAction::Cascade, ReferentialAction::NoAction);
    c.objects.push(module(
        "dbo",
        "PurgeTenant",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.PurgeTenant @Id int AS DELETE FROM dbo.Tenants WHERE TenantId = @Id;",
    ));
    c.permissions
        .push(grant("etl", "EXECUTE", object("dbo", "PurgeTenant")));
    let path = write_path(&c, "etl");
    for part in ["EXECUTE on dbo.PurgeTenant", "FK_Resource_Tenant"] {
        assert!(path.contains(part), "{part} not in {path}");
    }
}

#[test]
fn a_deny_of_delete_on_the_referenced_table_cuts_the_cascade() {
    let mut c = with_etl();
    tenant_key(&mut c, ReferentialAction::Cascade, ReferentialAction::NoAction);
    c.permissions.push(grant("etl", "DELETE", object("dbo", "Tenants")));
    c.permissions.push(fencepost::audit::Permission {
        state: PermissionState::Deny,
        ..grant("etl", "DELETE", object("dbo", "Tenants"))
    });
    assert!(!names(&c, "etl"), "{:#?}", check(&c));
}

#[test]
fn a_trigger_on_the_referenced_table_that_writes_the_fence_is_still_named() {
    let mut c = with_etl();
    tenant_key(&mut c, ReferentialAction::Cascade, ReferentialAction::NoAction);
    let mut t = module(
        "dbo",
        "Tenants_Delete",
        ObjectKind::Trigger,
        "CREATE TRIGGER dbo.Tenants_Delete ON dbo.Tenants AFTER DELETE AS UPDATE fence.Resource SET Generation = 0;",
    );
    t.parent = Some("dbo.Tenants".into());
    c.objects.push(t);
    c.permissions.push(grant("etl", "DELETE", object("dbo", "Tenants")));
    assert!(names(&c, "etl"));
    let steps: Vec<String> = reaching(&c, "etl")
        .iter()
        .flat_map(|f| f.path.iter().map(|s| s.step.clone()))
        .collect();
    assert!(steps.iter().any(|s| s.contains("DELETE on dbo.Tenants")), "{steps:#?}");
}

#[test]
fn a_key_between_a_table_and_one_outside_the_fence_does_not_count_the_other_way() {
    // dbo.Tenants references fence.Resource with CASCADE: a fence write
    // cascades out of the fence, never into it.
    let mut c = with_etl();
    add_key(
        &mut c,
        key(
            "FK_Tenants_Resource",
            "dbo.Tenants",
            "fence.Resource",
            ReferentialAction::Cascade,
            ReferentialAction::Cascade,
        ),
    );
    c.permissions.push(grant("etl", "DELETE", object("dbo", "Tenants")));
    assert!(!names(&c, "etl"), "{:#?}", check(&c));
}

#[test]
fn foreign_keys_that_could_not_be_read_are_reported_as_cannot_verify() {
    let mut c = clean();
    c.foreign_keys = None;
    let report = check(&c);
    assert!(
        report
            .cannot_verify
            .iter()
            .any(|r| r.rule == Rule::ReachesFence && r.reason.contains("sys.foreign_keys")),
        "{report:#?}"
    );
    assert_ne!(report.exit_code(), 0);
}

#[test]
fn a_catalog_json_from_before_foreign_keys_still_reads_with_them_unknown() {
    let mut old = serde_json::to_value(clean()).unwrap();
    old.as_object_mut().unwrap().remove("foreign_keys");
    let c: Catalog = serde_json::from_value(old).unwrap();
    assert_eq!(c.foreign_keys, None);
    assert!(!check(&c).cannot_verify.is_empty());
}
