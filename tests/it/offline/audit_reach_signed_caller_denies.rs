//! A DENY made to the caller of a signed module. "Module Signing": a
//! signed module runs with the rights of its key's user (or login) added to
//! its caller's, so the caller's own principals stay in the security
//! context; "Permissions Hierarchy (Database Engine)", the permission check
//! algorithm: a permission denied to any principal of the context is
//! refused, and only a member of sysadmin passes over the check. The
//! module's fixed text revokes no DENY, so CONTROL the signature brings
//! does not lift one either. EXECUTE AS, which replaces the caller's
//! context, is left untouched by it. Each layout with a control.

use crate::support;

use super::audit_reach_leaving_roles::deny;
use super::audit_reach_lending_modules::{LOAD, WRITE, named_for, no_login, reached, signed_by_writer};
use fencepost::audit::{Catalog, Membership, ServerPermission};
use support::fixtures::*;

/// `etl` may run ops.Load, owned by ops_owner (no chain to the fence),
/// which updates fence.Resource and is signed with CERTIFICATE::Writer,
/// whose user cert_writer is in db_datawriter.
fn signed_by_a_writer() -> Catalog {
    signed_by_writer(LOAD, true)
}

#[test]
fn a_deny_to_the_caller_refuses_the_write_a_signature_lends() {
    let mut c = signed_by_a_writer();
    c.permissions.push(deny("etl", "UPDATE", object("fence", "Resource")));
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn a_deny_to_a_role_the_caller_is_in_refuses_it_too() {
    let mut c = signed_by_a_writer();
    c.principals.push(role("loaders"));
    c.memberships.push(member("loaders", "etl"));
    c.permissions.push(deny("loaders", "UPDATE", schema("fence")));
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
}

#[test]
fn control_a_deny_to_another_user_leaves_the_callers_write() {
    let mut c = signed_by_a_writer();
    c.principals.push(no_login("someone_else"));
    c.permissions
        .push(deny("someone_else", "UPDATE", object("fence", "Resource")));
    reached(
        &c,
        "etl",
        WRITE,
        &["EXECUTE on ops.Load", "signed by CERTIFICATE::Writer"],
    );
}

#[test]
fn control_a_deny_of_another_verb_leaves_the_callers_write() {
    let mut c = signed_by_a_writer();
    c.permissions.push(deny("etl", "DELETE", object("fence", "Resource")));
    reached(
        &c,
        "etl",
        WRITE,
        &["EXECUTE on ops.Load", "signed by CERTIFICATE::Writer"],
    );
}

/// The same module WITH EXECUTE AS 'cert_writer' instead of signed: the
/// caller's DENY is not in the context its statements run in.
#[test]
fn control_execute_as_replaces_the_callers_context_and_its_deny() {
    let mut c = signed_by_a_writer();
    let fix = c.objects.iter_mut().find(|o| o.name == "Load").unwrap();
    fix.signed_by.clear();
    fix.execute_as = Some("cert_writer".into());
    c.permissions.push(deny("etl", "UPDATE", object("fence", "Resource")));
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Load", "EXECUTE AS 'cert_writer'"]);
}

/// A signature whose user holds CONTROL on the fence schema: its fixed
/// text revokes no DENY, so the caller's still binds.
#[test]
fn control_held_by_a_signature_does_not_lift_a_deny_to_the_caller() {
    let mut c = signed_by_a_writer();
    c.memberships.retain(|m| m.member != "cert_writer");
    c.permissions.push(grant("cert_writer", "CONTROL", schema("fence")));
    c.permissions.push(deny("etl", "UPDATE", object("fence", "Resource")));
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
    c.permissions.pop();
    reached(
        &c,
        "etl",
        WRITE,
        &["EXECUTE on ops.Load", "signed by CERTIFICATE::Writer"],
    );
}

/// A signing login holding CONTROL SERVER through a server role: the DENY
/// to the caller binds; in sysadmin, it does not.
#[test]
fn a_control_server_signature_keeps_the_callers_deny_and_sysadmins_does_not() {
    let mut c = signed_by_a_writer();
    c.memberships.retain(|m| m.member != "cert_writer");
    let key = &mut c.signing_keys.as_mut().unwrap()[0];
    key.user = None;
    key.login = Some("ops_signer".into());
    c.permissions.push(deny("etl", "UPDATE", object("fence", "Resource")));
    let server = server_facts(&mut c);
    server.role_members.push(Membership {
        role: "operators".into(),
        member: "ops_signer".into(),
    });
    server.permissions.push(ServerPermission {
        grantee: "operators".into(),
        permission: "CONTROL SERVER".into(),
        on_login: None,
    });
    assert!(!named_for(&c, "etl", WRITE), "{:#?}", check(&c));
    server_facts(&mut c).role_members.push(Membership {
        role: "sysadmin".into(),
        member: "ops_signer".into(),
    });
    reached(&c, "etl", WRITE, &["EXECUTE on ops.Load", "ops_signer is in sysadmin"]);
}
