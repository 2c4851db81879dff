//! The catalog queries, in the order [`build`](super::build) reads their
//! answers. Each is one result set; parts that some engine lacks are guarded
//! with `IF` so that the whole batch still runs there (a failed batch falls
//! back to one round trip per query).

use crate::tsql::definition_hash_sql;

/// One catalog query. Optional ones read views some engines lack; their
/// absence becomes "cannot verify" for the rules that need them.
pub(super) struct Query {
    pub(super) what: &'static str,
    pub(super) sql: String,
    pub(super) required: bool,
}

/// The visibility marker, the server role memberships, the group logins and
/// every server role (a role without members included).
const SERVER_ROLES: &str = "SELECT N'visible', CAST(CASE WHEN IS_SRVROLEMEMBER(N'sysadmin') = 1
                                         OR HAS_PERMS_BY_NAME(NULL, NULL, N'VIEW ANY DEFINITION') = 1
                                         THEN N'1' ELSE N'0' END AS nvarchar(256)), CAST(NULL AS nvarchar(256)),
                            CAST(NULL AS nvarchar(256))
                     UNION ALL
                     SELECT N'member', CAST(r.name AS nvarchar(256)), CAST(m.name AS nvarchar(256)),
                            CAST(NULL AS nvarchar(256))
                       FROM sys.server_role_members AS rm
                       JOIN sys.server_principals AS r ON r.principal_id = rm.role_principal_id
                       JOIN sys.server_principals AS m ON m.principal_id = rm.member_principal_id
                     UNION ALL
                     SELECT N'group', CAST(g.name AS nvarchar(256)), CAST(NULL AS nvarchar(256)),
                            CAST(NULL AS nvarchar(256))
                       FROM sys.server_principals AS g WHERE g.type IN ('G', 'X')
                     UNION ALL
                     SELECT N'role', CAST(r.name AS nvarchar(256)), CAST(NULL AS nvarchar(256)),
                            CAST(NULL AS nvarchar(256))
                       FROM sys.server_principals AS r WHERE r.type = 'R'";

/// Every granted server permission: server-wide ones, and those on a login
/// or server role (class 101). All of them, not a chosen list: the rules
/// decide which reach the fence, and a permission left unread is one no rule
/// can weigh.
const SERVER_PERMISSIONS: &str = "SELECT N'permission', CAST(p.permission_name AS nvarchar(256)),
                            CAST(g.name AS nvarchar(256)),
                            CAST(CASE WHEN p.class = 101 THEN SUSER_NAME(p.major_id) END AS nvarchar(256))
                       FROM sys.server_permissions AS p
                       JOIN sys.server_principals AS g ON g.principal_id = p.grantee_principal_id
                      WHERE p.state IN ('G', 'W')
                        AND p.class IN (100, 101)";

/// The checking login's own database permissions that decide what the
/// catalog shows it. Babelfish has no fn_my_permissions; there only
/// sysadmin can be established.
const VISIBILITY: &str = "IF SERVERPROPERTY('Babelfish') IS NULL
         SELECT CAST(N'held' AS nvarchar(16)), CAST(p.permission_name AS nvarchar(128))
           FROM fn_my_permissions(NULL, N'DATABASE') AS p
          WHERE p.permission_name IN (N'VIEW DEFINITION', N'VIEW SECURITY DEFINITION')
         UNION ALL
         SELECT N'exists', CAST(b.permission_name AS nvarchar(128))
           FROM sys.fn_builtin_permissions(N'DATABASE') AS b
          WHERE b.permission_name = N'VIEW SECURITY DEFINITION'
         UNION ALL
         SELECT N'sysadmin', CAST(IS_SRVROLEMEMBER(N'sysadmin') AS nvarchar(128))
         UNION ALL
         SELECT N'listed', CAST(NULL AS nvarchar(128))
     ELSE
         SELECT CAST(N'sysadmin' AS nvarchar(16)), CAST(IS_SRVROLEMEMBER(N'sysadmin') AS nvarchar(128))";

/// Signatures on modules. An engine without `sys.crypt_properties` can still
/// prove no module is signed: signing needs a certificate or an asymmetric
/// key, and then it has none.
const SIGNATURES: &str = "IF OBJECT_ID(N'sys.crypt_properties') IS NULL
         SELECT CAST(NULL AS int), CAST(CASE WHEN EXISTS (SELECT 1 FROM sys.certificates)
                                               OR EXISTS (SELECT 1 FROM sys.asymmetric_keys)
                                             THEN N'signers' ELSE N'no signers' END AS nvarchar(300))
     ELSE
         SELECT cp.major_id,
                CAST(CASE WHEN c.name IS NOT NULL THEN N'CERTIFICATE::' + c.name
                          WHEN k.name IS NOT NULL THEN N'ASYMMETRIC KEY::' + k.name
                          ELSE N'an unknown signer' END AS nvarchar(300))
           FROM sys.crypt_properties AS cp
           LEFT JOIN sys.certificates AS c ON c.thumbprint = cp.thumbprint
           LEFT JOIN sys.asymmetric_keys AS k ON k.thumbprint = cp.thumbprint
          WHERE cp.class = 1";

/// Every other TRUSTWORTHY database, its owner, and who holds there what
/// lets a module run as its owner: db_owner, db_ddladmin or db_securityadmin
/// (through nested roles), or CONTROL, ALTER, IMPERSONATE on dbo and the
/// like, read with one dynamic query over the
/// databases the checking login may read. Babelfish has no TRUSTWORTHY
/// databases and no INSERT ... EXEC: it only lists them.
const TRUSTWORTHY: &str = "IF SERVERPROPERTY('Babelfish') IS NULL
     BEGIN
         DECLARE @fp_owners TABLE (db nvarchar(256), usr nvarchar(256), lgn nvarchar(256), via nvarchar(256),
                                   what nvarchar(256));
         DECLARE @fp_sql nvarchar(max) = N'';
         SELECT @fp_sql = @fp_sql + N';WITH o (id, via, what) AS (
                    SELECT rm.member_principal_id, rm.member_principal_id, CAST(r.name AS nvarchar(256))
                      FROM ' + QUOTENAME(d.name) + N'.sys.database_role_members AS rm
                      JOIN ' + QUOTENAME(d.name) + N'.sys.database_principals AS r
                        ON r.principal_id = rm.role_principal_id
                       AND r.name IN (N''db_owner'', N''db_ddladmin'', N''db_securityadmin'')
                    UNION ALL
                    SELECT p.grantee_principal_id, p.grantee_principal_id,
                           CAST(p.permission_name + CASE WHEN p.class = 4 THEN N'' ON USER::dbo''
                                                         WHEN p.class = 3 THEN N'' ON SCHEMA::dbo'' ELSE N'''' END
                                AS nvarchar(256))
                      FROM ' + QUOTENAME(d.name) + N'.sys.database_permissions AS p
                     WHERE p.state IN (''G'', ''W'')
                       AND ((p.class = 0 AND p.permission_name IN (N''CONTROL'', N''ALTER'', N''ALTER ANY SCHEMA'',
                                N''ALTER ANY ROLE'', N''ALTER ANY USER''))
                         OR (p.class = 4 AND p.major_id = 1
                             AND p.permission_name IN (N''IMPERSONATE'', N''CONTROL'', N''ALTER''))
                         OR (p.class = 3 AND p.major_id = 1 AND p.permission_name IN (N''CONTROL'', N''ALTER'')))
                    UNION ALL
                    SELECT rm.member_principal_id, o.via, o.what
                      FROM ' + QUOTENAME(d.name) + N'.sys.database_role_members AS rm
                      JOIN o ON rm.role_principal_id = o.id)
                SELECT ' + QUOTENAME(d.name, N'''') + N', m.name, SUSER_SNAME(m.sid), v.name, o.what
                  FROM o
                  JOIN ' + QUOTENAME(d.name) + N'.sys.database_principals AS m ON m.principal_id = o.id
                  JOIN ' + QUOTENAME(d.name) + N'.sys.database_principals AS v ON v.principal_id = o.via
                 WHERE m.type <> ''R'';'
           FROM sys.databases AS d
          WHERE d.is_trustworthy_on = 1 AND d.database_id <> DB_ID() AND HAS_DBACCESS(d.name) = 1
            AND (IS_SRVROLEMEMBER(N'sysadmin') = 1 OR HAS_PERMS_BY_NAME(d.name, N'DATABASE', N'VIEW DEFINITION') = 1);
         IF @fp_sql <> N'' INSERT INTO @fp_owners EXEC sp_executesql @fp_sql;
         SELECT CAST(d.name AS nvarchar(256)), CAST(SUSER_SNAME(d.owner_sid) AS nvarchar(256)),
                CAST(CASE WHEN HAS_DBACCESS(d.name) = 1
                           AND (IS_SRVROLEMEMBER(N'sysadmin') = 1
                                OR HAS_PERMS_BY_NAME(d.name, N'DATABASE', N'VIEW DEFINITION') = 1)
                          THEN 1 ELSE 0 END AS int),
                CAST(o.usr AS nvarchar(256)), CAST(o.lgn AS nvarchar(256)), CAST(o.via AS nvarchar(256)),
                CAST(o.what AS nvarchar(256))
           FROM sys.databases AS d
           LEFT JOIN @fp_owners AS o ON o.db = d.name
          WHERE d.is_trustworthy_on = 1 AND d.database_id <> DB_ID();
     END
     ELSE
         SELECT CAST(d.name AS nvarchar(256)), CAST(SUSER_SNAME(d.owner_sid) AS nvarchar(256)), CAST(0 AS int),
                CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256)),
                CAST(NULL AS nvarchar(256))
           FROM sys.databases AS d
          WHERE d.is_trustworthy_on = 1 AND d.database_id <> DB_ID()";

/// The bodies of numbered procedures beyond the first.
const NUMBERED: &str = "IF OBJECT_ID(N'sys.numbered_procedures') IS NULL
         SELECT CAST(NULL AS int), CAST(NULL AS int), CAST(NULL AS nvarchar(max)) WHERE 1 = 0
     ELSE
         SELECT n.object_id, CAST(n.procedure_number AS int), CAST(n.definition AS nvarchar(max))
           FROM sys.numbered_procedures AS n WHERE n.procedure_number > 1";

/// Server DDL and logon triggers with their texts; a marker row says the
/// engine has no such catalog (Babelfish), where none can be ruled out.
const SERVER_TRIGGERS: &str = "IF OBJECT_ID(N'sys.server_triggers') IS NULL
         SELECT CAST(N'no catalog' AS nvarchar(16)), CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(max))
     ELSE
         SELECT CAST(N'trigger' AS nvarchar(16)), CAST(t.name AS nvarchar(256)), CAST(m.definition AS nvarchar(max))
           FROM sys.server_triggers AS t LEFT JOIN sys.server_sql_modules AS m ON m.object_id = t.object_id";

/// History tables, change data capture, replication and security policies
/// on the fence tables; a marker row where the engine has no
/// sys.security_predicates (Babelfish), where they cannot be ruled out.
const FENCE_TABLE_FEATURES: &str = "IF OBJECT_ID(N'sys.security_predicates') IS NULL
         SELECT CAST(N'no catalog' AS nvarchar(16)), CAST(NULL AS nvarchar(520)), CAST(NULL AS nvarchar(520))
     ELSE
         SELECT CAST(N'versioned' AS nvarchar(16)),
                CAST(SCHEMA_NAME(t.schema_id) + N'.' + t.name AS nvarchar(520)),
                CAST(OBJECT_SCHEMA_NAME(t.history_table_id) + N'.' + OBJECT_NAME(t.history_table_id) AS nvarchar(520))
           FROM sys.tables AS t WHERE SCHEMA_NAME(t.schema_id) = N'fence' AND t.temporal_type = 2
         UNION ALL
         SELECT N'cdc', CAST(SCHEMA_NAME(t.schema_id) + N'.' + t.name AS nvarchar(520)), NULL
           FROM sys.tables AS t WHERE SCHEMA_NAME(t.schema_id) = N'fence' AND t.is_tracked_by_cdc = 1
         UNION ALL
         SELECT N'replicated', CAST(SCHEMA_NAME(t.schema_id) + N'.' + t.name AS nvarchar(520)), NULL
           FROM sys.tables AS t WHERE SCHEMA_NAME(t.schema_id) = N'fence'
            AND (t.is_replicated = 1 OR t.is_merge_published = 1 OR t.is_published = 1)
         UNION ALL
         SELECT N'policy', CAST(OBJECT_SCHEMA_NAME(sp.target_object_id) + N'.' + OBJECT_NAME(sp.target_object_id)
                                AS nvarchar(520)),
                CAST(OBJECT_SCHEMA_NAME(sp.object_id) + N'.' + OBJECT_NAME(sp.object_id) AS nvarchar(520))
           FROM sys.security_predicates AS sp WHERE OBJECT_SCHEMA_NAME(sp.target_object_id) = N'fence'";

/// SQL Server Agent T-SQL steps that run in this database, or name it, with
/// the database and the user each runs as; and who may rewrite any job by
/// writing msdb's job tables (members of its db_owner or db_datawriter,
/// through nested roles, and holders of CONTROL, INSERT or UPDATE on msdb,
/// on its dbo schema, or on dbo.sysjobsteps and dbo.sysjobs), with a row
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
          WHERE r.name IN (N'db_owner', N'db_datawriter')
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

/// The names this server answers to, its linked servers and their login
/// mappings; a `visible` row when the checking login sees them all.
const LINKED_SERVERS: &str = "SELECT CAST(N'visible' AS nvarchar(16)), CAST(NULL AS nvarchar(256)),
                CAST(NULL AS nvarchar(4000)), CAST(NULL AS int), CAST(NULL AS nvarchar(256))
          WHERE IS_SRVROLEMEMBER(N'sysadmin') = 1 OR HAS_PERMS_BY_NAME(NULL, NULL, N'VIEW ANY DEFINITION') = 1
     UNION ALL
     SELECT N'this', CAST(@@SERVERNAME AS nvarchar(256)), NULL, NULL, NULL
     UNION ALL
     SELECT N'this', CAST(CAST(SERVERPROPERTY('MachineName') AS nvarchar(128))
                          + ISNULL(N'\\' + CAST(SERVERPROPERTY('InstanceName') AS nvarchar(128)), N'') AS nvarchar(256)),
            NULL, NULL, NULL
     UNION ALL
     SELECT N'server', CAST(s.name AS nvarchar(256)), CAST(s.data_source AS nvarchar(4000)), NULL, NULL
       FROM sys.servers AS s WHERE s.is_linked = 1
     UNION ALL
     SELECT N'login', CAST(s.name AS nvarchar(256)),
            CAST(CASE WHEN l.local_principal_id <> 0 THEN SUSER_NAME(l.local_principal_id) END AS nvarchar(4000)),
            CAST(l.uses_self_credential AS int), CAST(l.remote_name AS nvarchar(256))
       FROM sys.linked_logins AS l JOIN sys.servers AS s ON s.server_id = l.server_id WHERE s.is_linked = 1";

/// Queues with activation on, their owners, EXECUTE AS principals (-2 is
/// OWNER) and who may send to them. Babelfish has no Service Broker: no
/// queue can exist there.
const ACTIVATED_QUEUES: &str = "IF SERVERPROPERTY('Babelfish') IS NOT NULL
         SELECT CAST(NULL AS nvarchar(16)), CAST(NULL AS nvarchar(520)), CAST(NULL AS nvarchar(256)),
                CAST(NULL AS nvarchar(520)), CAST(NULL AS nvarchar(256)) WHERE 1 = 0
     ELSE
         SELECT CAST(N'queue' AS nvarchar(16)), CAST(SCHEMA_NAME(q.schema_id) + N'.' + q.name AS nvarchar(520)),
                CAST(USER_NAME(COALESCE(q.principal_id, sc.principal_id)) AS nvarchar(256)),
                CAST(PARSENAME(q.activation_procedure, 2) + N'.' + PARSENAME(q.activation_procedure, 1)
                     AS nvarchar(520)),
                CAST(CASE WHEN q.execute_as_principal_id = -2 THEN N'OWNER'
                          WHEN q.execute_as_principal_id IS NOT NULL THEN USER_NAME(q.execute_as_principal_id)
                     END AS nvarchar(256))
           FROM sys.service_queues AS q JOIN sys.schemas AS sc ON sc.schema_id = q.schema_id
          WHERE q.is_activation_enabled = 1 AND q.activation_procedure IS NOT NULL
         UNION ALL
         SELECT N'sender', CAST(SCHEMA_NAME(q.schema_id) + N'.' + q.name AS nvarchar(520)),
                CAST(USER_NAME(p.grantee_principal_id) AS nvarchar(256)), NULL, NULL
           FROM sys.service_queues AS q JOIN sys.services AS sv ON sv.service_queue_id = q.object_id
           JOIN sys.database_permissions AS p ON p.class = 17 AND p.major_id = sv.service_id
          WHERE q.is_activation_enabled = 1 AND p.state IN ('G', 'W') AND p.permission_name IN ('SEND', 'CONTROL')
         UNION ALL
         SELECT N'sender', CAST(SCHEMA_NAME(q.schema_id) + N'.' + q.name AS nvarchar(520)),
                CAST(USER_NAME(sv.principal_id) AS nvarchar(256)), NULL, NULL
           FROM sys.service_queues AS q JOIN sys.services AS sv ON sv.service_queue_id = q.object_id
          WHERE q.is_activation_enabled = 1";

/// The recorded and the current database identity as one row. The recorded
/// one is read by `sp_executesql` so that a database deployed before
/// fence.DatabaseIdentity existed still compiles the batch.
fn database_identity() -> String {
    use crate::identity::CURRENT_IDENTITY_SQL;
    format!(
        "IF OBJECT_ID(N'fence.DatabaseIdentity', N'U') IS NULL
                 SELECT CAST(NULL AS uniqueidentifier), ({CURRENT_IDENTITY_SQL})
             ELSE
                 EXEC sys.sp_executesql N'SELECT (SELECT RecoveryForkGuid FROM fence.DatabaseIdentity WHERE Singleton = 1),
                                                 ({CURRENT_IDENTITY_SQL})'"
    )
}

pub(super) fn queries() -> Vec<Query> {
    let q = |what, sql: &str, required| Query {
        what,
        sql: sql.to_string(),
        required,
    };
    vec![
        // No catalog view says whether an engine chains ownership; the engine
        // announcing itself is the only evidence there is. EngineEdition 5 is
        // Azure SQL Database.
        q(
            "the database and engine",
            "SELECT CAST(DB_NAME() AS nvarchar(256)),
                    CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL THEN 1 ELSE 0 END AS int),
                    CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NOT NULL THEN N'Babelfish for PostgreSQL'
                              WHEN SERVERPROPERTY('EngineEdition') = 5 THEN N'Azure SQL Database'
                              ELSE N'SQL Server' END AS nvarchar(64)),
                    CAST(CASE WHEN SERVERPROPERTY('Babelfish') IS NULL AND SERVERPROPERTY('EngineEdition') = 5
                              THEN 1 ELSE 0 END AS int)",
            true,
        ),
        q("the checking login's view of the catalog", VISIBILITY, false),
        q(
            "database options",
            "SELECT CAST(d.is_trustworthy_on AS int), CAST(d.is_db_chaining_on AS int)
               FROM sys.databases AS d WHERE d.database_id = DB_ID()",
            false,
        ),
        q(
            "database principals",
            // Babelfish answers owning_principal_id with -1 for every row.
            "SELECT CAST(dp.name AS nvarchar(256)), CAST(dp.type AS nvarchar(2)),
                    CAST(CASE WHEN dp.owning_principal_id > 0 THEN USER_NAME(dp.owning_principal_id) END
                         AS nvarchar(256)),
                    CAST(dp.default_schema_name AS nvarchar(256))
               FROM sys.database_principals AS dp",
            true,
        ),
        q(
            "the logins behind database users",
            "SELECT CAST(dp.name AS nvarchar(256)), CAST(sp.name AS nvarchar(256)), CAST(sp.type AS nvarchar(2))
               FROM sys.database_principals AS dp JOIN sys.server_principals AS sp ON sp.sid = dp.sid",
            false,
        ),
        q(
            "role memberships",
            "SELECT CAST(r.name AS nvarchar(256)), CAST(m.name AS nvarchar(256))
               FROM sys.database_role_members AS rm
               JOIN sys.database_principals AS r ON r.principal_id = rm.role_principal_id
               JOIN sys.database_principals AS m ON m.principal_id = rm.member_principal_id",
            true,
        ),
        q(
            "database permissions",
            "SELECT CAST(USER_NAME(p.grantee_principal_id) AS nvarchar(256)),
                    CAST(p.permission_name AS nvarchar(128)), CAST(p.state AS nvarchar(1)), CAST(p.class AS int),
                    CAST(CASE p.class WHEN 3 THEN SCHEMA_NAME(p.major_id)
                                      WHEN 1 THEN OBJECT_SCHEMA_NAME(p.major_id) END AS nvarchar(256)),
                    CAST(CASE p.class WHEN 1 THEN OBJECT_NAME(p.major_id)
                                      WHEN 4 THEN USER_NAME(p.major_id) END AS nvarchar(256)),
                    CAST(CASE WHEN p.class = 1 AND p.minor_id > 0
                              THEN COL_NAME(p.major_id, p.minor_id)
                         END AS nvarchar(256)),
                    CAST(p.class_desc AS nvarchar(60)), p.major_id
               FROM sys.database_permissions AS p
              WHERE p.state IN ('G', 'W', 'D')",
            true,
        ),
        q(
            "schemas",
            "SELECT CAST(s.name AS nvarchar(256)), CAST(USER_NAME(s.principal_id) AS nvarchar(256)) FROM sys.schemas AS s",
            true,
        ),
        // Objects and module texts are read apart and joined here by id:
        // on Babelfish each catalog view is costly per row, and joining the
        // two in SQL costs more than reading both. CLR modules (PC, FS, FT,
        // TA, AF) are listed with the T-SQL ones; their code is in no view.
        q(
            "objects",
            "SELECT o.object_id, CAST(SCHEMA_NAME(o.schema_id) AS nvarchar(256)), CAST(o.name AS nvarchar(256)),
                    CAST(o.type AS nvarchar(2)),
                    -- Babelfish answers USER_NAME(NULL) with the current user;
                    -- a NULL owner means the schema's.
                    CAST(CASE WHEN o.principal_id IS NOT NULL THEN USER_NAME(o.principal_id) END AS nvarchar(256)),
                    CAST(CASE WHEN o.parent_object_id <> 0
                              THEN OBJECT_SCHEMA_NAME(o.parent_object_id) + N'.' + OBJECT_NAME(o.parent_object_id)
                         END AS nvarchar(520))
               FROM sys.objects AS o
              WHERE o.is_ms_shipped = 0
                AND o.type IN ('U', 'P', 'V', 'FN', 'IF', 'TF', 'TR', 'PC', 'FS', 'FT', 'TA', 'AF')",
            true,
        ),
        // Database DDL triggers belong to no schema and are not in
        // sys.objects; their texts are in sys.sql_modules, read next.
        q(
            "database DDL triggers",
            "SELECT t.object_id, CAST(t.name AS nvarchar(256)) FROM sys.triggers AS t WHERE t.parent_class = 0",
            false,
        ),
        // Hashing is limited to the code schemas: only shipped procedures
        // are compared with the deploy journal.
        Query {
            what: "module definitions",
            sql: format!(
                "SELECT m.object_id, CAST(m.definition AS nvarchar(max)),
                        -- NULL is EXECUTE AS CALLER (and USER_NAME(NULL) the current user on Babelfish).
                        CAST(CASE WHEN m.execute_as_principal_id IS NULL THEN NULL
                                  WHEN m.execute_as_principal_id = -2 THEN N'OWNER'
                                  ELSE USER_NAME(m.execute_as_principal_id) END AS nvarchar(256)),
                        CASE WHEN OBJECT_SCHEMA_NAME(m.object_id) IN (N'fence_api', N'fence_admin') THEN {} END
                   FROM sys.sql_modules AS m",
                definition_hash_sql("m.definition")
            ),
            required: true,
        },
        // Only names the assembly of CLR modules sys.objects already listed:
        // without any, the two views are not worth a fresh session's planning.
        q(
            "CLR modules",
            "IF EXISTS (SELECT 1 FROM sys.objects AS o WHERE o.type IN ('PC', 'FS', 'FT', 'TA', 'AF'))
                 SELECT am.object_id, CAST(a.name + N' (' + a.permission_set_desc + N')' AS nvarchar(300))
                   FROM sys.assembly_modules AS am JOIN sys.assemblies AS a ON a.assembly_id = am.assembly_id
             ELSE
                 SELECT CAST(NULL AS int), CAST(NULL AS nvarchar(300)) WHERE 1 = 0",
            false,
        ),
        q("module signatures", SIGNATURES, false),
        q(
            "synonyms",
            "SELECT CAST(SCHEMA_NAME(s.schema_id) AS nvarchar(256)), CAST(s.name AS nvarchar(256)),
                    CAST(CASE WHEN s.principal_id IS NOT NULL THEN USER_NAME(s.principal_id) END AS nvarchar(256)),
                    CAST(s.base_object_name AS nvarchar(1035))
               FROM sys.synonyms AS s",
            false,
        ),
        // References to the fence tables and to the shipped procedures.
        q(
            "references to the fence schemas",
            "SELECT CAST(OBJECT_SCHEMA_NAME(d.referencing_id) + N'.' + OBJECT_NAME(d.referencing_id) AS nvarchar(520)),
                    CAST(COALESCE(d.referenced_schema_name, OBJECT_SCHEMA_NAME(d.referenced_id)) + N'.'
                         + d.referenced_entity_name AS nvarchar(520))
               FROM sys.sql_expression_dependencies AS d
              WHERE d.referenced_schema_name IN (N'fence', N'fence_api', N'fence_admin')
                 OR OBJECT_SCHEMA_NAME(d.referenced_id) IN (N'fence', N'fence_api', N'fence_admin')",
            false,
        ),
        // A marker row tells "no journal table" from "an empty journal".
        q(
            "the deploy journal",
            "IF OBJECT_ID(N'fence.DeployedProcedure', N'U') IS NULL
                 SELECT CAST(0 AS int), CAST(NULL AS nvarchar(256)), CAST(NULL AS varbinary(32))
             ELSE
                 SELECT CAST(1 AS int), CAST(ProcedureName AS nvarchar(256)), CAST(DefinitionHash AS varbinary(32))
                   FROM fence.DeployedProcedure",
            false,
        ),
        // Without VIEW ANY DEFINITION a login sees only its own server roles,
        // so an empty answer would prove nothing; the first row says which.
        // An engine without sys.server_permissions (Babelfish) gets a marker
        // row instead of those grants: naming the view would fail the batch.
        Query {
            what: "server roles and permissions",
            sql: format!(
                "IF OBJECT_ID(N'sys.server_permissions') IS NULL
                     {SERVER_ROLES}
                     UNION ALL
                     SELECT N'no permission catalog', CAST(NULL AS nvarchar(256)), CAST(NULL AS nvarchar(256)),
                            CAST(NULL AS nvarchar(256))
                 ELSE
                     {SERVER_ROLES}
                     UNION ALL
                     {SERVER_PERMISSIONS}"
            ),
            required: false,
        },
        // No row leaves it unknown. An engine that does not chain ownership
        // (Babelfish, which lists no such option) is not asked.
        q(
            "server configuration",
            "IF SERVERPROPERTY('Babelfish') IS NULL
                 SELECT CAST(c.value_in_use AS int) FROM sys.configurations AS c
                  WHERE c.name = N'cross db ownership chaining'
             ELSE
                 SELECT CAST(NULL AS int) WHERE 1 = 0",
            false,
        ),
        q("other TRUSTWORTHY databases", TRUSTWORTHY, false),
        // Babelfish's PostgreSQL catalog, readable over TDS: which fence
        // procedures run as their owner. Inside EXEC so that SQL Server,
        // which has none of these objects, never compiles it.
        q(
            "Babelfish SECURITY DEFINER procedures",
            "IF SERVERPROPERTY('Babelfish') IS NULL
                 SELECT CAST(NULL AS nvarchar(257)) WHERE 1 = 0
             ELSE
                 EXEC (N'SELECT CAST(e.orig_name AS nvarchar(128)) + N''.'' + CAST(p.proname AS nvarchar(128))
                  FROM sys.babelfish_namespace_ext AS e
                  JOIN sys.babelfish_sysdatabases AS d ON d.dbid = e.dbid
                  JOIN pg_catalog.pg_namespace AS n ON n.nspname = e.nspname
                  JOIN pg_catalog.pg_proc AS p ON p.pronamespace = n.oid
                  WHERE d.name = DB_NAME() AND e.orig_name IN (N''fence_api'', N''fence_admin'')
                    AND CAST(p.prosecdef AS int) = 1')",
            false,
        ),
        q("the database identity", &database_identity(), false),
        // `Acquire;2` shares Acquire's grants and ownership chain, and its
        // text is in no other view.
        q("numbered procedures", NUMBERED, false),
        q("server triggers", SERVER_TRIGGERS, false),
        q("what acts on the fence tables' rows", FENCE_TABLE_FEATURES, false),
        // Names of the keys permissions are on, by class and id: Babelfish's
        // sys.certificates has no certificate_id, so they are read apart.
        q(
            "certificates and asymmetric keys",
            "IF SERVERPROPERTY('Babelfish') IS NULL
                 SELECT 25, c.certificate_id, CAST(c.name AS nvarchar(256)) FROM sys.certificates AS c
                 UNION ALL
                 SELECT 26, k.asymmetric_key_id, CAST(k.name AS nvarchar(256)) FROM sys.asymmetric_keys AS k
             ELSE
                 SELECT CAST(NULL AS int), CAST(NULL AS int), CAST(NULL AS nvarchar(256)) WHERE 1 = 0",
            false,
        ),
        q("Agent job steps", JOB_STEPS, false),
        q("linked servers", LINKED_SERVERS, false),
        q("activated queues", ACTIVATED_QUEUES, false),
    ]
}
