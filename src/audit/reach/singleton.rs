//! Whom EXECUTE AS may name: "EXECUTE AS (Transact-SQL)" takes a singleton
//! account only, never a group, a role, a certificate or a key. A Windows or
//! Entra group, and a user or login mapped to a certificate or asymmetric
//! key, are acted as by no one, so IMPERSONATE on them reaches nothing of
//! theirs. Where the catalog read does not say a principal's kind (Babelfish
//! answers no login type), it is taken to be one that may be named.

use super::super::catalog::{LoginKind, Principal, PrincipalKind};
use super::super::rules::Context;

/// Whether `kind` is a login EXECUTE AS LOGIN refuses.
fn refused(kind: Option<LoginKind>) -> bool {
    kind.is_some_and(|k| k.is_group() || k == LoginKind::Key)
}

/// Whether EXECUTE AS USER may name `user`.
pub(super) fn user(ctx: &Context, user: &Principal) -> bool {
    user.kind == PrincipalKind::User
        && !refused(user.login_kind)
        && !ctx
            .catalog
            .signing_keys
            .iter()
            .flatten()
            .any(|k| k.user.as_deref().is_some_and(|u| u.eq_ignore_ascii_case(&user.name)))
}

/// Whether EXECUTE AS LOGIN may name `login`.
pub(super) fn login(ctx: &Context, login: &str) -> bool {
    let is = |l: &str| l.eq_ignore_ascii_case(login);
    let catalog = &ctx.catalog;
    !catalog
        .server
        .as_ref()
        .is_some_and(|s| s.group_logins.iter().any(|g| is(g)))
        && !catalog
            .principals
            .iter()
            .any(|p| p.login.as_deref().is_some_and(is) && refused(p.login_kind))
        && !catalog
            .signing_keys
            .iter()
            .flatten()
            .any(|k| k.login.as_deref().is_some_and(is))
}
