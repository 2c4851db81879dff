//! Server-level DENYs, as "DENY Server Permissions" and "DENY Server
//! Principal Permissions" document them: a DENY binds the login or server
//! role it names and every member of a denied role (`public` binds every
//! login), never a member of sysadmin, and never one of securityadmin,
//! which "can GRANT, DENY, and REVOKE server-level permissions" and so
//! revokes it ("Server-level roles"); a denied permission denies what it
//! covers (DENY CONTROL SERVER denies every server permission), and a
//! DENY on one login or server role only that securable.
//!
//! A DENY cuts only the grant of the principal it binds: a grant made to a
//! server role stays an edge of that role even where one member is denied,
//! so a member-level DENY may leave a finding the server would refuse (a
//! false finding, never a missed one).

use super::super::catalog::ServerFacts;
use super::super::hierarchy::implies;
use super::super::rules::{is_server_role, server_holders};

/// Whether a DENY refuses `holder` (a login or server role) `wanted` of
/// class `class` (`SERVER`, `LOGIN`, `SERVER ROLE`) on `on` (the login or
/// server role, for those classes).
pub(super) fn denied(server: &ServerFacts, holder: &str, class: &str, wanted: &str, on: Option<&str>) -> bool {
    // securityadmin "can GRANT, DENY, and REVOKE server-level permissions",
    // so it revokes any DENY in its way.
    let bound = server_holders(server, holder);
    !bound.iter().any(|h| h.eq_ignore_ascii_case("securityadmin")) && binds(server, &bound, class, wanted, on)
}

/// [`denied`] for a login whose rights code runs with (a signature's): the
/// code's fixed text revokes nothing, so only sysadmin is past the DENY.
pub(super) fn denied_to_code(server: &ServerFacts, holder: &str, class: &str, wanted: &str, on: Option<&str>) -> bool {
    binds(server, &server_holders(server, holder), class, wanted, on)
}

/// Whether a DENY binds a session of `bound` (a login or server role and
/// the roles it is in).
fn binds(server: &ServerFacts, bound: &[String], class: &str, wanted: &str, on: Option<&str>) -> bool {
    // No DENY binds sysadmin.
    if bound.iter().any(|h| h.eq_ignore_ascii_case("sysadmin")) {
        return false;
    }
    server
        .denies
        .iter()
        .filter(|d| bound.iter().any(|h| h.eq_ignore_ascii_case(&d.grantee)))
        .any(|d| match d.on_login.as_deref() {
            None => implies("SERVER", &d.permission, class, wanted),
            Some(target) => {
                let denied_class = if is_server_role(server, target) {
                    "SERVER ROLE"
                } else {
                    "LOGIN"
                };
                on.is_some_and(|o| o.eq_ignore_ascii_case(target))
                    && implies(denied_class, &d.permission, class, wanted)
            }
        })
}
