//! Who can become whom: role membership, adding oneself to a role (owning
//! it, ALTER on it by the hierarchy, an owning role's members), acting as a
//! user (IMPERSONATE, implied by CONTROL on it or on the database), resetting
//! a contained user's password (ALTER ANY USER), entering an application
//! role by setting its password (ALTER ANY APPLICATION ROLE).

use super::super::catalog::{Principal, PrincipalKind, Securable, UserAuthentication};
use super::super::rules::Context;
use super::bound::Bound;
use super::denies;
use super::edge::{Edge, Kind};
use super::fixed_roles::is_fixed;
use super::graph::Graph;
use super::node::Node;
use super::right::Right;
use crate::tsql::quote_name;

/// Users no one signs in as, or whose password no ALTER USER sets.
const BUILTIN_USERS: [&str; 4] = ["dbo", "guest", "sys", "INFORMATION_SCHEMA"];

pub(super) fn edges(ctx: &Context, rights: &[Right], graph: &mut Graph) {
    for m in &ctx.catalog.memberships {
        // Everyone is in public: its rights are a finding of public's own.
        if m.role.eq_ignore_ascii_case("public") || m.role.eq_ignore_ascii_case(&m.member) {
            continue;
        }
        graph.add(
            Node::principal(&m.member),
            &m.member,
            Edge::new(
                Node::principal(&m.role),
                Kind::Holds,
                format!("member of {}", m.role),
                format!("sys.database_role_members: {} in {}", m.member, m.role),
                format!(
                    "ALTER ROLE {} DROP MEMBER {};",
                    quote_name(&m.role),
                    quote_name(&m.member)
                ),
            ),
        );
    }
    for right in rights {
        for target in &ctx.catalog.principals {
            if target.name.eq_ignore_ascii_case(&right.holder) {
                continue;
            }
            if let Some(edge) = on_principal(ctx, right, target) {
                graph.add(right.node(), &right.holder, edge);
            }
        }
        if super::fixed_roles::manages_permissions(&right.holder) && right.permission.permission == "ALTER ANY ROLE" {
            for goal in [super::Goal::WriteFence, super::Goal::RunAdmin, super::Goal::AlterCode] {
                graph.add(
                    right.node(),
                    &right.holder,
                    Edge::new(
                        Node::Goal(goal),
                        Kind::Acts,
                        format!(
                            "manages permissions, so may GRANT itself the right to {} (a fixed role's documented \
                             power)",
                            goal.describe()
                        ),
                        format!("fixed database role {}: \"can modify role membership for custom roles only and manage permissions\"", right.holder),
                        format!("(take the members out of {})", right.holder),
                    )
                    .on("the fence"),
                );
            }
        }
    }
}

/// The edge `right` gives its holder into `target`, if any.
fn on_principal(ctx: &Context, right: &Right, target: &Principal) -> Option<Edge> {
    let p = &right.permission;
    let on = Securable::Principal {
        name: target.name.clone(),
    };
    let class = ctx.principal_class(&target.name);
    let held = |wanted: &str| hierarchy_note(ctx, right, wanted, &format!("{class}::{}", target.name));
    let database = |wanted: &str| {
        if p.on == Securable::Database && ctx.implies(p, "DATABASE", wanted) {
            denies::allows(ctx, right, &Securable::Database, wanted)
        } else {
            None
        }
    };
    let edge = |step: String, unless: Bound| {
        Edge::new(
            Node::principal(&target.name),
            Kind::Acts,
            step,
            right.evidence.clone(),
            right.cut.clone(),
        )
        .unless(unless)
    };
    match target.kind {
        PrincipalKind::User | PrincipalKind::Group => {
            if super::singleton::user(ctx, target)
                && let Some(unless) = denies::reaches(ctx, right, &on, "IMPERSONATE")
            {
                return Some(
                    edge(
                        format!(
                            "IMPERSONATE on USER::{}{}{} (EXECUTE AS USER = '{}')",
                            target.name,
                            held("IMPERSONATE"),
                            right.grant_option(),
                            target.name
                        ),
                        unless,
                    )
                    .reverts(),
                );
            }
            // ALTER USER ... WITH PASSWORD needs ALTER ANY USER. Only a
            // contained user with a password has one (authentication_type
            // DATABASE); WITHOUT LOGIN, Windows and Entra users have none. A
            // user without a login whose kind was not read may be one.
            let builtin = BUILTIN_USERS.iter().any(|b| b.eq_ignore_ascii_case(&target.name));
            let password = match target.authentication {
                Some(UserAuthentication::Database) => Some(""),
                None => Some(
                    ": a user without a login may be a contained user with a password, and the catalog read does \
                     not tell",
                ),
                Some(_) => None,
            };
            if let Some(why) = password
                && target.kind == PrincipalKind::User
                && target.login.is_none()
                && !builtin
                && let Some(unless) = database("ALTER ANY USER")
            {
                return Some(edge(
                    format!(
                        "resets the password of {} (ALTER USER {} WITH PASSWORD = '...'){}{why}",
                        target.name,
                        quote_name(&target.name),
                        held("ALTER ANY USER")
                    ),
                    unless,
                ));
            }
            None
        }
        // Acted as only by code signed with its key (`signing`): no
        // IMPERSONATE reaches it and it has no password to reset.
        PrincipalKind::KeyMapped => None,
        PrincipalKind::Role => {
            // Fixed roles take members from db_owner's members only; public
            // has everyone already.
            if is_fixed(&target.name) || target.name.eq_ignore_ascii_case("public") {
                return None;
            }
            let (wanted, unless) = ["ALTER", "TAKE OWNERSHIP"]
                .into_iter()
                .find_map(|w| denies::reaches(ctx, right, &on, w).map(|u| (w, u)))?;
            let how = if wanted == "ALTER" {
                "may add itself to it"
            } else {
                "may take ownership of it and then add itself to it"
            };
            Some(edge(
                format!(
                    "{wanted} on ROLE::{}{}{}: {how} (ALTER ROLE {} ADD MEMBER)",
                    target.name,
                    held(wanted),
                    right.grant_option(),
                    quote_name(&target.name)
                ),
                unless,
            ))
        }
        PrincipalKind::ApplicationRole => {
            // ALTER APPLICATION ROLE ... WITH PASSWORD needs ALTER ANY
            // APPLICATION ROLE; CONTROL on the role is every right on it.
            let (wanted, unless) = match database("ALTER ANY APPLICATION ROLE") {
                Some(unless) => ("ALTER ANY APPLICATION ROLE", unless),
                None => ("CONTROL", denies::reaches(ctx, right, &on, "CONTROL")?),
            };
            Some(edge(
                format!(
                    "sets the password of APPLICATION ROLE::{} and enters it (ALTER APPLICATION ROLE {} WITH \
                     PASSWORD, sp_setapprole){}",
                    target.name,
                    quote_name(&target.name),
                    held(wanted)
                ),
                unless,
            ))
        }
    }
}

/// ` (by the hierarchy: X on Y implies W on Z)`, or how it is held, when the
/// right is not a plain grant of exactly `wanted` on `target`.
pub(super) fn hierarchy_note(ctx: &Context, right: &Right, wanted: &str, target: &str) -> String {
    let p = &right.permission;
    let on = ctx.describe(&p.on);
    let exact = p.permission.eq_ignore_ascii_case(wanted) && on.eq_ignore_ascii_case(target);
    match &right.held {
        Some(held) => format!(" (by the hierarchy: {held}, which implies {wanted} on {target})"),
        None if exact => String::new(),
        None => format!(
            " (by the hierarchy: {} on {on} implies {wanted} on {target})",
            p.permission.to_uppercase()
        ),
    }
}
