//! Indirect code (FP022), copies and side channels (FP023), Windows groups
//! the other way round, what the catalog model must read or leave
//! unverified, and the safe layouts that must stay clean.

use crate::support;

use fencepost::audit::{
    FenceTableFeature, JobEditor, JobStep, LinkedLogin, LinkedServer, LoginKind, ObjectKind, Principal, PrincipalKind,
    Rule, Securable, ServerTrigger, ServiceQueue, TableFeature,
};
use support::fixtures::*;

#[test]
fn a_ddl_trigger_that_calls_a_procedure_running_sql_from_a_table_is_indirect_code() {
    let mut c = clean();
    c.objects.push(Object {
        definition: Some(
            "CREATE TRIGGER audit_ddl ON DATABASE FOR DDL_DATABASE_LEVEL_EVENTS AS EXEC dbo.LogDdl;".into(),
        ),
        ..module("", "audit_ddl", ObjectKind::DatabaseTrigger, "")
    });
    c.objects.push(module(
        "dbo",
        "LogDdl",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.LogDdl AS DECLARE @s nvarchar(max) = (SELECT TOP 1 Hook FROM dbo.Hooks); EXEC (@s);",
    ));
    let f = only(&check(&c), Rule::IndirectCode);
    assert_eq!(f[0].object, "audit_ddl");
    assert_eq!(f[0].permission.as_deref(), Some("calls dbo.LogDdl (EXEC (string))"));
    assert_eq!(f[0].fix, "DROP TRIGGER [audit_ddl] ON DATABASE;");
}

use fencepost::audit::Object;

#[test]
fn a_case_variant_beside_a_shipped_procedure_is_not_taken_for_it() {
    let mut c = clean();
    c.objects.push(module(
        "fence_api",
        "ACQUIRE",
        ObjectKind::Procedure,
        "CREATE PROCEDURE fence_api.ACQUIRE AS SELECT 1",
    ));
    // FP008 names it too: its text and the dependencies recorded for
    // fence_api.Acquire match it as the default collation compares names.
    let report = check(&c);
    let f: Vec<_> = report.findings_of(Rule::IndirectCode).collect();
    assert_eq!(f.len(), 1, "{report:#?}");
    assert_eq!(f[0].object, "fence_api.ACQUIRE");
    assert_eq!(f[0].fix, "DROP PROCEDURE [fence_api].[ACQUIRE];");
    // The shipped one is still the one the drift check compares.
    assert_eq!(report.findings_of(Rule::Drift).count(), 0);
}

#[test]
fn a_numbered_procedure_beside_a_shipped_one_shares_its_grants() {
    let mut c = clean();
    c.objects.push(module(
        "fence_api",
        "Acquire;2",
        ObjectKind::Procedure,
        "CREATE PROCEDURE fence_api.Acquire;2 AS SELECT 1",
    ));
    let f = only(&check(&c), Rule::IndirectCode);
    assert_eq!(
        f[0].permission.as_deref(),
        Some("numbered procedure 2 of fence_api.Acquire")
    );
}

#[test]
fn a_service_whose_default_schema_someone_else_owns_runs_what_they_decide() {
    let mut c = clean();
    c.principals.push(user("bob", Some("bob")));
    c.schemas.push(fencepost::audit::Schema {
        name: "bobs".into(),
        owner: "bob".into(),
    });
    c.principals
        .iter_mut()
        .find(|p| p.name == "orders_svc")
        .unwrap()
        .default_schema = Some("bobs".into());
    let f = only(&check(&c), Rule::IndirectCode);
    assert_eq!(f[0].fix, "ALTER USER [orders_svc] WITH DEFAULT_SCHEMA = [dbo];");
}

#[test]
fn a_server_trigger_that_builds_sql_is_a_finding_and_a_hidden_one_cannot_be_verified() {
    let mut c = clean();
    c.server.as_mut().unwrap().triggers = Some(vec![ServerTrigger {
        name: "on_logon".into(),
        definition: Some("CREATE TRIGGER on_logon ON ALL SERVER FOR LOGON AS EXEC (@x)".into()),
    }]);
    assert_eq!(
        only(&check(&c), Rule::IndirectCode)[0].fix,
        "DROP TRIGGER [on_logon] ON ALL SERVER;"
    );
    c.server.as_mut().unwrap().triggers = Some(vec![ServerTrigger {
        name: "on_logon".into(),
        definition: None,
    }]);
    assert_eq!(unverified(&check(&c)), ["FP022"]);
    c.server.as_mut().unwrap().triggers = None;
    assert_eq!(unverified(&check(&c)), ["FP022"]);
}

#[test]
fn backups_references_and_security_policy_rights_are_side_channels() {
    let mut c = clean();
    c.principals.push(role("db_backupoperator"));
    c.memberships.push(member("db_backupoperator", "orders_svc"));
    c.permissions
        .push(grant("reporting", "REFERENCES", object("fence", "Tenure")));
    c.permissions
        .push(grant("fence_service", "ALTER ANY SECURITY POLICY", Securable::Database));
    c.permissions
        .push(grant("oncall", "BACKUP DATABASE", Securable::Database));
    let fixes: Vec<String> = only(&check(&c), Rule::SideChannel).into_iter().map(|f| f.fix).collect();
    assert_eq!(
        fixes,
        [
            "REVOKE ALTER ANY SECURITY POLICY FROM [fence_service];",
            "REVOKE BACKUP DATABASE FROM [oncall];",
            "ALTER ROLE [db_backupoperator] DROP MEMBER [orders_svc];",
            "REVOKE REFERENCES ON OBJECT::[fence].[Tenure] FROM [reporting];",
        ]
    );
}

#[test]
fn history_tables_change_capture_and_security_policies_on_the_fence_are_copies() {
    let mut c = clean();
    c.fence_table_features = Some(vec![
        FenceTableFeature {
            table: "fence.Resource".into(),
            feature: TableFeature::SystemVersioned {
                history: "dbo.ResourceHistory".into(),
            },
        },
        FenceTableFeature {
            table: "fence.Resource".into(),
            feature: TableFeature::ChangeDataCapture,
        },
        FenceTableFeature {
            table: "fence.Tenure".into(),
            feature: TableFeature::SecurityPolicy {
                policy: "dbo.HideRows".into(),
            },
        },
    ]);
    let f = only(&check(&c), Rule::SideChannel);
    assert_eq!(f.len(), 3);
    assert!(f.iter().any(|f| f.fix == "DROP SECURITY POLICY [dbo].[HideRows];"));
    c.fence_table_features = None;
    assert_eq!(unverified(&check(&c)), ["FP023"]);
}

#[test]
fn a_group_in_db_owner_leaves_a_service_with_its_own_windows_login_unverified() {
    let mut c = clean();
    c.principals
        .iter_mut()
        .find(|p| p.name == "orders_svc")
        .unwrap()
        .login_kind = Some(LoginKind::Windows);
    c.principals.push(Principal {
        login: Some("CORP\\DBAs".into()),
        ..Principal::new("CORP\\DBAs", PrincipalKind::Group)
    });
    c.memberships.push(member("db_owner", "CORP\\DBAs"));
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(unverified(&report), ["FP001"]);
    assert!(
        report.cannot_verify[0].reason.contains("CORP\\DBAs (in db_owner)"),
        "{report:#?}"
    );
    // A SQL login carries no group's rights.
    c.principals
        .iter_mut()
        .find(|p| p.name == "orders_svc")
        .unwrap()
        .login_kind = Some(LoginKind::Sql);
    assert_eq!(check(&c).exit_code(), 0);
}

#[test]
fn a_group_login_in_sysadmin_leaves_a_windows_service_login_unverified() {
    let mut c = clean();
    c.principals
        .iter_mut()
        .find(|p| p.name == "orders_svc")
        .unwrap()
        .login_kind = Some(LoginKind::Windows);
    let server = c.server.as_mut().unwrap();
    server.group_logins.push("BUILTIN\\Administrators".into());
    server.role_members.push(member("sysadmin", "BUILTIN\\Administrators"));
    assert_eq!(unverified(&check(&c)), ["FP002", "FP016"]);
}

#[test]
fn control_of_a_signing_certificate_lends_its_users_rights() {
    let mut c = clean();
    c.permissions.push(grant(
        "orders_svc",
        "CONTROL",
        Securable::Key {
            key: "CERTIFICATE".into(),
            name: "signer".into(),
        },
    ));
    let f = only(&check(&c), Rule::RunsAsSomeoneElse);
    assert_eq!(f[0].fix, "REVOKE CONTROL ON CERTIFICATE::[signer] FROM [orders_svc];");
}

// The safe layouts: each is clean.

#[test]
fn create_procedure_for_a_service_that_owns_only_its_own_schema_is_clean() {
    let mut c = clean();
    c.schemas.push(fencepost::audit::Schema {
        name: "orders_svc".into(),
        owner: "orders_svc".into(),
    });
    c.permissions
        .push(grant("orders_svc", "CREATE PROCEDURE", Securable::Database));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn take_ownership_of_a_dbo_object_breaks_its_chain_and_is_clean() {
    let mut c = clean();
    c.permissions
        .push(grant("orders_svc", "TAKE OWNERSHIP", object("dbo", "Orders")));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn a_throw_message_that_names_the_fence_without_dynamic_sql_is_clean() {
    let mut c = clean();
    c.objects.push(module(
        "dbo",
        "Guard",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Guard AS THROW 50000, N'use fence_api, never fence.Resource', 1;",
    ));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn execute_as_a_user_without_rights_is_clean() {
    let mut c = clean();
    c.principals.push(user("nobody", None));
    let mut p = module(
        "dbo",
        "Stamp",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Stamp AS SELECT 1",
    );
    p.execute_as = Some("nobody".into());
    c.objects.push(p);
    c.permissions
        .push(grant("orders_svc", "EXECUTE", object("dbo", "Stamp")));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
    // Once that user holds something, it is a finding again.
    c.memberships.push(member("db_datareader", "nobody"));
    assert_eq!(only(&check(&c), Rule::RunsAsSomeoneElse).len(), 1);
}

#[test]
fn a_wrapper_over_inspect_granted_only_to_roles_that_hold_inspect_is_clean() {
    let mut c = clean();
    c.objects.push(module(
        "dbo",
        "InspectOrder",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.InspectOrder @Key nvarchar(256) AS EXEC fence_api.Inspect @ResourceKey = @Key;",
    ));
    c.permissions
        .push(grant("fence_reader", "EXECUTE", object("dbo", "InspectOrder")));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
    // Granted to someone who does not hold Inspect, it hands Inspect out.
    c.permissions
        .push(grant("reporting", "EXECUTE", object("dbo", "InspectOrder")));
    assert_eq!(only(&check(&c), Rule::ForeignModule).len(), 1);
}

fn job_step(step_id: i32, command: &str) -> JobStep {
    JobStep {
        job: "nightly".into(),
        step_id,
        step: format!("step {step_id}"),
        owner: Some("sa".into()),
        command: Some(command.into()),
        database: None,
        run_as_user: None,
    }
}

fn editor(user: &str, login: Option<&str>, via: &str, via_role: bool, holder: &str) -> JobEditor {
    JobEditor {
        user: user.into(),
        login: login.map(String::from),
        via: via.into(),
        via_role,
        holder: holder.into(),
    }
}

#[test]
fn a_non_admin_who_may_write_msdbs_job_tables_is_a_finding_and_an_admin_is_not() {
    let mut c = clean();
    // Harmless today, and run as the Agent's sysadmin login.
    c.job_steps = Some(vec![job_step(1, "EXEC fence_api.PruneTenure @OlderThanDays = 30;")]);
    c.job_editors = Some(vec![
        editor("dbo", Some("sa"), "db_owner", true, "dbo"),
        editor("deployer", Some("deployer"), "db_datawriter", true, "deployer"),
    ]);
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0);
    c.job_editors.as_mut().unwrap().extend([
        editor("etl", Some("etl"), "db_datawriter", true, "agent_writers"),
        editor("guest", None, "UPDATE ON OBJECT::dbo.sysjobsteps", false, "guest"),
    ]);
    let f = only(&check(&c), Rule::AgentJob);
    assert_eq!(f.len(), 2, "{f:#?}");
    assert_eq!(f[0].principal.as_deref(), Some("etl"));
    assert_eq!(f[0].object, "DATABASE::msdb");
    assert_eq!(
        f[0].permission.as_deref(),
        Some(
            "writes the Agent's job tables through db_datawriter through agent_writers; here step 1 of nightly runs \
             as the Agent's sysadmin login (its owner sa is sysadmin)"
        )
    );
    assert_eq!(
        f[0].fix,
        "USE msdb; ALTER ROLE [db_datawriter] DROP MEMBER [agent_writers];"
    );
    assert_eq!(f[1].principal.as_deref(), Some("guest"));
    assert!(
        f[1].why.starts_with("every login (through msdb's guest) may write"),
        "{}",
        f[1].why
    );
    assert_eq!(
        f[1].fix,
        "USE msdb; REVOKE UPDATE ON OBJECT::dbo.sysjobsteps FROM [guest];"
    );
    // With no job here yet, the writer still makes one run as sysadmin.
    c.job_steps = Some(Vec::new());
    assert_eq!(only(&check(&c), Rule::AgentJob).len(), 2);
}

#[test]
fn who_may_write_msdbs_job_tables_unread_leaves_fp024_unverified() {
    let mut c = clean();
    c.job_editors = None;
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(unverified(&report), ["FP024"]);
    assert!(
        report.cannot_verify[0].reason.contains("VIEW DEFINITION in msdb"),
        "{report:#?}"
    );
}

#[test]
fn a_step_run_as_a_strong_user_by_a_non_sysadmin_owner_is_unverified_and_a_weak_one_clean() {
    let mut c = clean();
    c.job_steps = Some(vec![JobStep {
        owner: Some("reporting".into()),
        run_as_user: Some("dbo".into()),
        ..job_step(1, "EXEC dbo.ShipOrder @Id = 1;")
    }]);
    let report = check(&c);
    assert_eq!(unverified(&report), ["FP024"], "{report:#?}");
    assert!(
        report.cannot_verify[0]
            .reason
            .contains("database_user_name is dbo, which is db_owner here"),
        "{report:#?}"
    );
    // Run as its owner, who may rewrite it and gains nothing by that.
    c.job_steps.as_mut().unwrap()[0].run_as_user = None;
    let report = check(&c);
    assert!(
        report.findings.is_empty() && report.cannot_verify.is_empty(),
        "{report:#?}"
    );
}

#[test]
fn a_step_in_another_database_reaches_the_fence_only_through_this_databases_names() {
    let mut c = clean();
    let elsewhere = |command: &str| JobStep {
        database: Some("staging".into()),
        ..job_step(1, command)
    };
    // The other database's own fence.
    c.job_steps = Some(vec![elsewhere("UPDATE fence.Resource SET Generation = 0;")]);
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0);
    let db = c.database.clone();
    for command in [
        format!("UPDATE [{db}].fence.Resource SET Generation = 0;"),
        format!("USE [{db}]; UPDATE fence.Resource SET Generation = 0;"),
    ] {
        c.job_steps = Some(vec![elsewhere(&command)]);
        let f = only(&check(&c), Rule::AgentJob);
        assert_eq!(f.len(), 1, "{command}: {f:#?}");
        assert_eq!(f[0].object, "JOB::nightly");
        assert!(f[0].permission.as_deref().unwrap().contains("fence.Resource"), "{f:#?}");
    }
}

#[test]
fn an_agent_job_step_that_writes_the_fence_or_builds_sql_is_a_finding() {
    let mut c = clean();
    c.job_steps = Some(vec![
        job_step(1, "UPDATE fence.Resource SET Generation = Generation + 1;"),
        job_step(
            2,
            "DECLARE @s nvarchar(max) = (SELECT TOP 1 Sql FROM dbo.Chores); EXEC (@s);",
        ),
    ]);
    let f = only(&check(&c), Rule::AgentJob);
    assert_eq!(f.len(), 2, "{f:#?}");
    assert_eq!(f[0].object, "JOB::nightly");
    assert_eq!(f[0].principal.as_deref(), Some("sa"));
    assert_eq!(f[0].permission.as_deref(), Some("step 1 (step 1): fence.Resource"));
    assert_eq!(
        f[0].fix,
        "EXEC msdb.dbo.sp_delete_jobstep @job_name = N'nightly', @step_id = 1;"
    );
    assert_eq!(f[1].permission.as_deref(), Some("step 2 (step 2): EXEC (string)"));
}

#[test]
fn an_agent_job_that_calls_the_shipped_procedures_or_maintains_the_database_is_clean() {
    let mut c = clean();
    c.job_steps = Some(vec![
        job_step(1, "EXEC fence_api.PruneTenure @OlderThanDays = 30;"),
        job_step(2, "DBCC CHECKDB; PRINT N'fence.Resource checked';"),
    ]);
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0);
}

#[test]
fn agent_jobs_that_cannot_be_read_leave_fp024_unverified() {
    let mut c = clean();
    c.job_steps = None;
    assert_eq!(unverified(&check(&c)), ["FP024"]);
    c.job_steps = Some(vec![JobStep {
        command: None,
        ..job_step(1, "")
    }]);
    assert_eq!(unverified(&check(&c)), ["FP024"]);
}

fn linked(name: &str, data_source: Option<&str>, logins: Vec<LinkedLogin>) -> LinkedServer {
    LinkedServer {
        name: name.into(),
        data_source: data_source.map(String::from),
        logins,
    }
}

fn as_itself() -> LinkedLogin {
    LinkedLogin {
        local_login: None,
        uses_self_credential: true,
        remote_login: None,
    }
}

#[test]
fn a_linked_server_back_to_this_server_is_a_finding() {
    let mut c = clean();
    c.linked_servers.as_mut().unwrap().servers = vec![
        linked(
            "LOOPBACK",
            Some("tcp:localhost,1433"),
            vec![LinkedLogin {
                local_login: Some("orders_svc".into()),
                uses_self_credential: false,
                remote_login: Some("sa".into()),
            }],
        ),
        linked("SQL01", None, vec![as_itself()]),
    ];
    let f = only(&check(&c), Rule::LinkedServer);
    assert_eq!(f.len(), 2, "{f:#?}");
    assert_eq!(f[0].object, "LINKED SERVER::LOOPBACK");
    assert_eq!(
        f[0].permission.as_deref(),
        Some("loopback to tcp:localhost,1433, mapping orders_svc as sa")
    );
    assert_eq!(
        f[0].fix,
        "EXEC sp_dropserver @server = N'LOOPBACK', @droplogins = 'droplogins';"
    );
    assert_eq!(f[1].object, "LINKED SERVER::SQL01");
}

#[test]
fn a_linked_server_elsewhere_is_clean_as_itself_and_unverified_as_another_login() {
    let mut c = clean();
    c.linked_servers.as_mut().unwrap().servers = vec![linked("REPORTS", Some("reports01"), vec![as_itself()])];
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0);
    c.linked_servers.as_mut().unwrap().servers[0].logins.push(LinkedLogin {
        local_login: None,
        uses_self_credential: false,
        remote_login: Some("etl".into()),
    });
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(unverified(&report), ["FP025"]);
    assert!(
        report.cannot_verify[0]
            .reason
            .contains("maps every login as etl to another login there"),
        "{report:#?}"
    );
    c.linked_servers = None;
    assert_eq!(unverified(&check(&c)), ["FP025"]);
}

#[test]
fn a_linked_login_mapping_only_administrators_use_is_clean_and_one_a_service_or_non_admin_uses_is_not() {
    let mapped = |local: &str| LinkedLogin {
        local_login: Some(local.into()),
        uses_self_credential: false,
        remote_login: Some("etl".into()),
    };
    let mut c = clean();
    // sa and deployer are sysadmin; deployer is also db_owner here.
    c.linked_servers.as_mut().unwrap().servers = vec![linked(
        "REPORTS",
        Some("reports01"),
        vec![mapped("sa"), mapped("deployer")],
    )];
    let report = check(&c);
    assert!(
        report.findings.is_empty() && report.cannot_verify.is_empty(),
        "{report:#?}"
    );
    assert_eq!(report.exit_code(), 0);
    for local in ["orders_svc", "reporting"] {
        let mut c = c.clone();
        c.linked_servers.as_mut().unwrap().servers[0].logins.push(mapped(local));
        let report = check(&c);
        assert!(report.findings.is_empty(), "{report:#?}");
        assert_eq!(unverified(&report), ["FP025"], "{local}");
        assert!(
            report.cannot_verify[0].reason.contains(&format!("maps {local} as etl")),
            "{report:#?}"
        );
        assert!(!report.cannot_verify[0].reason.contains("sa as etl"), "{report:#?}");
    }
}

fn activated(procedure: &str, senders: &[&str]) -> ServiceQueue {
    ServiceQueue {
        name: "dbo.Intake".into(),
        owner: Some("dbo".into()),
        procedure: procedure.into(),
        execute_as: Some("OWNER".into()),
        execute_as_user: false,
        senders: senders.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn an_activation_procedure_that_reaches_the_fence_on_a_non_admins_messages_is_a_finding() {
    let mut c = clean();
    c.principals.push(user("intake", Some("intake")));
    c.objects.push(module(
        "dbo",
        "ProcessIntake",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.ProcessIntake AS DECLARE @b varbinary(max); RECEIVE TOP (1) @b = message_body FROM \
         dbo.Intake; DELETE FROM fence.Tenure WHERE Owner = CAST(@b AS uniqueidentifier);",
    ));
    c.activated_queues = Some(vec![activated("dbo.ProcessIntake", &["intake"])]);
    let report = check(&c);
    let f: Vec<_> = report.findings_of(Rule::QueueActivation).collect();
    assert_eq!(f.len(), 1, "{report:#?}");
    assert_eq!(f[0].principal.as_deref(), Some("intake"));
    assert_eq!(f[0].object, "QUEUE::dbo.Intake");
    assert_eq!(f[0].permission.as_deref(), Some("activates dbo.ProcessIntake as dbo"));
    assert_eq!(
        f[0].fix,
        "ALTER QUEUE [dbo].[Intake] WITH ACTIVATION (DROP); or revoke SEND on its services from intake"
    );
    // Only admins send: what the procedure reads, only they decide.
    c.activated_queues = Some(vec![activated("dbo.ProcessIntake", &["dbo"])]);
    assert_eq!(check(&c).findings_of(Rule::QueueActivation).count(), 0);
    // Unless the permission catalog hides who else may send.
    c.permissions.clear();
    let report = check(&c);
    assert!(unverified(&report).contains(&"FP026"), "{report:#?}");
}

#[test]
fn an_activation_procedure_that_reaches_nothing_is_clean_and_an_unreadable_one_unverified() {
    let mut c = clean();
    c.principals.push(user("intake", Some("intake")));
    c.objects.push(module(
        "dbo",
        "ProcessIntake",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.ProcessIntake AS DECLARE @b varbinary(max); RECEIVE TOP (1) @b = message_body FROM \
         dbo.Intake; INSERT INTO dbo.IntakeLog (Body) VALUES (@b);",
    ));
    c.activated_queues = Some(vec![activated("dbo.ProcessIntake", &["intake"])]);
    let report = check(&c);
    assert!(report.findings.is_empty(), "{report:#?}");
    assert_eq!(report.exit_code(), 0);
    // FP008 cannot read it either.
    object_mut(&mut c, "dbo.ProcessIntake").definition = None;
    assert_eq!(unverified(&check(&c)), ["FP008", "FP026"]);
    c.objects.retain(|o| o.name != "ProcessIntake");
    c.activated_queues = None;
    assert_eq!(unverified(&check(&c)), ["FP026"]);
}
