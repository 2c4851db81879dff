//! Code that reaches the fence other than the shipped procedures: modules
//! that run as someone else, rights that let a service add a trigger or
//! module running as the fence tables' owner, DDL triggers, CLR modules, and
//! wrappers over shipped procedures.

use crate::support;

use fencepost::audit::{ObjectKind, Rule, Securable};
use support::fixtures::*;

/// A dbo procedure whose text names no table: what it updates is built at
/// run time.
fn purge(execute_as: Option<&str>) -> fencepost::audit::Object {
    let mut proc = module(
        "dbo",
        "Purge",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Purge @What sysname AS EXEC (N'DELETE FROM ' + @What);",
    );
    proc.execute_as = execute_as.map(String::from);
    proc
}

#[test]
fn a_procedure_with_execute_as_owner_that_a_service_can_run_is_a_finding_whatever_its_text() {
    let mut c = clean();
    c.objects.push(purge(Some("OWNER")));
    c.permissions
        .push(grant("fence_service", "EXECUTE", object("dbo", "Purge")));
    let f = only(&check(&c), Rule::RunsAsSomeoneElse);
    assert_eq!(f[0].object, "dbo.Purge");
    assert_eq!(f[0].principal.as_deref(), Some("fence_service, orders_svc"));
    assert_eq!(f[0].permission.as_deref(), Some("EXECUTE AS OWNER"));
    assert_eq!(
        f[0].fix,
        "DROP PROCEDURE [dbo].[Purge]; (or re-create it without EXECUTE AS)"
    );
}

#[test]
fn a_signed_procedure_reached_through_a_wrapper_a_service_can_run_is_a_finding() {
    let mut c = clean();
    let mut signed = purge(None);
    signed.signed_by = vec!["CERTIFICATE::maintenance".into()];
    c.objects.push(signed);
    c.objects.push(module(
        "dbo",
        "Nightly",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Nightly AS EXEC dbo.Purge @What = N'dbo.Orders';",
    ));
    c.permissions
        .push(grant("dashboard", "EXECUTE", object("dbo", "Nightly")));
    let f = only(&check(&c), Rule::RunsAsSomeoneElse);
    assert_eq!(f[0].principal.as_deref(), Some("dashboard"));
    assert_eq!(
        f[0].fix,
        "DROP SIGNATURE FROM [dbo].[Purge] BY CERTIFICATE [maintenance];"
    );
}

#[test]
fn a_trigger_with_execute_as_fires_for_a_service_that_writes_its_table() {
    // orders_svc holds UPDATE on dbo.Orders in the clean deployment.
    let mut c = clean();
    let mut trigger = module(
        "dbo",
        "OrdersAudit",
        ObjectKind::Trigger,
        "CREATE TRIGGER dbo.OrdersAudit ON dbo.Orders WITH EXECUTE AS 'maint' AFTER UPDATE AS EXEC dbo.Log;",
    );
    trigger.parent = Some("dbo.Orders".into());
    trigger.execute_as = Some("maint".into());
    c.objects.push(trigger);
    let f = only(&check(&c), Rule::RunsAsSomeoneElse);
    assert_eq!(f[0].principal.as_deref(), Some("orders_svc"));
}

#[test]
fn execute_as_code_no_service_can_run_is_not_a_finding_but_hidden_permissions_cannot_tell() {
    let mut c = clean();
    c.objects.push(purge(Some("OWNER")));
    c.permissions
        .push(grant("reporting", "EXECUTE", object("dbo", "Purge")));
    // Not FP017's: no service runs it. But it builds its DELETE at run time
    // from @What as dbo, so whoever runs it runs anything dbo can: FP027.
    let f = only(&check(&c), Rule::ReachesFence);
    assert!(f.iter().all(|f| f.principal.as_deref() == Some("reporting")), "{f:#?}");
    assert_eq!(f[0].path[0].step, "EXECUTE on dbo.Purge");
    assert!(
        f[0].path[1]
            .step
            .starts_with("dbo.Purge runs as dbo (EXECUTE AS) and builds SQL at run time (EXEC (string))"),
        "{f:#?}"
    );
    c.permissions.clear();
    let report = check(&c);
    let reason = &report
        .cannot_verify_of(Rule::RunsAsSomeoneElse)
        .next()
        .expect("FP017 unverified")
        .reason;
    assert!(reason.starts_with("dbo.Purge runs as someone else"), "{reason}");
}

#[test]
fn unreadable_signatures_cannot_be_verified() {
    let mut c = clean();
    c.signatures_unreadable = Some("this engine has no signature catalog (sys.crypt_properties)".into());
    let report = check(&c);
    assert_eq!(unverified(&report), ["FP017"]);
}

#[test]
fn alter_on_a_table_the_fence_tables_owner_owns_lets_a_service_add_a_chaining_trigger() {
    // The TRUNCATE idiom: ALTER on dbo.Orders.
    let mut c = clean();
    c.permissions
        .push(grant("orders_svc", "ALTER", object("dbo", "Orders")));
    c.permissions
        .push(grant("oncall", "CONTROL", object("dbo", "ShipOrder")));
    // Not owned by the tables' owner: no chain.
    c.schemas.push(fencepost::audit::Schema {
        name: "scratch".into(),
        owner: "oncall".into(),
    });
    c.permissions.push(grant("oncall", "ALTER", object("scratch", "Notes")));
    let f = only(&check(&c), Rule::CodeChange);
    let fixes: Vec<&str> = f.iter().map(|f| f.fix.as_str()).collect();
    assert_eq!(
        fixes,
        [
            "REVOKE CONTROL ON OBJECT::[dbo].[ShipOrder] FROM [oncall];",
            "REVOKE ALTER ON OBJECT::[dbo].[Orders] FROM [orders_svc];",
        ]
    );
}

#[test]
fn ddl_trigger_and_assembly_rights_held_by_a_service_are_findings() {
    let mut c = clean();
    c.permissions.push(grant(
        "orders_svc",
        "ALTER ANY DATABASE DDL TRIGGER",
        Securable::Database,
    ));
    c.permissions
        .push(grant("fence_reader", "ALTER ANY ASSEMBLY", Securable::Database));
    let f = only(&check(&c), Rule::CodeChange);
    let fixes: Vec<&str> = f.iter().map(|f| f.fix.as_str()).collect();
    assert_eq!(
        fixes,
        [
            "REVOKE ALTER ANY ASSEMBLY FROM [fence_reader];",
            "REVOKE ALTER ANY DATABASE DDL TRIGGER FROM [orders_svc];",
        ]
    );
}

fn ddl_trigger(definition: Option<&str>) -> fencepost::audit::Object {
    let mut t = module(
        "",
        "LogDdl",
        ObjectKind::DatabaseTrigger,
        definition.unwrap_or_default(),
    );
    t.definition = definition.map(String::from);
    t
}

#[test]
fn a_ddl_trigger_that_names_the_fence_or_builds_sql_fires_as_the_deployer_and_is_a_finding() {
    for text in [
        "CREATE TRIGGER LogDdl ON DATABASE FOR DDL_DATABASE_LEVEL_EVENTS AS UPDATE fence.Resource SET Owner = NULL;",
        "CREATE TRIGGER LogDdl ON DATABASE FOR DDL_DATABASE_LEVEL_EVENTS AS EXEC (@cmd);",
    ] {
        let mut c = clean();
        c.objects.push(ddl_trigger(Some(text)));
        let f = only(&check(&c), Rule::ForeignModule);
        assert_eq!(f[0].object, "LogDdl");
        assert_eq!(f[0].fix, "DROP TRIGGER [LogDdl] ON DATABASE;");
        assert!(
            f[0].why.contains("the deployer running fencepost migrate"),
            "{}",
            f[0].why
        );
    }
}

#[test]
fn a_ddl_trigger_that_only_logs_passes_and_a_hidden_one_cannot_be_verified() {
    let mut c = clean();
    c.objects.push(ddl_trigger(Some(
        "CREATE TRIGGER LogDdl ON DATABASE FOR CREATE_TABLE AS INSERT dbo.DdlLog SELECT EVENTDATA();",
    )));
    assert_eq!(check(&c).exit_code(), 0);
    let mut c = clean();
    c.objects.push(ddl_trigger(None));
    let report = check(&c);
    assert_eq!(unverified(&report), ["FP008"]);
    assert!(report.cannot_verify[0].reason.ends_with(": LogDdl"));
}

#[test]
fn a_clr_module_has_no_text_to_read_and_cannot_be_verified() {
    let mut c = clean();
    let mut clr = module("dbo", "Compress", ObjectKind::Procedure, "");
    clr.definition = None;
    clr.assembly = Some("Utilities (UNSAFE)".into());
    c.objects.push(clr);
    let report = check(&c);
    assert_eq!(unverified(&report), ["FP008"]);
    assert!(
        report.cannot_verify[0]
            .reason
            .ends_with("dbo.Compress (CLR, assembly Utilities (UNSAFE))"),
        "{report:#?}"
    );
}

#[test]
fn a_wrapper_over_force_release_is_a_fence_reference() {
    let mut c = clean();
    c.objects.push(module(
        "dbo",
        "Unstick",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Unstick @Key nvarchar(300) AS EXEC fence_admin.ForceRelease @ResourceKey = @Key;",
    ));
    c.permissions
        .push(grant("fence_service", "EXECUTE", object("dbo", "Unstick")));
    let report = check(&c);
    let f: Vec<_> = report.findings_of(Rule::ForeignModule).collect();
    assert_eq!(f.len(), 1, "{report:#?}");
    assert_eq!(f[0].object, "dbo.Unstick");
    assert!(f[0].why.contains("names fence_admin.ForceRelease"), "{}", f[0].why);
    assert_eq!(f[0].fix, "DROP PROCEDURE [dbo].[Unstick];");
    // FP008 names the module; FP027 names who runs it, with the route.
    let reach: Vec<_> = report.findings_of(Rule::ReachesFence).collect();
    assert_eq!(reach.len(), 1, "{report:#?}");
    assert_eq!(reach[0].principal.as_deref(), Some("fence_service"));
    assert!(
        reach[0].path[0].step.starts_with("EXECUTE on dbo.Unstick"),
        "{:#?}",
        reach[0]
    );
}

#[test]
fn a_wrapper_found_only_by_its_recorded_dependency_is_a_fence_reference() {
    let mut c = clean();
    let mut wrapper = module("dbo", "Unstick", ObjectKind::Procedure, "");
    wrapper.definition = None;
    c.objects.push(wrapper);
    c.dependencies.as_mut().unwrap().push(fencepost::audit::Dependency {
        referencing: "dbo.Unstick".into(),
        referenced: "fence_admin.ForceRelease".into(),
    });
    let f = only(&check(&c), Rule::ForeignModule);
    assert!(f[0].why.contains("names fence_admin.ForceRelease"), "{}", f[0].why);
}
