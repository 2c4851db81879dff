//! A signed module run through an ownership chain. "Ownership Chains":
//! when a procedure runs another of the same owner, EXECUTE on the second
//! is not evaluated; "Module Signing": the signed module then runs with its
//! key's rights added to the context of whoever ran the first. So EXECUTE
//! on the first lends the signed module's write, to any depth of such
//! calls. Each layout with a control.

use crate::support;

use super::audit_reach_lending_modules::{LOAD, WRITE, named_for, no_login, reached, signed_by_writer};
use fencepost::audit::{Catalog, ObjectKind, Schema};
use support::fixtures::*;

/// ops.Load (ops_owner's, signed by a writer certificate) is run by
/// `schema`.Run, which runs as its caller; etl may run only the first of
/// `schema`.Run's callers named in `callers`.
fn run_through(schema: &str, callers: &[&str]) -> Catalog {
    let mut c = signed_by_writer(LOAD, true);
    c.permissions
        .retain(|p| !(p.grantee == "etl" && p.on == object("ops", "Load")));
    if schema != "ops" {
        c.principals.push(no_login("other_owner"));
        c.schemas.push(Schema {
            name: schema.into(),
            owner: "other_owner".into(),
        });
    }
    let mut callee = "ops.Load".to_string();
    for name in callers.iter().rev() {
        c.objects.push(module(
            schema,
            name,
            ObjectKind::Procedure,
            &format!("CREATE PROCEDURE {schema}.{name} AS EXEC {callee};"),
        ));
        callee = format!("{schema}.{name}");
    }
    c.permissions.push(grant("etl", "EXECUTE", object(schema, callers[0])));
    c
}

#[test]
fn execute_on_a_procedure_chaining_to_a_signed_module_lends_its_write() {
    let c = run_through("ops", &["Run"]);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Run", "ops.Run runs ops.Load"]);
}

#[test]
fn the_chain_is_followed_through_several_procedures() {
    let c = run_through("ops", &["Outer", "Middle", "Run"]);
    reached(
        &c,
        "etl",
        WRITE,
        &["ops.Outer runs ops.Middle runs ops.Run runs ops.Load"],
    );
}

/// Control: a caller of another owner breaks the chain, and EXECUTE on
/// ops.Load is checked, which etl does not hold.
#[test]
fn control_a_caller_of_another_owner_lends_nothing() {
    let c = run_through("other", &["Run"]);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// Control: an engine that does not chain ownership checks EXECUTE on
/// ops.Load too.
#[test]
fn control_without_ownership_chaining_it_lends_nothing() {
    let mut c = run_through("ops", &["Run"]);
    c.engine.chains_ownership = false;
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}
