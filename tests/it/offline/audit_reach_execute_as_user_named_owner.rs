//! A user named like a keyword of EXECUTE AS. "EXECUTE AS Clause": WITH
//! EXECUTE AS 'Owner' names the user Owner, as any quoted name does, and
//! `sys.sql_modules.execute_as_principal_id` holds that user's id; only
//! EXECUTE AS OWNER is -2. The catalog keeps the two apart, so a module
//! running as a user called Owner lends that user's write, not its owner's.
//!
//! Each layout has a control of the same shape that stays clean.

use crate::support;

use super::audit_reach_lending_modules::{WRITE, named_for, no_login, reached, with_etl};
use fencepost::audit::{Catalog, ObjectKind, Schema};
use support::fixtures::*;

/// `etl` may run ops.Fix (owned by ops_owner, who may write nothing), which
/// updates fence.Resource WITH EXECUTE AS 'Owner' when `user`, or EXECUTE
/// AS OWNER otherwise, as the catalog reader records each; the user Owner
/// is in db_datawriter.
fn fix(user: bool) -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("Owner"));
    c.principals.push(no_login("ops_owner"));
    c.memberships.push(member("db_datawriter", "Owner"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    let clause = if user { "'Owner'" } else { "OWNER" };
    let mut m = module(
        "ops",
        "Fix",
        ObjectKind::Procedure,
        &format!(
            "CREATE PROCEDURE ops.Fix @Id bigint WITH EXECUTE AS {clause} AS \
             UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceId = @Id;"
        ),
    );
    m.execute_as = Some(if user { "Owner" } else { "OWNER" }.into());
    m.execute_as_user = user;
    c.objects.push(m);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c
}

#[test]
fn a_module_with_execute_as_a_user_named_owner_lends_that_users_write() {
    let c = fix(true);
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix", "Owner"]);
}

/// EXECUTE AS OWNER runs as ops_owner, who may not write the fence.
#[test]
fn control_a_module_with_execute_as_owner_whose_owner_may_not_write_lends_nothing() {
    let c = fix(false);
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

/// A catalog saved before the reader marked users keeps reading `OWNER`
/// as the keyword.
#[test]
fn a_saved_catalog_without_the_mark_reads_owner_as_the_keyword() {
    let mut c = fix(false);
    c.permissions
        .push(grant("ops_owner", "UPDATE", object("fence", "Resource")));
    let json = serde_json::to_string(&c).unwrap();
    assert!(!json.contains("execute_as_user"), "{json}");
    let back: Catalog = serde_json::from_str(&json).unwrap();
    reached(&back, "etl", WRITE, &["EXECUTE on ops.Fix", "ops_owner"]);
}
