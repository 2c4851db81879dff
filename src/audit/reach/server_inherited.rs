//! Server permissions that imply database permissions ("Server-level
//! roles": "the permissions that are held by these server-level roles can
//! propagate to database permissions"; the hierarchy of
//! `sys.fn_builtin_permissions`): ALTER ANY DATABASE is ALTER on every
//! database, so a login holding it, granted or through a server role
//! (##MS_DatabaseManager##, dbcreator), holds ALTER here once it is in the
//! database. It is in by a user of its own, or without one by CONNECT ANY
//! DATABASE (##MS_DatabaseConnector##) or as guest where guest may connect:
//! "a login needs to be a member of ##MS_DatabaseConnector## ... or have a
//! user account in the individual databases". CONTROL SERVER is left to the
//! sysadmin edge, which passes every check already.

use std::collections::BTreeSet;

use super::super::catalog::{Permission, PermissionState, PrincipalKind, Securable};
use super::super::hierarchy::{builtin_permissions, implies};
use super::super::rules::{Context, is_server_role, server_holders};
use super::right::Right;
use super::server_denies::denied;
use super::server_rights::{Held, held};

pub(super) fn rights(ctx: &Context, rights: &mut Vec<Right>) {
    let Some(server) = &ctx.catalog.server else { return };
    let held = held(server);
    let mut with_user: BTreeSet<String> = BTreeSet::new();
    for p in &ctx.catalog.principals {
        let Some(login) = p.login.as_deref() else { continue };
        if !matches!(
            p.kind,
            PrincipalKind::User | PrincipalKind::Group | PrincipalKind::KeyMapped
        ) || p.name.eq_ignore_ascii_case("dbo")
        {
            continue;
        }
        with_user.insert(login.to_lowercase());
        for (h, wanted) in inherited(ctx, &held, login) {
            rights.push(right(&p.name, false, login, h, &wanted, "as its user"));
        }
    }
    // Logins without a user here: in by CONNECT ANY DATABASE or as guest.
    let guest = ctx.grants().any(|g| {
        g.grantee.eq_ignore_ascii_case("guest") && g.on == Securable::Database && ctx.implies(g, "DATABASE", "CONNECT")
    });
    let mut logins: Vec<&String> = server
        .role_members
        .iter()
        .map(|m| &m.member)
        .chain(server.permissions.iter().map(|p| &p.grantee))
        .filter(|l| !is_server_role(server, l) && !with_user.contains(&l.to_lowercase()))
        .collect();
    logins.sort_by_key(|l| l.to_lowercase());
    logins.dedup_by_key(|l| l.to_lowercase());
    for login in logins {
        let connects = inherited_raw(ctx, &held, login)
            .into_iter()
            .any(|h| implies("SERVER", &h.permission, "SERVER", "CONNECT ANY DATABASE"));
        let how = match (connects, guest) {
            (true, _) => "as it holds CONNECT ANY DATABASE",
            (false, true) => "as guest, which may connect here",
            (false, false) => continue,
        };
        for (h, wanted) in inherited(ctx, &held, login) {
            rights.push(right(login, true, login, h, &wanted, how));
        }
    }
}

/// The server rights `login` holds, through its server roles, that no DENY
/// cuts and that stop short of CONTROL SERVER.
fn inherited_raw<'h>(ctx: &Context, held: &'h [Held], login: &str) -> Vec<&'h Held> {
    let Some(server) = &ctx.catalog.server else {
        return Vec::new();
    };
    let holders = server_holders(server, login);
    held.iter()
        .filter(|h| holders.iter().any(|x| x.eq_ignore_ascii_case(&h.holder)))
        .filter(|h| !implies("SERVER", &h.permission, "SERVER", "CONTROL SERVER"))
        .filter(|h| !denied(server, login, "SERVER", &h.permission, None))
        .collect()
}

/// Each of `login`'s server rights with the topmost database permissions it
/// implies: those whose covering permission on the database it does not
/// imply too (ALTER ANY DATABASE gives ALTER, and ALTER the rest).
fn inherited<'h>(ctx: &Context, held: &'h [Held], login: &str) -> Vec<(&'h Held, String)> {
    let mut out = Vec::new();
    for h in inherited_raw(ctx, held, login) {
        let implied: Vec<&str> = builtin_permissions()
            .iter()
            .filter(|b| b.class == "DATABASE" && implies("SERVER", &h.permission, "DATABASE", b.permission))
            .map(|b| b.permission)
            .collect();
        for wanted in &implied {
            let covered = implied
                .iter()
                .any(|other| other != wanted && implies("DATABASE", other, "DATABASE", wanted));
            if !covered {
                out.push((h, wanted.to_string()));
            }
        }
    }
    out
}

fn right(holder: &str, login: bool, login_name: &str, h: &Held, wanted: &str, how: &str) -> Right {
    let through = if h.holder.eq_ignore_ascii_case(login_name) {
        String::new()
    } else {
        format!(" through server role {}", h.holder)
    };
    Right {
        holder: holder.to_string(),
        permission: Permission {
            grantee: holder.to_string(),
            permission: wanted.to_string(),
            state: PermissionState::Grant,
            on: Securable::Database,
        },
        held: Some(format!(
            "login {login_name} holds {}{through} on the server, which implies {wanted} on every database it enters, \
             and it enters this one {how}",
            h.permission
        )),
        evidence: h.evidence.clone(),
        cut: h.cut.clone(),
        plain_grant: false,
        login,
        undeniable: false,
        taken: false,
    }
}
