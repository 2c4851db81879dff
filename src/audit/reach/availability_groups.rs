//! Rights on one availability group ("GRANT Availability Group
//! Permissions", `sys.server_permissions` class 108). "ALTER AVAILABILITY
//! GROUP": FORCE_FAILOVER_ALLOW_DATA_LOSS needs ALTER on the group (CONTROL
//! implies it); TAKE OWNERSHIP makes the grantee the owner, who holds
//! CONTROL. A forced failover to a secondary that has not seen the latest
//! fence writes takes generations back as a restore does, as ALTER ANY
//! AVAILABILITY GROUP does on every group (`server_rights`).
//!
//! A DENY on the same group, or a server-wide one covering it, cuts the
//! grant it binds; an owner is bound by no DENY on what it owns, so a DENY
//! of ALTER leaves TAKE OWNERSHIP standing, and the group's owner itself
//! ("ALTER AUTHORIZATION", `sys.availability_replicas.owner_sid`) holds
//! CONTROL on it whatever is denied.

use super::super::catalog::{AvailabilityGroupPermission, ServerFacts};
use super::super::hierarchy::implies;
use super::super::rules::{Context, is_server_role, server_holders};
use super::edge::{Edge, Kind};
use super::graph::Graph;
use super::node::{Goal, Node};
use super::server_denies::denied;
use crate::tsql::quote_name;

const CLASS: &str = "AVAILABILITY GROUP";

pub(super) fn edges(ctx: &Context, graph: &mut Graph) {
    let Some(server) = &ctx.catalog.server else { return };
    for p in server.availability_groups.iter().filter(|p| !p.denied) {
        // An owner is bound by no DENY on what it owns.
        let Some(wanted) = ["ALTER", "TAKE OWNERSHIP"]
            .into_iter()
            .find(|w| implies(CLASS, &p.permission, CLASS, w) && (p.owner || !denied_on_group(server, p, w)))
        else {
            continue;
        };
        let node = if is_server_role(server, &p.grantee) {
            Node::server_role(&p.grantee)
        } else {
            Node::login(&p.grantee)
        };
        let permission = p.permission.to_uppercase();
        let how = if wanted == "ALTER" {
            "may force a failover"
        } else {
            "may take ownership of it and then force a failover"
        };
        let held = if p.owner {
            format!(
                "owns AVAILABILITY GROUP::{} (ALTER AUTHORIZATION), so holds CONTROL on it",
                p.group
            )
        } else {
            format!(
                "{permission} on AVAILABILITY GROUP::{}{}",
                p.group,
                if permission == wanted {
                    String::new()
                } else {
                    format!(" (implies {wanted})")
                }
            )
        };
        let step = format!(
            "{held}: {how} with data loss (ALTER AVAILABILITY GROUP {} \
             FORCE_FAILOVER_ALLOW_DATA_LOSS) to a secondary that has not seen the latest fence writes, which takes \
             generations back as a restore does; whether this database is in that availability group the catalog \
             read does not show",
            quote_name(&p.group)
        );
        let (evidence, cut) = if p.owner {
            (
                format!(
                    "sys.availability_replicas: owner_sid of AVAILABILITY GROUP::{} is login {}",
                    p.group, p.grantee
                ),
                format!(
                    "ALTER AUTHORIZATION ON AVAILABILITY GROUP::{} TO <a sysadmin login>;",
                    quote_name(&p.group)
                ),
            )
        } else {
            (
                format!(
                    "sys.server_permissions: GRANT {permission} ON AVAILABILITY GROUP::{} TO {}",
                    p.group, p.grantee
                ),
                format!(
                    "REVOKE {permission} ON AVAILABILITY GROUP::{} FROM {};",
                    quote_name(&p.group),
                    quote_name(&p.grantee)
                ),
            )
        };
        graph.actor(node.clone(), &p.grantee);
        graph.add(
            node,
            &p.grantee,
            Edge::new(Node::Goal(Goal::WriteFence), Kind::Acts, step, evidence, cut).on("the fence's generations"),
        );
    }
}

/// Whether a DENY refuses `p`'s grantee `wanted` on `p`'s group: one on the
/// group binding the grantee or a server role it is in, or a server-wide
/// one covering it. sysadmin and securityadmin are bound by none.
fn denied_on_group(server: &ServerFacts, p: &AvailabilityGroupPermission, wanted: &str) -> bool {
    if denied(server, &p.grantee, CLASS, wanted, None) {
        return true;
    }
    let bound = server_holders(server, &p.grantee);
    let is = |name: &str| bound.iter().any(|h| h.eq_ignore_ascii_case(name));
    !is("sysadmin")
        && !is("securityadmin")
        && server.availability_groups.iter().any(|d| {
            d.denied
                && d.group.eq_ignore_ascii_case(&p.group)
                && is(&d.grantee)
                && implies(CLASS, &d.permission, CLASS, wanted)
        })
}
