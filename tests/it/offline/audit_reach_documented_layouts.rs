//! Layouts written from Microsoft's documentation of SQL Server where FP027
//! must name a principal that reaches the fence by a route through code,
//! ownership or impersonation, or must leave alone one that reaches nothing:
//! "Ownership Chains" (a procedure that calls another procedure of the same
//! owner, and a trigger that does, pass the call on unchecked), "CREATE
//! PROCEDURE" and "CREATE SCHEMA" (a procedure created in a schema takes the
//! schema's owner), "CREATE FUNCTION" (a function cannot change
//! the database's state), "EXECUTE AS (Transact-SQL)" (no one acts as a
//! group, a certificate or a key).

use crate::support;

use super::audit_reach_lending_modules::{reached, with_etl};

use fencepost::audit::{
    Catalog, ObjectKind, Permission, PermissionState, Principal, Schema, Securable, UserAuthentication,
};
use support::fixtures::*;

/// A dbo procedure no one may run directly that updates a fence table.
fn inner() -> fencepost::audit::Object {
    module(
        "dbo",
        "BumpGeneration",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.BumpGeneration @Id bigint AS \
         UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    )
}

/// Whether FP027 names `principal` as writing the fence tables.
fn named_writer(c: &Catalog, principal: &str) -> bool {
    reaching(c, principal)
        .iter()
        .any(|f| f.permission.as_deref() == Some("write the fence tables"))
}

// ---- Controls: what the graph follows today.

#[test]
fn control_an_etl_login_in_db_datawriter_is_named_with_its_path() {
    let mut c = with_etl();
    c.memberships.push(member("db_datawriter", "etl"));
    reached(&c, "etl", "write the fence tables", &["member of db_datawriter"]);
}

#[test]
fn control_execute_on_a_procedure_that_writes_the_fence_itself_is_named() {
    let mut c = with_etl();
    c.objects.push(inner());
    c.permissions
        .push(grant("etl", "EXECUTE", object("dbo", "BumpGeneration")));
    reached(&c, "etl", "write the fence tables", &["EXECUTE on dbo.BumpGeneration"]);
}

#[test]
fn control_a_writer_denied_control_on_the_fence_schema_is_not_named() {
    // "Permissions Hierarchy": DENY CONTROL on the schema denies every
    // permission on every object in it.
    let mut c = with_etl();
    c.memberships.push(member("db_datawriter", "etl"));
    c.permissions.push(Permission {
        state: PermissionState::Deny,
        ..grant("etl", "CONTROL", schema("fence"))
    });
    assert!(!named_writer(&c, "etl"), "{:#?}", check(&c));
}

// ---- False clean: routes the graph does not follow.

/// "Ownership Chains": dbo.Nightly calls dbo.BumpGeneration, both owned by
/// dbo, so EXECUTE is not checked on the second, and it updates
/// fence.Resource, owned by dbo, unchecked too. Whoever may run the outer
/// one writes the fence; its text holds no data statement of its own.
#[test]
fn execute_on_a_procedure_that_calls_a_fence_writing_procedure_writes_the_fence() {
    let mut c = with_etl();
    c.objects.push(inner());
    c.objects.push(module(
        "dbo",
        "Nightly",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Nightly @Id bigint AS EXEC dbo.BumpGeneration @Id = @Id;",
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "Nightly")));
    reached(
        &c,
        "etl",
        "write the fence tables",
        &["EXECUTE on dbo.Nightly", "dbo.BumpGeneration"],
    );
}

/// "CREATE TRIGGER" and "Ownership Chains": a write to dbo.Orders fires its
/// trigger, which runs in the chain of dbo.Orders' owner dbo and calls a
/// dbo procedure that updates the fence.
#[test]
fn a_write_firing_a_trigger_that_calls_a_fence_writing_procedure_writes_the_fence() {
    let mut c = with_etl();
    c.objects.push(inner());
    let mut trigger = module(
        "dbo",
        "Orders_Sync",
        ObjectKind::Trigger,
        "CREATE TRIGGER dbo.Orders_Sync ON dbo.Orders AFTER UPDATE AS EXEC dbo.BumpGeneration @Id = 1;",
    );
    trigger.parent = Some("dbo.Orders".into());
    c.objects.push(trigger);
    c.permissions.push(grant("etl", "UPDATE", object("dbo", "Orders")));
    reached(
        &c,
        "etl",
        "write the fence tables",
        &["UPDATE on dbo.Orders", "dbo.BumpGeneration"],
    );
}

/// dbo.OpsForce wraps fence_admin.ForceRelease for fence_operator, who
/// holds it anyway; dbo.Nightly, which etl may run, calls the wrapper. Both
/// are owned by dbo as fence_admin is, so the chain runs ForceRelease for
/// etl unchecked.
#[test]
fn execute_on_a_procedure_that_calls_an_operator_wrapper_runs_fence_admin() {
    let mut c = with_etl();
    c.objects.push(module(
        "dbo",
        "OpsForce",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.OpsForce @Key nvarchar(300) AS \
         EXEC fence_admin.ForceRelease @ResourceKey = @Key;",
    ));
    c.permissions
        .push(grant("fence_operator", "EXECUTE", object("dbo", "OpsForce")));
    c.objects.push(module(
        "dbo",
        "Nightly",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Nightly AS EXEC dbo.OpsForce @Key = N'orders/42';",
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "Nightly")));
    reached(
        &c,
        "etl",
        "run fence_admin procedures",
        &["EXECUTE on dbo.Nightly", "dbo.OpsForce"],
    );
}

/// "CREATE PROCEDURE" needs CREATE PROCEDURE on the database and ALTER on
/// the schema; the new procedure is owned by the schema's owner ("CREATE
/// SCHEMA": objects in a schema are owned by its owner), here dbo, the fence
/// tables' owner, so the procedure etl writes and then runs (EXECUTE on the
/// schema) chains to them. No object is in the schema yet for the graph to
/// find, and the grant finding that names etl shows no path.
#[test]
fn create_procedure_with_alter_on_an_empty_schema_dbo_owns_writes_the_fence() {
    let mut c = with_etl();
    c.schemas.push(Schema {
        name: "staging".into(),
        owner: "dbo".into(),
    });
    c.permissions
        .push(grant("etl", "CREATE PROCEDURE", Securable::Database));
    c.permissions.push(grant("etl", "ALTER", schema("staging")));
    // The migration login runs what it deploys there.
    c.permissions.push(grant("etl", "EXECUTE", schema("staging")));
    reached(&c, "etl", "write the fence tables", &["staging"]);
}

/// A procedure owned by dbo that only reads a fence table: ownership
/// chaining lets its callers read, never write ("Ownership Chains" checks
/// SELECT as it checks UPDATE, but SELECT writes nothing).
#[test]
fn execute_on_a_procedure_that_only_reads_a_fence_table_writes_nothing() {
    let mut c = clean();
    c.objects.push(module(
        "dbo",
        "LeaseCount",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.LeaseCount AS SELECT COUNT(*) AS Leases FROM fence.Resource;",
    ));
    c.permissions
        .push(grant("reporting", "EXECUTE", object("dbo", "LeaseCount")));
    assert!(!named_writer(&c, "reporting"), "{:#?}", check(&c));
}

/// "CREATE FUNCTION": a user-defined function cannot change the database's
/// state; an INSERT into its own table variable writes nothing else.
#[test]
fn execute_on_a_scalar_function_reading_a_fence_table_into_a_table_variable_writes_nothing() {
    let mut c = clean();
    c.objects.push(module(
        "dbo",
        "LiveLeases",
        ObjectKind::Function,
        "CREATE FUNCTION dbo.LiveLeases() RETURNS int AS BEGIN \
         DECLARE @t TABLE (Id bigint); \
         INSERT @t (Id) SELECT ResourceId FROM fence.Resource; \
         RETURN (SELECT COUNT(*) FROM @t); END;",
    ));
    c.permissions
        .push(grant("reporting", "EXECUTE", object("dbo", "LiveLeases")));
    assert!(!named_writer(&c, "reporting"), "{:#?}", check(&c));
}

/// "Synonyms (Database Engine)": dbo.Nightly runs `EXEC dbo.Force`, a
/// synonym for dbo.OpsForce, an operator wrapper over
/// fence_admin.ForceRelease that only fence_operator may run. No module
/// names the wrapper itself, so it passes as contained and nothing names
/// the module etl runs: the report is clean while etl releases any lease.
#[test]
fn execute_on_a_procedure_reaching_an_operator_wrapper_by_a_synonym_runs_fence_admin() {
    let mut c = with_etl();
    c.objects.push(module(
        "dbo",
        "OpsForce",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.OpsForce @Key nvarchar(300) AS \
         EXEC fence_admin.ForceRelease @ResourceKey = @Key;",
    ));
    c.permissions
        .push(grant("fence_operator", "EXECUTE", object("dbo", "OpsForce")));
    c.objects
        .push(module("dbo", "Force", ObjectKind::Synonym, "[dbo].[OpsForce]"));
    c.objects.push(module(
        "dbo",
        "Nightly",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Nightly AS EXEC dbo.Force @Key = N'orders/42';",
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "Nightly")));
    reached(
        &c,
        "etl",
        "run fence_admin procedures",
        &["EXECUTE on dbo.Nightly", "dbo.OpsForce"],
    );
}

/// The operator wrapper hands fence_operator ForceRelease, which its own
/// grant already holds (permissions/040_fence_operator.sql): that another
/// module also calls the wrapper changes nothing for fence_operator, so it
/// must not be named for running fence_admin beyond its grants.
#[test]
fn an_operator_wrapper_another_module_calls_does_not_name_fence_operator_for_its_own_grant() {
    let mut c = clean();
    c.objects.push(module(
        "dbo",
        "OpsForce",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.OpsForce @Key nvarchar(300) AS \
         EXEC fence_admin.ForceRelease @ResourceKey = @Key;",
    ));
    c.permissions
        .push(grant("fence_operator", "EXECUTE", object("dbo", "OpsForce")));
    c.objects.push(module(
        "dbo",
        "Nightly",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Nightly AS EXEC dbo.OpsForce @Key = N'orders/42';",
    ));
    // Without dbo.Nightly the wrapper is contained and no one is named.
    let mut alone = c.clone();
    alone.objects.retain(|o| o.name != "Nightly");
    assert!(reaching(&alone, "fence_operator").is_empty(), "{:#?}", check(&alone));
    assert!(reaching(&c, "fence_operator").is_empty(), "{:#?}", check(&c));
}

/// "EXECUTE AS (Transact-SQL)": the name "must be a singleton account, and
/// cannot be a group, role, certificate, key, or built-in account". IMPERSONATE
/// on the user of a Windows group lets no one act as it: the group's rights
/// are its members' only.
#[test]
fn impersonate_on_a_windows_group_user_acts_as_no_one() {
    let mut c = with_etl();
    c.principals.push(Principal {
        login: Some("CORP\\etl-operators".into()),
        login_kind: Some(fencepost::audit::LoginKind::WindowsGroup),
        ..Principal::new("CORP\\etl-operators", fencepost::audit::PrincipalKind::Group)
    });
    c.memberships.push(member("db_datawriter", "CORP\\etl-operators"));
    c.permissions.push(grant(
        "etl",
        "IMPERSONATE",
        Securable::Principal {
            name: "CORP\\etl-operators".into(),
        },
    ));
    assert!(!named_writer(&c, "etl"), "{:#?}", check(&c));
}

/// The same page: a user mapped to a certificate cannot be impersonated;
/// its rights reach only modules signed with the certificate, and etl may
/// sign nothing.
#[test]
fn impersonate_on_a_certificate_user_acts_as_no_one() {
    let mut c = with_etl();
    c.principals.push(Principal {
        authentication: Some(UserAuthentication::NoLogin),
        ..user("cert_writer", None)
    });
    c.memberships.push(member("db_datawriter", "cert_writer"));
    c.signing_keys = Some(vec![fencepost::audit::SigningKey {
        key: "CERTIFICATE".into(),
        name: "Writer".into(),
        owner: Some("dbo".into()),
        user: Some("cert_writer".into()),
        login: None,
        private_key: Some(false),
    }]);
    c.permissions.push(grant(
        "etl",
        "IMPERSONATE",
        Securable::Principal {
            name: "cert_writer".into(),
        },
    ));
    assert!(!named_writer(&c, "etl"), "{:#?}", check(&c));
}

/// Whether FP027 names `principal` or its login as writing the fence tables.
fn named_writer_or_login(c: &Catalog, principal: &str) -> bool {
    named_writer(c, principal) || named_writer(c, &format!("login {principal}"))
}

/// "EXECUTE AS (Transact-SQL)" again, at server level: EXECUTE AS LOGIN
/// cannot name a Windows group, so IMPERSONATE on a group login is no way
/// to hold what its user holds here.
#[test]
fn impersonate_on_a_windows_group_login_acts_as_no_one() {
    let mut c = with_etl();
    c.principals.push(Principal {
        login: Some("CORP\\dbas".into()),
        login_kind: Some(fencepost::audit::LoginKind::WindowsGroup),
        ..Principal::new("CORP\\dbas", fencepost::audit::PrincipalKind::Group)
    });
    c.memberships.push(member("db_datawriter", "CORP\\dbas"));
    let server = server_facts(&mut c);
    server.group_logins.push("CORP\\dbas".into());
    server.permissions.push(on_login("etl", "IMPERSONATE", "CORP\\dbas"));
    assert!(!named_writer_or_login(&c, "etl"), "{:#?}", check(&c));
}

/// The same for a login mapped to a certificate (type C): it cannot be
/// impersonated, only signed with.
#[test]
fn impersonate_on_a_certificate_login_acts_as_no_one() {
    let mut c = with_etl();
    c.principals.push(Principal {
        login: Some("cert_loader".into()),
        login_kind: Some(fencepost::audit::LoginKind::Key),
        authentication: Some(UserAuthentication::Instance),
        ..Principal::new("cert_loader", fencepost::audit::PrincipalKind::User)
    });
    c.memberships.push(member("db_datawriter", "cert_loader"));
    server_facts(&mut c)
        .permissions
        .push(on_login("etl", "IMPERSONATE", "cert_loader"));
    assert!(!named_writer_or_login(&c, "etl"), "{:#?}", check(&c));
}

/// "Permissions Hierarchy": a column-level GRANT overrides a DENY on its
/// table only, never one on the schema.
#[test]
fn control_a_column_grant_under_a_schema_deny_writes_nothing() {
    let mut c = with_etl();
    c.permissions.push(Permission {
        state: PermissionState::Deny,
        ..grant("etl", "UPDATE", schema("fence"))
    });
    c.permissions.push(grant(
        "etl",
        "UPDATE",
        Securable::Object {
            schema: "fence".into(),
            name: "Resource".into(),
            column: Some("Generation".into()),
        },
    ));
    assert!(!named_writer(&c, "etl"), "{:#?}", check(&c));
}

/// db_denydatawriter's DENY on the database wins over a grant on the table.
#[test]
fn control_db_denydatawriter_over_a_table_grant_writes_nothing() {
    let mut c = with_etl();
    c.principals.push(role("db_denydatawriter"));
    c.memberships.push(member("db_denydatawriter", "etl"));
    c.permissions.push(grant("etl", "UPDATE", object("fence", "Resource")));
    assert!(!named_writer(&c, "etl"), "{:#?}", check(&c));
}

/// "EXECUTE AS (Transact-SQL)": the name "cannot be a ... certificate, key".
/// A user mapped to a certificate or an asymmetric key (sys.database_principals
/// type C or K) is read as its own kind: IMPERSONATE on it acts as no one,
/// and it has no password for ALTER ANY USER to reset, even where the
/// certificates were not read to say which key it is mapped to.
#[test]
fn a_user_mapped_to_a_certificate_or_key_is_impersonated_by_no_one() {
    let mut c = with_etl();
    c.principals.push(Principal::new(
        "cert_writer",
        fencepost::audit::PrincipalKind::KeyMapped,
    ));
    c.memberships.push(member("db_datawriter", "cert_writer"));
    c.signing_keys = None;
    c.permissions.push(grant(
        "etl",
        "IMPERSONATE",
        Securable::Principal {
            name: "cert_writer".into(),
        },
    ));
    c.permissions.push(grant("etl", "ALTER ANY USER", Securable::Database));
    assert!(!named_writer(&c, "etl"), "{:#?}", check(&c));
}

/// The same page: the name "cannot be a ... built-in account, such as NT
/// AUTHORITY\LocalService, NT AUTHORITY\NetworkService, or NT
/// AUTHORITY\LocalSystem". IMPERSONATE on the user of a Windows login is a
/// way to its rights; on the user or the login of a built-in account it is
/// none. Each built-in account is a control of the same shape as the
/// Windows login.
#[test]
fn impersonate_on_a_built_in_accounts_user_or_login_acts_as_no_one() {
    for (account, impersonable) in [
        ("CORP\\etl-writer", true),
        ("NT AUTHORITY\\SYSTEM", false),
        ("NT AUTHORITY\\NETWORK SERVICE", false),
        ("NT AUTHORITY\\LOCAL SERVICE", false),
    ] {
        for at_login in [false, true] {
            let mut c = with_etl();
            c.principals.push(Principal {
                login: Some(account.into()),
                login_kind: Some(fencepost::audit::LoginKind::Windows),
                authentication: Some(UserAuthentication::Instance),
                ..Principal::new(account, fencepost::audit::PrincipalKind::User)
            });
            c.memberships.push(member("db_datawriter", account));
            if at_login {
                server_facts(&mut c)
                    .permissions
                    .push(on_login("etl", "IMPERSONATE", account));
            } else {
                c.permissions.push(grant(
                    "etl",
                    "IMPERSONATE",
                    Securable::Principal { name: account.into() },
                ));
            }
            assert_eq!(
                named_writer_or_login(&c, "etl"),
                impersonable,
                "{account}, on its login: {at_login}: {:#?}",
                check(&c)
            );
        }
    }
}
