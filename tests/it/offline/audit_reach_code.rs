//! FP027 over code reached indirectly, on layouts written from Microsoft's
//! documentation: DDL triggers run in the context of whoever ran the DDL
//! ("CREATE TRIGGER": EXECUTE AS CALLER by default); a T-SQL job step runs
//! as its owner, or as the Agent's service account for a sysadmin's job
//! ("SQL Server Agent job steps"); an activation procedure runs as its
//! queue's EXECUTE AS principal ("CREATE QUEUE"); a module WITH EXECUTE AS
//! runs what it calls in that context, synonyms resolved at run time
//! ("Synonyms"); dynamic SQL (EXEC, sp_executesql, sp_prepexec) runs with
//! the rights of the context it runs in. In each layout the code's own text
//! is harmless: only who may change what it calls makes it a way in.

use crate::support;

use fencepost::audit::{Catalog, Finding, ObjectKind, Rule, Schema, ServiceQueue};
use support::fixtures::*;

fn reach(c: &Catalog) -> Vec<Finding> {
    only(&check(c), Rule::ReachesFence)
}

fn named<'f>(findings: &'f [Finding], principal: &str) -> Vec<&'f Finding> {
    findings
        .iter()
        .filter(|f| f.principal.as_deref() == Some(principal))
        .collect()
}

fn steps(f: &Finding) -> Vec<&str> {
    f.path.iter().map(|s| s.step.as_str()).collect()
}

/// A schema `tools` owned by the user `tool_owner`, which holds nothing
/// else, with a harmless procedure `tools.<name>`.
fn tools(c: &mut Catalog, name: &str) {
    c.principals.push(user("tool_owner", Some("tool_owner")));
    c.schemas.push(Schema {
        name: "tools".into(),
        owner: "tool_owner".into(),
    });
    c.objects.push(module(
        "tools",
        name,
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE tools.{name} AS SELECT 1;"),
    ));
}

#[test]
fn a_ddl_trigger_calls_a_procedure_in_a_schema_someone_else_owns() {
    let mut c = clean();
    tools(&mut c, "LogDdl");
    c.objects.push(module(
        "",
        "audit_ddl",
        ObjectKind::DatabaseTrigger,
        "CREATE TRIGGER audit_ddl ON DATABASE FOR DDL_DATABASE_LEVEL_EVENTS AS EXEC tools.LogDdl;",
    ));
    let f = reach(&c);
    let owner = named(&f, "tool_owner");
    assert_eq!(owner.len(), 3, "{f:#?}");
    assert_eq!(
        steps(owner[0])[..2],
        [
            "ALTER on tools.LogDdl (by the hierarchy: tool_owner owns SCHEMA::tools, which implies ALTER on \
             tools.LogDdl): may rewrite it",
            "tools.LogDdl is run by the DDL trigger audit_ddl, which fires on the deploy's DDL and runs as that \
             member of db_owner"
        ]
    );
    assert_eq!(owner[0].fix, "ALTER AUTHORIZATION ON SCHEMA::[tools] TO [dbo];");
}

#[test]
fn a_sysadmins_job_step_calls_a_procedure_in_a_schema_someone_else_owns() {
    let mut c = clean();
    tools(&mut c, "Nightly");
    c.job_steps = Some(vec![fencepost::audit::JobStep {
        job: "nightly".into(),
        step_id: 1,
        step: "cleanup".into(),
        owner: Some("sa".into()),
        command: Some("EXEC tools.Nightly;".into()),
        database: None,
        run_as_user: None,
    }]);
    let f = reach(&c);
    let owner = named(&f, "tool_owner");
    assert_eq!(owner.len(), 3, "{f:#?}");
    assert_eq!(
        steps(owner[0])[1],
        "tools.Nightly is run by step 1 of job nightly, which runs as the Agent's sysadmin login, its owner sa \
         being sysadmin"
    );
}

#[test]
fn an_activation_procedure_in_a_schema_someone_else_owns_runs_as_dbo() {
    let mut c = clean();
    tools(&mut c, "Drain");
    c.activated_queues = Some(vec![ServiceQueue {
        name: "dbo.Intake".into(),
        owner: Some("dbo".into()),
        procedure: "tools.Drain".into(),
        execute_as: Some("dbo".into()),
        execute_as_user: true,
        senders: Vec::new(),
    }]);
    let f = reach(&c);
    let owner = named(&f, "tool_owner");
    assert_eq!(owner.len(), 3, "{f:#?}");
    assert_eq!(
        steps(owner[0])[1],
        "tools.Drain is run by queue dbo.Intake's activation, which runs it as dbo on every message"
    );
}

#[test]
fn a_server_trigger_calls_a_procedure_of_this_database() {
    let mut c = clean();
    tools(&mut c, "LogLogin");
    c.server.as_mut().unwrap().triggers = Some(vec![fencepost::audit::ServerTrigger {
        name: "log_ddl".into(),
        definition: Some(
            "CREATE TRIGGER log_ddl ON ALL SERVER FOR DDL_SERVER_LEVEL_EVENTS AS EXEC orders.tools.LogLogin;".into(),
        ),
    }]);
    let f = reach(&c);
    let owner = named(&f, "tool_owner");
    assert_eq!(owner.len(), 3, "{f:#?}");
    assert!(steps(owner[0])[1].contains("the server trigger log_ddl"), "{f:#?}");
    // A two-part name in a server trigger resolves in master, not here.
    let mut c = clean();
    tools(&mut c, "LogLogin");
    c.server.as_mut().unwrap().triggers = Some(vec![fencepost::audit::ServerTrigger {
        name: "log_ddl".into(),
        definition: Some(
            "CREATE TRIGGER log_ddl ON ALL SERVER FOR DDL_SERVER_LEVEL_EVENTS AS EXEC tools.LogLogin;".into(),
        ),
    }]);
    assert_eq!(check(&c).exit_code(), 0, "{:#?}", check(&c));
}

#[test]
fn a_wrapper_executing_as_owner_resolves_a_synonym_someone_else_can_repoint() {
    // A synonym is resolved when the module runs: whoever may drop and
    // re-create it decides what the wrapper runs, as dbo.
    let mut c = clean();
    c.principals.push(user("tool_owner", Some("tool_owner")));
    c.schemas.push(Schema {
        name: "tools".into(),
        owner: "tool_owner".into(),
    });
    c.objects
        .push(module("tools", "Archive", ObjectKind::Synonym, "[dbo].[ShipOrder]"));
    let mut wrapper = module(
        "dbo",
        "Housekeeping",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.Housekeeping WITH EXECUTE AS OWNER AS EXEC tools.Archive 1;",
    );
    wrapper.execute_as = Some("OWNER".into());
    c.objects.push(wrapper);
    let f = reach(&c);
    let owner = named(&f, "tool_owner");
    assert_eq!(owner.len(), 3, "{f:#?}");
    assert!(
        steps(owner[0])[0].ends_with("may drop it and create it again pointing at code of its own"),
        "{f:#?}"
    );
    assert_eq!(
        steps(owner[0])[1],
        "tools.Archive is run by dbo.Housekeeping, which runs as dbo (EXECUTE AS OWNER)"
    );
}

fn runs_text_as_dbo(c: &mut Catalog, body: &str) {
    let mut proc = module(
        "dbo",
        "RunReport",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE dbo.RunReport @Proc sysname WITH EXECUTE AS OWNER AS {body}"),
    );
    proc.execute_as = Some("OWNER".into());
    c.objects.push(proc);
    c.permissions
        .push(grant("reporting", "EXECUTE", object("dbo", "RunReport")));
}

#[test]
fn a_procedure_name_in_a_variable_runs_whatever_the_caller_names_as_the_owner() {
    // EXEC @rc = @Proc: "the name of the procedure can be a variable".
    let mut c = clean();
    runs_text_as_dbo(&mut c, "DECLARE @rc int; EXEC @rc = @Proc; RETURN @rc;");
    let f = reach(&c);
    let reporting = named(&f, "reporting");
    assert_eq!(reporting.len(), 3, "{f:#?}");
    assert_eq!(
        steps(reporting[0])[..2],
        [
            "EXECUTE on dbo.RunReport",
            "dbo.RunReport runs as dbo (EXECUTE AS) and builds SQL at run time (EXEC @variable): it runs whatever it \
             is handed as dbo"
        ]
    );
    assert_eq!(
        reporting[0].fix,
        "REVOKE EXECUTE ON OBJECT::[dbo].[RunReport] FROM [reporting];"
    );
}

#[test]
fn sp_prepexec_runs_text_as_the_owner() {
    let mut c = clean();
    runs_text_as_dbo(
        &mut c,
        "DECLARE @h int; EXEC sys.sp_prepexec @h OUTPUT, NULL, @Proc; EXEC sys.sp_unprepare @h;",
    );
    let f = reach(&c);
    let reporting = named(&f, "reporting");
    assert_eq!(reporting.len(), 3, "{f:#?}");
    assert!(steps(reporting[0])[1].contains("(sp_prepexec)"), "{f:#?}");
}

#[test]
fn code_run_by_an_administrator_that_only_administrators_change_is_clean() {
    // dbo owns tools: whoever changes what the trigger calls is trusted.
    let mut c = clean();
    c.schemas.push(Schema {
        name: "tools".into(),
        owner: "dbo".into(),
    });
    c.objects.push(module(
        "tools",
        "LogDdl",
        ObjectKind::Procedure,
        "CREATE PROCEDURE tools.LogDdl AS SELECT 1;",
    ));
    c.objects.push(module(
        "",
        "audit_ddl",
        ObjectKind::DatabaseTrigger,
        "CREATE TRIGGER audit_ddl ON DATABASE FOR DDL_DATABASE_LEVEL_EVENTS AS EXEC tools.LogDdl;",
    ));
    let report = check(&c);
    assert_eq!(report.exit_code(), 0, "{report:#?}");
}

#[test]
fn a_job_step_owned_by_a_writer_runs_what_it_calls_as_that_writer() {
    // A job owned by a login that is not sysadmin runs its T-SQL steps as
    // that owner: here an ETL login in db_datawriter.
    let mut c = clean();
    tools(&mut c, "Load");
    c.principals.push(user("etl", Some("etl")));
    c.memberships.push(member("db_datawriter", "etl"));
    c.job_steps = Some(vec![fencepost::audit::JobStep {
        job: "load".into(),
        step_id: 2,
        step: "load".into(),
        owner: Some("etl".into()),
        command: Some("EXEC tools.Load;".into()),
        database: None,
        run_as_user: None,
    }]);
    let f = reach(&c);
    let owner = named(&f, "tool_owner");
    assert_eq!(owner.len(), 1, "{f:#?}");
    assert_eq!(
        steps(owner[0])[1..],
        [
            "tools.Load is run by step 2 of job load, which runs as its owner etl",
            "enters the database as user etl",
            "member of db_datawriter",
            "UPDATE on fence.Resource (by the hierarchy: db_datawriter holds UPDATE on the database, a fixed role's \
             documented right, which implies UPDATE on fence.Resource)"
        ]
    );
}

#[test]
fn a_writer_of_msdbs_job_tables_keeps_fp024_with_its_path_to_sysadmin() {
    // Only sysadmin edits another's job through the Agent's procedures;
    // whoever writes msdb.dbo.sysjobs directly sets a job's owner to sa.
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.job_editors = Some(vec![fencepost::audit::JobEditor {
        user: "etl".into(),
        login: Some("etl".into()),
        via: "db_datawriter".into(),
        via_role: true,
        holder: "etl".into(),
    }]);
    let f = only(&check(&c), Rule::AgentJob);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(
        steps(&f[0])[0].starts_with("writes msdb's job tables through db_datawriter"),
        "{f:#?}"
    );
    assert_eq!(steps(&f[0])[1], "enters every database as dbo");
}

#[test]
fn msdbs_package_roles_run_their_members_packages_as_sysadmin() {
    // "Integration Services Roles": members of db_ssisadmin and dc_admin
    // "may be able to elevate their privileges to sysadmin", as the Agent
    // runs the packages they change as sysadmin. A sysadmin member gains
    // nothing by it and is not named.
    for role in ["db_ssisadmin", "dc_admin"] {
        let mut c = clean();
        c.job_editors = Some(vec![
            fencepost::audit::JobEditor {
                user: "ssis_dev".into(),
                login: Some("ssis_dev".into()),
                via: role.into(),
                via_role: true,
                holder: "ssis_dev".into(),
            },
            fencepost::audit::JobEditor {
                user: "deployer".into(),
                login: Some("deployer".into()),
                via: role.into(),
                via_role: true,
                holder: "deployer".into(),
            },
        ]);
        let f = only(&check(&c), Rule::AgentJob);
        assert_eq!(f.len(), 1, "{role}: {f:#?}");
        assert_eq!(f[0].principal.as_deref(), Some("ssis_dev"));
        assert!(
            f[0].permission
                .as_deref()
                .is_some_and(|p| p.starts_with(&format!("changes the packages the Agent runs through {role}"))),
            "{f:#?}"
        );
        assert!(
            steps(&f[0])[0].starts_with(&format!(
                "member of msdb's {role}: may change the Integration Services packages"
            )),
            "{f:#?}"
        );
        assert_eq!(
            f[0].fix,
            format!("USE msdb; ALTER ROLE [{role}] DROP MEMBER [ssis_dev];")
        );
    }
}
