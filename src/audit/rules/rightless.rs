//! Whether a database principal holds nothing beyond what `public` holds:
//! code that runs as it (EXECUTE AS) can do no more than any caller.

use super::Context;
use super::is_one_of;

/// A user with no role but `public`, no grant but CONNECT, that owns
/// nothing and has no login with server rights, in a database that is not
/// TRUSTWORTHY (where its impersonation stays inside the database). Unknown
/// principals, and any principal while the permission catalog is hidden,
/// hold something as far as the rules know.
pub(super) fn holds_nothing(ctx: &Context, name: &str) -> bool {
    let catalog = ctx.catalog;
    let Some(p) = catalog.principal(name) else {
        return false;
    };
    let owns_schema = catalog.schemas.iter().any(|s| s.owner.eq_ignore_ascii_case(name));
    let owns_object = catalog
        .objects
        .iter()
        .any(|o| o.owner.as_deref().is_some_and(|x| x.eq_ignore_ascii_case(name)));
    let owns_role = catalog
        .principals
        .iter()
        .any(|r| r.owner.as_deref().is_some_and(|x| x.eq_ignore_ascii_case(name)));
    let granted = ctx
        .grants()
        .any(|g| g.grantee.eq_ignore_ascii_case(name) && !is_one_of(&g.permission, &["CONNECT"]));
    let server_rights = match (&catalog.server, p.login.as_deref()) {
        (_, None) => false,
        (Some(server), Some(login)) => {
            server.permissions_unreadable.is_some()
                || server.role_members.iter().any(|m| m.member.eq_ignore_ascii_case(login))
                || server.permissions.iter().any(|g| {
                    g.grantee.eq_ignore_ascii_case(login)
                        && !is_one_of(&g.permission, &["CONNECT SQL", "VIEW ANY DATABASE"])
                })
        }
        (None, Some(_)) => true,
    };
    p.kind == super::super::catalog::PrincipalKind::User
        && !name.eq_ignore_ascii_case("dbo")
        && ctx.permissions_hidden.is_none()
        && ctx.roles_of(name).is_empty()
        && !owns_schema
        && !owns_object
        && !owns_role
        && !granted
        && !server_rights
        && !catalog.settings.is_none_or(|s| s.trustworthy)
}
