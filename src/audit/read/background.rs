//! Code that runs with no caller to check: SQL Server Agent job steps and who
//! may rewrite them, and Service Broker queues that activate a procedure.

use tiberius::Row;

use super::super::AuditError;
use super::super::catalog::{JobEditor, JobStep, ServiceQueue};
use super::query::{Query, Reading};
use super::rows::{int, required, text};

/// SQL Server Agent T-SQL steps that run in this database, or name it, with
/// the database and the user each runs as; and who may rewrite any job by
/// writing msdb's job tables (members of its db_owner or db_datawriter,
/// through nested roles, and holders of CONTROL, INSERT or UPDATE on msdb,
/// on its dbo schema, or on dbo.sysjobsteps and dbo.sysjobs) or change the
/// packages the Agent runs (members of db_ssisadmin or dc_admin), with a row
/// saying the checking login sees msdb's principals in full. An `editor` row
/// is `(kind, user, 1 for a role, role or permission, login, NULL, holder,
/// NULL)`. A marker row on Babelfish, which has no Agent, and another on Azure
/// SQL Database, which has none either (its elastic jobs sign in as a database
/// user, whose grants the other rules weigh). A login that cannot read msdb
/// fails it.
const JOB_STEPS: &str = "IF SERVERPROPERTY('Babelfish') IS NOT NULL
         SELECT CAST(N'no catalog' AS nvarchar(16)), CAST(NULL AS nvarchar(256)), CAST(NULL AS int),
                CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(max)),
                CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256))
     ELSE IF SERVERPROPERTY('EngineEdition') = 5
         SELECT CAST(N'no agent' AS nvarchar(16)), CAST(NULL AS nvarchar(256)), CAST(NULL AS int),
                CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(max)),
                CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256))
     ELSE
     BEGIN
         DECLARE @fp_w TABLE (id int, via nvarchar(256), via_role int, holder int);
         INSERT INTO @fp_w (id, via, via_role, holder)
         SELECT rm.member_principal_id, CAST(r.name AS nvarchar(256)), 1, rm.member_principal_id
           FROM msdb.sys.database_role_members AS rm
           JOIN msdb.sys.database_principals AS r ON r.principal_id = rm.role_principal_id
          WHERE r.name IN (N'db_owner', N'db_datawriter', N'db_ssisadmin', N'dc_admin')
         UNION ALL
         SELECT p.grantee_principal_id,
                CAST(p.permission_name + CASE p.class WHEN 3 THEN N' ON SCHEMA::dbo'
                                                      WHEN 1 THEN N' ON OBJECT::dbo.' + o.name ELSE N'' END
                     AS nvarchar(256)), 0, p.grantee_principal_id
           FROM msdb.sys.database_permissions AS p
           LEFT JOIN msdb.sys.objects AS o ON p.class = 1 AND o.object_id = p.major_id
          WHERE p.state IN ('G', 'W') AND p.permission_name IN (N'CONTROL', N'INSERT', N'UPDATE')
            AND (p.class = 0 OR (p.class = 3 AND p.major_id = 1)
                 OR (p.class = 1 AND o.schema_id = 1 AND o.name IN (N'sysjobsteps', N'sysjobs')));
         WHILE @@ROWCOUNT > 0
             INSERT INTO @fp_w (id, via, via_role, holder)
             SELECT DISTINCT rm.member_principal_id, w.via, w.via_role, w.holder
               FROM msdb.sys.database_role_members AS rm JOIN @fp_w AS w ON w.id = rm.role_principal_id
              WHERE NOT EXISTS (SELECT 1 FROM @fp_w AS x WHERE x.id = rm.member_principal_id AND x.via = w.via);
         SELECT CAST(N'step' AS nvarchar(16)), CAST(j.name AS nvarchar(256)), CAST(s.step_id AS int),
                CAST(s.step_name AS nvarchar(256)), CAST(SUSER_SNAME(j.owner_sid) AS nvarchar(256)),
                CAST(s.command AS nvarchar(max)),
                -- A step without a database runs in master.
                CAST(CASE WHEN s.database_name = DB_NAME() THEN NULL ELSE ISNULL(s.database_name, N'master') END
                     AS nvarchar(256)),
                CAST(NULLIF(s.database_user_name, N'') AS nvarchar(256))
           FROM msdb.dbo.sysjobsteps AS s JOIN msdb.dbo.sysjobs AS j ON j.job_id = s.job_id
          WHERE s.subsystem = N'TSQL'
            AND (s.database_name = DB_NAME() OR s.command LIKE N'%' + DB_NAME() + N'%')
         UNION ALL
         SELECT N'editors visible', NULL, NULL, NULL, NULL, NULL, NULL, NULL
          WHERE IS_SRVROLEMEMBER(N'sysadmin') = 1 OR HAS_PERMS_BY_NAME(N'msdb', N'DATABASE', N'VIEW DEFINITION') = 1
         UNION ALL
         SELECT DISTINCT N'editor', CAST(m.name AS nvarchar(256)), w.via_role, w.via,
                CAST(SUSER_SNAME(m.sid) AS nvarchar(256)), NULL, CAST(h.name AS nvarchar(256)), NULL
           FROM @fp_w AS w
           JOIN msdb.sys.database_principals AS m ON m.principal_id = w.id
           JOIN msdb.sys.database_principals AS h ON h.principal_id = w.holder
          WHERE m.type <> 'R' OR m.principal_id = 0;
     END";

pub(super) fn job_steps() -> Query {
    Query::optional("Agent job steps", JOB_STEPS, read_job_steps)
}

fn read_job_steps(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    (reading.catalog.job_steps, reading.catalog.job_editors) = match rows {
        Some(rows) => steps_and_editors(rows, what)?,
        None => (None, None),
    };
    Ok(())
}

/// The job steps, or `None` at the marker row of an engine without an Agent
/// catalog; and who may rewrite any job, or `None` without the row saying
/// msdb's principals were seen in full.
type JobRows = (Option<Vec<JobStep>>, Option<Vec<JobEditor>>);

fn steps_and_editors(rows: &[Row], what: &'static str) -> Result<JobRows, AuditError> {
    let mut steps = Vec::new();
    let mut editors = Vec::new();
    let mut visible = false;
    for row in rows {
        match text(row, 0, what)?.as_deref() {
            Some("step") => steps.push(JobStep {
                job: required(row, 1, what)?,
                step_id: int(row, 2, what)?.unwrap_or_default(),
                step: text(row, 3, what)?.unwrap_or_default(),
                owner: text(row, 4, what)?,
                command: text(row, 5, what)?,
                database: text(row, 6, what)?,
                run_as_user: text(row, 7, what)?,
            }),
            Some("editors visible") => visible = true,
            // Azure SQL Database: no Agent, no msdb jobs at all.
            Some("no agent") => return Ok((Some(Vec::new()), Some(Vec::new()))),
            Some("editor") => editors.push(JobEditor {
                user: required(row, 1, what)?,
                via_role: int(row, 2, what)? == Some(1),
                via: required(row, 3, what)?,
                login: text(row, 4, what)?,
                holder: required(row, 6, what)?,
            }),
            _ => return Ok((None, None)),
        }
    }
    Ok((Some(steps), visible.then_some(editors)))
}

/// Queues with activation on, their owners, EXECUTE AS principals (-2 is
/// OWNER) and who may send to them. Babelfish has no Service Broker: no
/// queue can exist there.
const ACTIVATED_QUEUES: &str = "IF SERVERPROPERTY('Babelfish') IS NOT NULL
         SELECT CAST(NULL AS nvarchar(16)), CAST(NULL AS nvarchar(520)), CAST(NULL AS nvarchar(256)),
                CAST(NULL AS nvarchar(520)), CAST(NULL AS nvarchar(256)), CAST(NULL AS int) WHERE 1 = 0
     ELSE
         SELECT CAST(N'queue' AS nvarchar(16)), CAST(SCHEMA_NAME(q.schema_id) + N'.' + q.name AS nvarchar(520)),
                CAST(USER_NAME(COALESCE(q.principal_id, sc.principal_id)) AS nvarchar(256)),
                CAST(PARSENAME(q.activation_procedure, 2) + N'.' + PARSENAME(q.activation_procedure, 1)
                     AS nvarchar(520)),
                CAST(CASE WHEN q.execute_as_principal_id = -2 THEN N'OWNER'
                          WHEN q.execute_as_principal_id IS NOT NULL THEN USER_NAME(q.execute_as_principal_id)
                     END AS nvarchar(256)),
                CAST(q.execute_as_principal_id AS int)
           FROM sys.service_queues AS q JOIN sys.schemas AS sc ON sc.schema_id = q.schema_id
          WHERE q.is_activation_enabled = 1 AND q.activation_procedure IS NOT NULL
         UNION ALL
         SELECT N'sender', CAST(SCHEMA_NAME(q.schema_id) + N'.' + q.name AS nvarchar(520)),
                CAST(USER_NAME(p.grantee_principal_id) AS nvarchar(256)), NULL, NULL, NULL
           FROM sys.service_queues AS q JOIN sys.services AS sv ON sv.service_queue_id = q.object_id
           JOIN sys.database_permissions AS p ON p.class = 17 AND p.major_id = sv.service_id
          WHERE q.is_activation_enabled = 1 AND p.state IN ('G', 'W') AND p.permission_name IN ('SEND', 'CONTROL')
         UNION ALL
         SELECT N'sender', CAST(SCHEMA_NAME(q.schema_id) + N'.' + q.name AS nvarchar(520)),
                CAST(USER_NAME(sv.principal_id) AS nvarchar(256)), NULL, NULL, NULL
           FROM sys.service_queues AS q JOIN sys.services AS sv ON sv.service_queue_id = q.object_id
          WHERE q.is_activation_enabled = 1";

pub(super) fn activated_queues() -> Query {
    Query::optional("activated queues", ACTIVATED_QUEUES, read_activated_queues)
}

fn read_activated_queues(rows: Option<&[Row]>, what: &'static str, reading: &mut Reading) -> Result<(), AuditError> {
    reading.catalog.activated_queues = match rows {
        Some(rows) => Some(queues(rows, what)?),
        None => None,
    };
    Ok(())
}

fn queues(rows: &[Row], what: &'static str) -> Result<Vec<ServiceQueue>, AuditError> {
    let mut queues: Vec<ServiceQueue> = Vec::new();
    for row in rows {
        if text(row, 0, what)?.as_deref() == Some("queue") {
            queues.push(ServiceQueue {
                name: required(row, 1, what)?,
                owner: text(row, 2, what)?,
                procedure: text(row, 3, what)?.unwrap_or_default(),
                execute_as: text(row, 4, what)?,
                // A principal's id, which a user called Owner has too: only
                // -2 is the keyword.
                execute_as_user: int(row, 5, what)?.is_some_and(|id| id != -2),
                senders: Vec::new(),
            });
        }
    }
    // A UNION ALL keeps no order: senders are matched once every queue is in.
    for row in rows {
        if text(row, 0, what)?.as_deref() != Some("sender") {
            continue;
        }
        let name = required(row, 1, what)?;
        if let (Some(q), Some(sender)) = (queues.iter_mut().find(|q| q.name == name), text(row, 2, what)?) {
            q.senders.push(sender);
        }
    }
    Ok(queues)
}
