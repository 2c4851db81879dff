//! What issue-50's class 8 names, each read and judged or reported as
//! "cannot verify" with what it needs, on layouts written from Microsoft's
//! documentation: ADD SIGNATURE needs only CONTROL on the key ("ADD
//! SIGNATURE (Transact-SQL)"); a CHECK, DEFAULT or computed column runs its
//! function inside every write ("CREATE TABLE"); Agent CmdExec and
//! PowerShell steps run as a proxy or the Agent's account ("Create a SQL
//! Server Agent proxy"); xp_cmdshell runs as its proxy account for others
//! than sysadmin; start-up procedures run as sysadmin ("sp_procoption");
//! EXTERNAL_ACCESS and UNSAFE assemblies ("CREATE ASSEMBLY"); external data
//! sources connect as a database-scoped credential.

use crate::support;

use fencepost::audit::{
    Catalog, Finding, ObjectKind, OutsideItem, OutsideKind, Rule, Schema, Securable, SigningKey, TableExpression,
    Unread,
};
use support::fixtures::*;

/// The FP027 findings naming `principal`.
fn named(c: &Catalog, principal: &str) -> Vec<Finding> {
    check(c)
        .findings
        .into_iter()
        .filter(|f| f.rule == Rule::ReachesFence && f.principal.as_deref() == Some(principal))
        .collect()
}

fn certificate(name: &str, owner: &str, user: Option<&str>, login: Option<&str>) -> SigningKey {
    SigningKey {
        key: "CERTIFICATE".into(),
        name: name.into(),
        owner: Some(owner.into()),
        user: user.map(String::from),
        login: login.map(String::from),
        private_key: Some(true),
    }
}

/// A user `cert_writer` mapped to certificate `Writer`, in db_datawriter.
fn certificate_user(c: &mut Catalog) {
    c.principals.push(user("cert_writer", None));
    c.memberships.push(member("db_datawriter", "cert_writer"));
}

#[test]
fn the_owner_of_a_certificate_whose_user_writes_the_fence_signs_its_way_there() {
    let mut c = clean();
    c.principals.push(user("devlead", Some("devlead")));
    certificate_user(&mut c);
    c.signing_keys = Some(vec![certificate("Writer", "devlead", Some("cert_writer"), None)]);
    let f = named(&c, "devlead");
    assert!(!f.is_empty(), "{:#?}", check(&c));
    assert!(
        f[0].path[0]
            .step
            .starts_with("may sign a module it can alter with CERTIFICATE::Writer"),
        "{:#?}",
        f[0]
    );
    assert_eq!(f[0].fix, "ALTER AUTHORIZATION ON CERTIFICATE::[Writer] TO [dbo];");
}

#[test]
fn control_on_a_certificate_is_enough_to_sign_with_it() {
    let mut c = clean();
    c.principals.push(user("helper", Some("helper")));
    certificate_user(&mut c);
    c.signing_keys = Some(vec![certificate("Writer", "dbo", Some("cert_writer"), None)]);
    c.permissions.push(grant(
        "helper",
        "CONTROL",
        Securable::Key {
            key: "CERTIFICATE".into(),
            name: "Writer".into(),
        },
    ));
    assert!(!named(&c, "helper").is_empty(), "{:#?}", check(&c));
}

#[test]
fn take_ownership_of_a_certificate_makes_its_taker_the_signer() {
    // ALTER AUTHORIZATION needs only TAKE OWNERSHIP to take the key for
    // oneself; the new owner holds CONTROL and signs with it.
    let mut c = clean();
    c.principals.push(user("devlead", Some("devlead")));
    certificate_user(&mut c);
    c.signing_keys = Some(vec![certificate("Writer", "dbo", Some("cert_writer"), None)]);
    c.permissions.push(grant(
        "devlead",
        "TAKE OWNERSHIP",
        Securable::Key {
            key: "CERTIFICATE".into(),
            name: "Writer".into(),
        },
    ));
    let f = named(&c, "devlead");
    assert!(!f.is_empty(), "{:#?}", check(&c));
    assert!(f[0].path[0].evidence.contains("TAKE OWNERSHIP"), "{:#?}", f[0]);
}

#[test]
fn an_asymmetric_key_mapped_to_a_sysadmin_login_lends_its_server_rights() {
    let mut c = clean();
    c.principals.push(user("devlead", Some("devlead")));
    c.server
        .as_mut()
        .unwrap()
        .role_members
        .push(member("sysadmin", "KeySigner"));
    c.signing_keys = Some(vec![SigningKey {
        key: "ASYMMETRIC KEY".into(),
        ..certificate("Signer", "devlead", None, Some("KeySigner"))
    }]);
    let f = named(&c, "devlead");
    assert!(!f.is_empty(), "{:#?}", check(&c));
    assert!(
        f[0].path[0].step.contains("runs with login KeySigner's server rights"),
        "{:#?}",
        f[0]
    );
}

#[test]
fn keys_owned_by_dbo_or_mapped_to_no_one_stay_clean() {
    let mut c = clean();
    certificate_user(&mut c);
    c.principals.push(user("devlead", Some("devlead")));
    c.signing_keys = Some(vec![
        certificate("Writer", "dbo", Some("cert_writer"), None),
        certificate("Backup", "devlead", None, None),
    ]);
    let report = check(&c);
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.principal.as_deref() != Some("devlead")),
        "{report:#?}"
    );
    // cert_writer itself is in db_datawriter: named for that, and only that.
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.path.iter().all(|s| !s.step.contains("may sign"))),
        "{report:#?}"
    );
}

#[test]
fn a_key_whose_private_key_is_not_in_the_database_signs_nothing() {
    // ADD SIGNATURE BY CERTIFICATE needs the private key; WITH SIGNATURE
    // takes only a signature made where it is.
    let mut c = clean();
    certificate_user(&mut c);
    c.principals.push(user("devlead", Some("devlead")));
    c.signing_keys = Some(vec![certificate("Writer", "devlead", Some("cert_writer"), None)]);
    assert!(!named(&c, "devlead").is_empty(), "{:#?}", check(&c));
    c.signing_keys.as_mut().unwrap()[0].private_key = Some(false);
    assert!(named(&c, "devlead").is_empty(), "{:#?}", check(&c));
    // Not read: it may be there.
    c.signing_keys.as_mut().unwrap()[0].private_key = None;
    assert!(!named(&c, "devlead").is_empty(), "{:#?}", check(&c));
}

/// A function `util.NextGeneration` in a schema `dev` owns.
fn util_function(c: &mut Catalog) {
    c.principals.push(user("dev", Some("dev")));
    c.schemas.push(Schema {
        name: "util".into(),
        owner: "dev".into(),
    });
    c.objects.push(module(
        "util",
        "NextGeneration",
        ObjectKind::Function,
        "CREATE FUNCTION util.NextGeneration() RETURNS bigint AS BEGIN RETURN 1 END",
    ));
}

fn expression(table: &str, kind: &str, definition: &str) -> TableExpression {
    TableExpression {
        table: table.into(),
        kind: kind.into(),
        name: format!("{kind}_{}", table.replace('.', "_")),
        definition: definition.into(),
    }
}

#[test]
fn a_default_on_a_fence_table_calling_a_function_another_owns_is_a_way_to_write_it() {
    let mut c = clean();
    util_function(&mut c);
    c.table_expressions = Some(vec![expression(
        "fence.Resource",
        "DEFAULT",
        "([util].[NextGeneration]())",
    )]);
    let f = named(&c, "dev");
    assert!(!f.is_empty(), "{:#?}", check(&c));
    assert!(
        f[0].path[0].step.starts_with("ALTER on util.NextGeneration"),
        "{:#?}",
        f[0]
    );
    assert_eq!(f[0].object, "fence.Resource");
}

#[test]
fn a_check_on_a_fence_table_calling_a_function_whose_alter_is_granted_is_a_way_to_write_it() {
    let mut c = clean();
    // The function is in a schema of its own, owned by another role than
    // the fence tables' owner: no ownership chain, only the expression.
    c.principals.push(user("appdev", Some("appdev")));
    c.principals.push(role("app_owner"));
    c.schemas.push(Schema {
        name: "app".into(),
        owner: "app_owner".into(),
    });
    c.objects.push(module(
        "app",
        "ValidKey",
        ObjectKind::Function,
        "CREATE FUNCTION app.ValidKey(@k nvarchar(450)) RETURNS bit AS BEGIN RETURN 1 END",
    ));
    c.permissions.push(grant("appdev", "ALTER", object("app", "ValidKey")));
    c.table_expressions = Some(vec![expression(
        "fence.Resource",
        "CHECK",
        "([app].[ValidKey]([ResourceKey])=(1))",
    )]);
    assert!(!named(&c, "appdev").is_empty(), "{:#?}", check(&c));
}

#[test]
fn a_function_whose_name_starts_another_called_one_is_not_named_for_it() {
    let mut c = clean();
    // intern may ALTER app.Valid; the CHECK calls app.ValidKey only.
    c.principals.push(user("intern", Some("intern")));
    c.principals.push(role("app_owner"));
    c.schemas.push(Schema {
        name: "app".into(),
        owner: "app_owner".into(),
    });
    c.objects.push(module(
        "app",
        "Valid",
        ObjectKind::Function,
        "CREATE FUNCTION app.Valid() RETURNS bit AS BEGIN RETURN 1 END",
    ));
    c.objects.push(module(
        "app",
        "ValidKey",
        ObjectKind::Function,
        "CREATE FUNCTION app.ValidKey(@k nvarchar(450)) RETURNS bit AS BEGIN RETURN 1 END",
    ));
    c.permissions.push(grant("intern", "ALTER", object("app", "Valid")));
    c.table_expressions = Some(vec![expression(
        "fence.Resource",
        "CHECK",
        "([app].[ValidKey]([ResourceKey])=(1))",
    )]);
    assert!(named(&c, "intern").is_empty(), "{:#?}", check(&c));
    // The same grant on the called function, written plain and in another
    // case, is named.
    c.permissions.push(grant("intern", "ALTER", object("app", "ValidKey")));
    c.table_expressions = Some(vec![expression(
        "fence.Resource",
        "CHECK",
        "(APP . VALIDKEY([ResourceKey])=(1))",
    )]);
    assert!(!named(&c, "intern").is_empty(), "{:#?}", check(&c));
}

#[test]
fn expressions_calling_only_dbo_s_functions_or_on_other_tables_stay_clean() {
    let mut c = clean();
    util_function(&mut c);
    c.objects.push(module(
        "dbo",
        "Now",
        ObjectKind::Function,
        "CREATE FUNCTION dbo.Now() RETURNS datetime2 AS BEGIN RETURN SYSUTCDATETIME() END",
    ));
    c.table_expressions = Some(vec![
        expression("fence.Resource", "DEFAULT", "([dbo].[Now]())"),
        expression("fence.Resource", "CHECK", "([Generation]>=(0))"),
        expression("dbo.Orders", "DEFAULT", "([util].[NextGeneration]())"),
    ]);
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0);
}

fn outside(c: &mut Catalog, kind: OutsideKind, name: &str, detail: &str) {
    c.outside_tsql.as_mut().unwrap().items.push(OutsideItem {
        kind,
        name: name.into(),
        detail: Some(detail.into()),
    });
}

/// The FP028 reasons of `c`'s report, which must have no finding of it.
fn outside_reasons(c: &Catalog) -> Vec<String> {
    let report = check(c);
    assert_eq!(report.exit_code(), 3, "{report:#?}");
    report
        .cannot_verify_of(Rule::OutsideTsql)
        .map(|c| c.reason.clone())
        .collect()
}

#[test]
fn each_way_out_of_tsql_is_named_as_cannot_verify() {
    for (kind, name, detail, expect) in [
        (
            OutsideKind::AgentStep,
            "Nightly step 2",
            "CmdExec as proxy Ops",
            "job step Nightly step 2 runs CmdExec as proxy Ops",
        ),
        (
            OutsideKind::AgentStep,
            "Cleanup step 1",
            "PowerShell as the SQL Server Agent service account",
            "runs PowerShell as the SQL Server Agent service account",
        ),
        (
            OutsideKind::XpCmdshell,
            "ops_runner",
            "runs commands as the xp_cmdshell proxy account",
            "ops_runner may run operating-system commands through xp_cmdshell",
        ),
        (
            OutsideKind::StartupProcedure,
            "master.dbo.WarmUp",
            "",
            "master.dbo.WarmUp runs at every start of the server as sysadmin",
        ),
        (
            OutsideKind::Assembly,
            "Loader",
            "UNSAFE_ACCESS",
            "assembly Loader has permission set UNSAFE_ACCESS",
        ),
        (
            OutsideKind::ExternalDataSource,
            "Peer",
            "RDBMS peer.database.windows.net with credential PeerCred",
            "external data source Peer (RDBMS peer.database.windows.net with credential PeerCred)",
        ),
    ] {
        let mut c = clean();
        outside(&mut c, kind, name, detail);
        let reasons = outside_reasons(&c);
        assert_eq!(reasons.len(), 1, "{reasons:#?}");
        assert!(reasons[0].contains(expect), "{kind:?}: {}", reasons[0]);
    }
}

#[test]
fn a_part_that_could_not_be_read_names_what_it_needs() {
    let mut c = clean();
    c.outside_tsql.as_mut().unwrap().unread.push(Unread {
        what: "SQL Server Agent steps other than T-SQL".into(),
        needs: "SELECT on msdb.dbo.sysjobsteps and msdb.dbo.sysproxies (SQLAgentReaderRole in msdb, or sysadmin)"
            .into(),
    });
    let reasons = outside_reasons(&c);
    assert!(reasons[0].contains("SQLAgentReaderRole"), "{reasons:#?}");
    let mut c = clean();
    c.outside_tsql = None;
    assert!(outside_reasons(&c)[0].contains("VIEW ANY DEFINITION"));
}

#[test]
fn unread_expressions_or_key_owners_leave_fp027_unproven() {
    for unread in ["expressions", "keys"] {
        let mut c = clean();
        if unread == "expressions" {
            c.table_expressions = None;
        } else {
            c.signing_keys = None;
        }
        let report = check(&c);
        assert_eq!(report.exit_code(), 3, "{report:#?}");
        assert_eq!(unverified(&report), ["FP027"], "{report:#?}");
    }
}

#[test]
fn alter_any_user_resets_only_a_contained_user_with_a_password() {
    // "ALTER USER": WITH PASSWORD applies to contained users with a
    // password (authentication_type DATABASE); a user WITHOUT LOGIN, a
    // contained Windows user and a Microsoft Entra user have none.
    use fencepost::audit::UserAuthentication as Auth;
    for (kind, reset) in [
        (Some(Auth::Database), true),
        (None, true),
        (Some(Auth::NoLogin), false),
        (Some(Auth::Windows), false),
        (Some(Auth::External), false),
    ] {
        let mut c = clean();
        let mut writer = user("etl_contained", None);
        writer.authentication = kind;
        c.principals.push(writer);
        c.memberships.push(member("db_datawriter", "etl_contained"));
        c.principals.push(user("helpdesk", Some("helpdesk")));
        c.permissions
            .push(grant("helpdesk", "ALTER ANY USER", Securable::Database));
        let resets = named(&c, "helpdesk").iter().any(|f| {
            f.path
                .iter()
                .any(|s| s.step.starts_with("resets the password of etl_contained"))
        });
        assert_eq!(resets, reset, "{kind:?}: {:#?}", check(&c));
    }
}
