-- The four fence roles. Re-applied on every deploy, so each statement is
-- written to be a no-op when its effect is already in place.
--
-- Owned by dbo, not by whoever deploys: "If no user is specified, the role
-- will be owned by the user that executes CREATE ROLE. The owner of the role,
-- or any member of an owning role can add or remove members of the role"
-- (CREATE ROLE). A deploy user that is a db_owner member but not dbo would
-- otherwise own the roles and could add members outside any review of the
-- grants. Babelfish refuses CREATE ROLE ... AUTHORIZATION (a syntax error) and
-- shows no role owner, so there the roles are created plainly.
IF DATABASE_PRINCIPAL_ID(N'fence_service') IS NULL AND SERVERPROPERTY(N'Babelfish') IS NULL
    EXEC (N'CREATE ROLE fence_service AUTHORIZATION dbo;');
IF DATABASE_PRINCIPAL_ID(N'fence_service') IS NULL
    CREATE ROLE fence_service;

IF DATABASE_PRINCIPAL_ID(N'fence_reader') IS NULL AND SERVERPROPERTY(N'Babelfish') IS NULL
    EXEC (N'CREATE ROLE fence_reader AUTHORIZATION dbo;');
IF DATABASE_PRINCIPAL_ID(N'fence_reader') IS NULL
    CREATE ROLE fence_reader;

IF DATABASE_PRINCIPAL_ID(N'fence_operator') IS NULL AND SERVERPROPERTY(N'Babelfish') IS NULL
    EXEC (N'CREATE ROLE fence_operator AUTHORIZATION dbo;');
IF DATABASE_PRINCIPAL_ID(N'fence_operator') IS NULL
    CREATE ROLE fence_operator;

-- Recovery after a restore and pruning of the history void every lease or
-- erase the audit trail: a role of their own, apart from the day-to-day
-- operator's force-release.
IF DATABASE_PRINCIPAL_ID(N'fence_recovery') IS NULL AND SERVERPROPERTY(N'Babelfish') IS NULL
    EXEC (N'CREATE ROLE fence_recovery AUTHORIZATION dbo;');
IF DATABASE_PRINCIPAL_ID(N'fence_recovery') IS NULL
    CREATE ROLE fence_recovery;

-- Roles an earlier deploy created under the deploying user pass to dbo.
IF SERVERPROPERTY(N'Babelfish') IS NULL
    EXEC (N'
    IF EXISTS (SELECT 1 FROM sys.database_principals
                WHERE name = N''fence_service'' AND owning_principal_id <> USER_ID(N''dbo''))
        ALTER AUTHORIZATION ON ROLE::fence_service TO dbo;
    IF EXISTS (SELECT 1 FROM sys.database_principals
                WHERE name = N''fence_reader'' AND owning_principal_id <> USER_ID(N''dbo''))
        ALTER AUTHORIZATION ON ROLE::fence_reader TO dbo;
    IF EXISTS (SELECT 1 FROM sys.database_principals
                WHERE name = N''fence_operator'' AND owning_principal_id <> USER_ID(N''dbo''))
        ALTER AUTHORIZATION ON ROLE::fence_operator TO dbo;
    IF EXISTS (SELECT 1 FROM sys.database_principals
                WHERE name = N''fence_recovery'' AND owning_principal_id <> USER_ID(N''dbo''))
        ALTER AUTHORIZATION ON ROLE::fence_recovery TO dbo;');
