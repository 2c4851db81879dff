//! Whom EXECUTE AS may name: "EXECUTE AS (Transact-SQL)" takes a singleton
//! account only, never "a group, role, certificate, key, or built-in
//! account, such as NT AUTHORITY\LocalService, NT AUTHORITY\NetworkService,
//! or NT AUTHORITY\LocalSystem". A Windows or Entra group, a user or login
//! mapped to a certificate or asymmetric key, and an `NT AUTHORITY\` account
//! are acted as by no one, so IMPERSONATE on them reaches nothing of theirs.
//! Where the catalog read does not say a principal's kind (Babelfish answers
//! no login type), it is taken to be one that may be named. Other `##MS_…##`
//! logins are judged by their type alone: some are SQL logins that EXECUTE
//! AS does name (policy-based management runs as
//! ##MS_PolicyTsqlExecutionLogin##), the certificate-mapped ones are type C.

use super::super::catalog::{LoginKind, Principal, PrincipalKind};
use super::super::rules::Context;

/// Whether `kind` is a login EXECUTE AS LOGIN refuses.
fn refused(kind: Option<LoginKind>) -> bool {
    kind.is_some_and(|k| k.is_group() || k == LoginKind::Key)
}

/// Whether `name` is a built-in Windows account (`NT AUTHORITY\SYSTEM`,
/// `NT AUTHORITY\NETWORK SERVICE`, `NT AUTHORITY\LOCAL SERVICE`).
fn built_in(name: &str) -> bool {
    name.get(..13)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("NT AUTHORITY\\"))
}

/// Whether EXECUTE AS USER may name `user`.
pub(super) fn user(ctx: &Context, user: &Principal) -> bool {
    user.kind == PrincipalKind::User
        && !refused(user.login_kind)
        && !built_in(&user.name)
        && !user.login.as_deref().is_some_and(built_in)
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
    !built_in(login)
        && !catalog
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
