//! A module signed with a key mapped to a login ("Module Signing", "ADD
//! SIGNATURE"): it runs with that login's server rights added to its
//! caller's. A login in sysadmin, or holding CONTROL SERVER, passes every
//! check in the database, so the module lends its caller what its text
//! does; a login holding a narrower server right lends no write. Each
//! layout with a control of the same shape.

use crate::support;

use super::audit_reach_lending_modules::{WRITE, named_for, no_login, reached, with_etl};
use fencepost::audit::{Catalog, Membership, ObjectKind, Schema, ServerPermission, SigningKey};
use support::fixtures::*;

/// `etl` may run ops.Fix, signed by CERTIFICATE::Ops, which has no user
/// here and the login ops_signer; ops.Fix updates fence.Resource.
fn signed_by_a_login_key() -> Catalog {
    let mut c = with_etl();
    c.principals.push(no_login("ops_owner"));
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "ops_owner".into(),
    });
    c.signing_keys = Some(vec![SigningKey {
        key: "CERTIFICATE".into(),
        name: "Ops".into(),
        owner: Some("dbo".into()),
        user: None,
        login: Some("ops_signer".into()),
        private_key: Some(true),
    }]);
    let mut m = module(
        "ops",
        "Fix",
        ObjectKind::Procedure,
        "CREATE PROCEDURE ops.Fix AS UPDATE fence.Resource SET Generation = Generation + 1;",
    );
    m.signed_by = vec!["CERTIFICATE::Ops".into()];
    c.objects.push(m);
    c.permissions.push(grant("etl", "EXECUTE", object("ops", "Fix")));
    c
}

fn server_grant_to(c: &mut Catalog, grantee: &str, permission: &str) {
    server_facts(c).permissions.push(ServerPermission {
        grantee: grantee.into(),
        permission: permission.into(),
        on_login: None,
    });
}

#[test]
fn a_module_signed_by_a_key_whose_login_is_in_sysadmin_lends_its_write() {
    let mut c = signed_by_a_login_key();
    server_facts(&mut c).role_members.push(Membership {
        role: "sysadmin".into(),
        member: "ops_signer".into(),
    });
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Fix", "ops_signer is in sysadmin"]);
}

#[test]
fn a_module_signed_by_a_key_whose_login_holds_control_server_through_a_role_lends_its_write() {
    let mut c = signed_by_a_login_key();
    server_facts(&mut c).role_members.push(Membership {
        role: "operators".into(),
        member: "ops_signer".into(),
    });
    server_grant_to(&mut c, "operators", "CONTROL SERVER");
    reached(&c, "etl", WRITE, &["holds CONTROL SERVER through operators"]);
}

#[test]
fn control_a_key_whose_login_holds_a_narrower_server_right_lends_nothing() {
    let mut c = signed_by_a_login_key();
    server_grant_to(&mut c, "ops_signer", "VIEW SERVER STATE");
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}
