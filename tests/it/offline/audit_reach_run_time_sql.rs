//! SQL a module runs from text ("EXECUTE (Transact-SQL)": `EXEC
//! ('string')`, sp_executesql) runs in the module's context, checked
//! there, never let through by an ownership chain. Text of string literals
//! alone is what runs: its statements are weighed as the module's own, so a
//! constant `EXEC (N'SELECT 1;')` lends nothing. Text built at run time (a
//! variable, a parameter) may be whatever the caller hands: a module WITH
//! EXECUTE AS that runs it, or a callee that runs it in such a module's
//! context, lends every write the context may make.

use crate::support;

use super::audit_reach_lending_modules::{WRITE, naming, no_login, reached, with_etl};
use fencepost::audit::{Catalog, ObjectKind, Schema};
use support::fixtures::*;

/// `etl` may run ops.Fix (ops_owner's), WITH EXECUTE AS maint (in
/// db_datawriter), whose statements are `statements`; ops.Purge, ops_owner's
/// too, without EXECUTE AS, runs `purge`.
fn lending(statements: &str, purge: &str) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("maint"));
    c.principals.push(no_login("ops_owner"));
    c.memberships.push(member("db_datawriter", "maint"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    let mut m = module(
        "ops",
        "Fix",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.Fix @sql nvarchar(max) WITH EXECUTE AS 'maint' AS {statements}"),
    );
    m.execute_as = Some("maint".into());
    c.objects.push(m);
    c.objects.push(module(
        "ops",
        "Purge",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE ops.Purge @sql nvarchar(max) AS {purge}"),
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c
}

#[test]
fn a_constant_text_that_only_reads_lends_nothing() {
    let c = lending("EXEC (N'SELECT 1;'); EXEC sys.sp_executesql N'SELECT 2';", "SELECT 1;");
    assert!(naming(&c, "etl").is_empty(), "{:#?}", naming(&c, "etl"));
}

#[test]
fn a_constant_text_that_deletes_from_the_fence_lends_the_delete() {
    reached(
        &lending("EXEC (N'DELETE FROM ' + N'fence.Resource;');", "SELECT 1;"),
        "etl",
        WRITE,
        &[
            "EXECUTE on ops.Fix",
            "makes DELETE on fence.Resource, which maint may make",
        ],
    );
}

#[test]
fn text_built_at_run_time_lends_what_the_context_may_do() {
    reached(
        &lending("EXEC (@sql);", "SELECT 1;"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "builds SQL at run time (EXEC (string))"],
    );
}

#[test]
fn a_callee_running_text_built_at_run_time_lends_what_the_lenders_context_may_do() {
    reached(
        &lending("EXEC ops.Purge @sql;", "EXEC sys.sp_executesql @sql;"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "runs ops.Purge", "which maint may make"],
    );
}

#[test]
fn control_a_callee_running_a_constant_text_that_only_reads_lends_nothing() {
    let c = lending("EXEC ops.Purge @sql;", "EXEC (N'SELECT 1;');");
    assert!(naming(&c, "etl").is_empty(), "{:#?}", naming(&c, "etl"));
}
