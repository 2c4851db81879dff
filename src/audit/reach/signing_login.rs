//! A signing key mapped to a login ("Module Signing", "ADD SIGNATURE"): a
//! module signed with a certificate or asymmetric key that has a login of
//! the same thumbprint runs with that login's server-level rights added to
//! its caller's. A login in sysadmin, or holding CONTROL SERVER (itself or
//! through a server role), passes every permission check in every
//! database, as dbo does here ("Server-Level Roles", "GRANT Server
//! Permissions"): such a module lends its caller what its text does with
//! dbo's rights, unless the login is denied CONTROL SERVER (a member of
//! sysadmin never is). Other server rights reach no fence table.

use std::collections::BTreeSet;

use super::super::catalog::{ServerFacts, SigningKey};
use super::super::rules::Context;
use super::server_denies::denied_to_code;

/// Why the login `k` is mapped to passes every check here, when it does:
/// `its login L is in sysadmin`, and whether by sysadmin, which a DENY made
/// to the module's caller does not bind either (CONTROL SERVER is a
/// permission, and the caller's DENYs stay in the context beside it).
pub(super) fn all_powerful(ctx: &Context, k: &SigningKey) -> Option<(String, bool)> {
    let login = k.login.as_deref()?;
    let server = ctx.catalog.server.as_ref()?;
    let holders = with_roles(server, login);
    if holders.contains("sysadmin") {
        return Some((format!("its login {login} is in sysadmin"), true));
    }
    // "DENY Server Permissions": a DENY binds the login past a grant to it
    // or to one of its roles.
    if denied_to_code(server, login, "SERVER", "CONTROL SERVER", None) {
        return None;
    }
    server
        .permissions
        .iter()
        .filter(|p| p.on_login.is_none() && p.permission.eq_ignore_ascii_case("CONTROL SERVER"))
        .find(|p| holders.contains(&p.grantee.to_lowercase()))
        .map(|p| {
            let why = if p.grantee.eq_ignore_ascii_case(login) {
                format!("its login {login} holds CONTROL SERVER")
            } else {
                format!("its login {login} holds CONTROL SERVER through {}", p.grantee)
            };
            (why, false)
        })
}

/// `login` and every server role it is in, lower-cased.
fn with_roles(server: &ServerFacts, login: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::from([login.to_lowercase()]);
    loop {
        let more: Vec<String> = server
            .role_members
            .iter()
            .filter(|m| out.contains(&m.member.to_lowercase()) && !out.contains(&m.role.to_lowercase()))
            .map(|m| m.role.to_lowercase())
            .collect();
        if more.is_empty() {
            return out;
        }
        out.extend(more);
    }
}
