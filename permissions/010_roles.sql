-- The three fence roles. Re-applied on every deploy, so each statement is
-- written to be a no-op when its effect is already in place.
IF DATABASE_PRINCIPAL_ID(N'fence_service') IS NULL
    CREATE ROLE fence_service;

IF DATABASE_PRINCIPAL_ID(N'fence_reader') IS NULL
    CREATE ROLE fence_reader;

IF DATABASE_PRINCIPAL_ID(N'fence_operator') IS NULL
    CREATE ROLE fence_operator;
