//! SQL a module runs from text ("EXECUTE (Transact-SQL)": `EXEC
//! ('string')`, sp_executesql) runs in the module's context, checked
//! there, never let through by an ownership chain. Any such text may do
//! whatever the context may, even one of string literals alone (it may run
//! a procedure, another text, or one its caller hands it): a module WITH
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
fn a_text_of_string_literals_alone_lends_what_the_context_may_do() {
    reached(
        &lending("EXEC (N'EXEC (N''SELECT 1;'')');", "SELECT 1;"),
        "etl",
        WRITE,
        &[
            "EXECUTE on ops.Fix",
            "runs SQL from text (EXEC (string))",
            "which maint may make",
        ],
    );
}

#[test]
fn text_built_at_run_time_lends_what_the_context_may_do() {
    reached(
        &lending("EXEC (@sql);", "SELECT 1;"),
        "etl",
        WRITE,
        &["EXECUTE on ops.Fix", "runs SQL from text (EXEC (string))"],
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
fn control_a_callee_that_runs_no_text_lends_nothing() {
    let c = lending("EXEC ops.Purge @sql;", "SELECT @sql;");
    assert!(naming(&c, "etl").is_empty(), "{:#?}", naming(&c, "etl"));
}
