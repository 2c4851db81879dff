//! `fencepost script --target babelfish-postgres`: the PostgreSQL-side script
//! that lets a service holding only `fence_service` run the fence on Babelfish.
//!
//! SQL Server lets a procedure write a table of the same owner for a caller
//! holding EXECUTE alone (ownership chaining). Babelfish checks the caller's
//! own rights on every table instead, so the only way to keep services off
//! the tables is to make each fence procedure run as its owner: PostgreSQL's
//! SECURITY DEFINER, which nothing on the T-SQL side can set. The script finds
//! the procedures through Babelfish's catalog (which maps a T-SQL database and
//! schema to a PostgreSQL schema, `<db>_<schema>` in multi-db mode) and pins
//! each one's `search_path`, as PostgreSQL asks of SECURITY DEFINER routines,
//! so a caller's session cannot put its own objects in their way.

use std::fmt::Write;

/// The T-SQL schemas whose procedures services and operators execute.
const FENCE_PROCEDURE_SCHEMAS: &str = "'fence_api', 'fence_admin'";

/// Renders the script for the T-SQL database `database`. It is idempotent:
/// a procedure already SECURITY DEFINER with the fixed `search_path` is left
/// alone, and a second run reports that nothing changed.
pub fn render(database: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        r#"-- fencepost {version}: PostgreSQL-side script for the Babelfish T-SQL database {database_literal}.
-- Babelfish does not chain ownership, so a service holding only fence_service could not run the
-- fence procedures. This makes every procedure in the database's fence_api and fence_admin schemas
-- SECURITY DEFINER (it runs as its owner, the owner of the fence tables) with a fixed search_path.
-- Callers still need EXECUTE: fence_service is still refused the tables and fence_admin.
-- Run it after every `fencepost migrate` (a T-SQL ALTER PROCEDURE resets SECURITY DEFINER), as a
-- PostgreSQL superuser or the owner of the Babelfish database, e.g.:
--   psql "postgresql://admin@host:5432/babelfish_db" -v ON_ERROR_STOP=1 -f this-file
-- Idempotent: a second run changes nothing. It changes nothing either when it refuses.
\set ON_ERROR_STOP on
SET fencepost.tsql_database = {database_literal};
DO $fencepost$
DECLARE
    tsql_database constant text := current_setting('fencepost.tsql_database');
    database_id smallint;
    dbo_schema name;
    fence_schema name;
    tables_owner oid;
    fixed_path text;
    procedure record;
    altered int := 0;
    already int := 0;
BEGIN
    SELECT dbid INTO database_id FROM sys.babelfish_sysdatabases
        WHERE lower(name::text) = lower(tsql_database);
    IF database_id IS NULL THEN
        RAISE EXCEPTION 'Babelfish has no T-SQL database named %', tsql_database;
    END IF;
    SELECT nspname INTO dbo_schema FROM sys.babelfish_namespace_ext
        WHERE dbid = database_id AND lower(orig_name::text) = 'dbo';
    SELECT nspname INTO fence_schema FROM sys.babelfish_namespace_ext
        WHERE dbid = database_id AND lower(orig_name::text) = 'fence';
    SELECT c.relowner INTO tables_owner FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = fence_schema AND c.relname = 'resource';
    IF dbo_schema IS NULL OR tables_owner IS NULL THEN
        RAISE EXCEPTION 'T-SQL database % has no fence tables: run fencepost migrate first', tsql_database;
    END IF;
    -- What Babelfish itself sets for the database, less "$user"; pg_temp last
    -- so a caller's temporary objects never shadow the procedure's.
    fixed_path := format('%I, sys, pg_catalog, pg_temp', dbo_schema);
    FOR procedure IN
        SELECT p.oid, p.oid::regprocedure AS signature, p.prosecdef, p.proowner,
               coalesce(p.proconfig, '{{}}') AS config
        FROM pg_proc p
        JOIN pg_namespace n ON n.oid = p.pronamespace
        JOIN sys.babelfish_namespace_ext s ON s.nspname = n.nspname
        WHERE s.dbid = database_id AND lower(s.orig_name::text) IN ({schemas}) AND p.prokind = 'p'
        ORDER BY p.oid::regprocedure::text
    LOOP
        -- Running as some other role would give the procedure that role's rights.
        IF procedure.proowner <> tables_owner THEN
            RAISE EXCEPTION '% is owned by %, not by the fence tables'' owner %: re-own it first',
                procedure.signature, pg_get_userbyid(procedure.proowner), pg_get_userbyid(tables_owner);
        END IF;
        -- A SECURITY DEFINER procedure anyone may execute is the fence opened to anyone.
        IF has_function_privilege('public', procedure.oid, 'EXECUTE') THEN
            RAISE EXCEPTION 'every role may execute %: revoke EXECUTE from public first', procedure.signature;
        END IF;
        IF procedure.prosecdef AND procedure.config = ARRAY['search_path=' || fixed_path] THEN
            already := already + 1;
        ELSE
            EXECUTE format('ALTER PROCEDURE %s SECURITY DEFINER SET search_path = %s',
                procedure.signature, fixed_path);
            altered := altered + 1;
        END IF;
    END LOOP;
    IF altered + already = 0 THEN
        RAISE EXCEPTION 'T-SQL database % has no fence procedures: run fencepost migrate first', tsql_database;
    END IF;
    RAISE NOTICE 'fencepost: % procedure(s) made SECURITY DEFINER, % already were', altered, already;
END
$fencepost$;
"#,
        version = env!("CARGO_PKG_VERSION"),
        database_literal = literal(database),
        schemas = FENCE_PROCEDURE_SCHEMAS,
    );
    out
}

/// A PostgreSQL string literal (standard_conforming_strings, on by default
/// since 9.1: a backslash is an ordinary character).
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_name_reaches_the_script_as_one_quoted_literal() {
        let script = render("o'brien; DROP");
        assert!(script.contains("SET fencepost.tsql_database = 'o''brien; DROP';"));
        assert!(!script.contains("$fencepost$ o'brien"));
    }

    #[test]
    fn every_procedure_gets_security_definer_and_a_search_path_with_pg_temp_last() {
        let script = render("app");
        assert!(script.contains("SECURITY DEFINER SET search_path = %s"));
        assert!(script.contains("'%I, sys, pg_catalog, pg_temp'"));
        assert!(script.contains("IN ('fence_api', 'fence_admin')"));
    }
}
