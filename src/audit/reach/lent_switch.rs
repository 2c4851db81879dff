//! EXECUTE AS USER inside a lending module ("EXECUTE AS (Transact-SQL)"):
//! the statement switches the context to that user when the context it
//! runs in holds IMPERSONATE on it (or a right that covers it), and the
//! statements after it run as that user until REVERT. So a module running
//! as maint (EXECUTE AS 'maint') that switches to writer, which maint may
//! impersonate, makes its writes with writer's rights: whoever may run the
//! module makes them too, though it could not impersonate writer itself.
//! Only the statements that may run after the switch and before its REVERT
//! ("REVERT (Transact-SQL)") are weighed so ([`switched_part`]). Only a context that is a user switches so: a signature
//! adds its key user's rights to the caller's context, whose own
//! IMPERSONATE [`super::principals`] weighs.

use std::collections::BTreeSet;

use super::super::catalog::Securable;
use super::super::rules::Context;
use super::context_stack::{As, kept, may_run_as};
use super::lent_write::{Beside, Lender, how_held, lent};
use super::right::Right;
use super::singleton;
use crate::tsql::{TokenKind, tokenize};

/// The users `body`, run with `lender`'s context, switches to by EXECUTE AS
/// USER, each as the context its statements then run with.
pub(super) fn switched(ctx: &Context, rights: &[Right], body: &str, lender: &Lender) -> Vec<Lender> {
    if lender.key.is_some() {
        return Vec::new();
    }
    let mut out: Vec<Lender> = Vec::new();
    // "EXECUTE AS": the name "can be specified as a local variable", so a
    // switch by variable may name any user.
    let switches = targets(body);
    let by_variable = switches.iter().find_map(|n| match n {
        Switch::Variable(v) => Some(v.clone()),
        Switch::User(_) => None,
    });
    let candidates: Vec<(String, String)> = switches
        .iter()
        .filter_map(|n| match n {
            Switch::User(u) => Some((u.clone(), format!("'{}'", u.replace('\'', "''")))),
            Switch::Variable(_) => None,
        })
        .chain(by_variable.iter().flat_map(|v| {
            ctx.catalog
                .principals
                .iter()
                .map(move |p| (p.name.clone(), format!("{v}, a name given at run time")))
        }))
        .collect();
    // Users a switch by variable may name that nothing names but their
    // memberships act alike when they share their roles and default schema:
    // one stands for them all.
    let named = if by_variable.is_some() {
        named_apart(ctx)
    } else {
        BTreeSet::new()
    };
    let mut alike: BTreeSet<(BTreeSet<String>, Option<String>)> = BTreeSet::new();
    for (user, as_written) in candidates {
        if user.eq_ignore_ascii_case(&lender.principal) || out.iter().any(|l| l.principal.eq_ignore_ascii_case(&user)) {
            continue;
        }
        let Some(p) = ctx.principal(&user) else {
            continue;
        };
        if !singleton::user(ctx, p) {
            continue;
        }
        let on = Securable::Principal { name: p.name.clone() };
        let Some(right) = lent(ctx, rights, &lender.principal, &on, "IMPERSONATE") else {
            continue;
        };
        // Only a user the switch may reach stands for the others alike.
        if by_variable.is_some() && !named.contains(&user.to_lowercase()) {
            let mut roles = ctx.holders(&user);
            roles.remove(&user.to_lowercase());
            let schema = p.default_schema.as_ref().map(|s| s.to_lowercase());
            if !alike.insert((roles, schema)) {
                continue;
            }
        }
        out.push(Lender {
            principal: p.name.clone(),
            how: format!(
                "{}, then switches to {} (EXECUTE AS USER = {as_written}), which {} may impersonate{}",
                lender.how,
                p.name,
                lender.principal,
                how_held(
                    ctx,
                    right,
                    &lender.principal,
                    "IMPERSONATE",
                    &format!("USER::{}", p.name)
                )
            ),
            evidence: format!("{}; {}", lender.evidence, right.evidence),
            cut: format!("{} (or {})", lender.cut, right.cut),
            key: None,
            beside: Beside::Nobody,
            unchecked: false,
        });
    }
    out
}

/// The principals (lower-cased) the catalog names beyond their
/// memberships: a login, a permission granted, denied or held on it,
/// something owned, a key's user.
fn named_apart(ctx: &Context) -> BTreeSet<String> {
    let c = &ctx.catalog;
    c.principals
        .iter()
        .filter(|p| p.login.is_some())
        .map(|p| p.name.as_str())
        .chain(c.permissions.iter().map(|p| p.grantee.as_str()))
        .chain(c.permissions.iter().filter_map(|p| match &p.on {
            Securable::Principal { name } => Some(name.as_str()),
            _ => None,
        }))
        .chain(c.schemas.iter().map(|s| s.owner.as_str()))
        .chain(c.principals.iter().filter_map(|p| p.owner.as_deref()))
        .chain(c.objects.iter().filter_map(|o| o.owner.as_deref()))
        .chain(
            c.signing_keys
                .iter()
                .flatten()
                .flat_map(|k| [k.owner.as_deref(), k.user.as_deref()])
                .flatten(),
        )
        .map(str::to_lowercase)
        .collect()
}

/// `body` with only the statements that may run as `user` by its EXECUTE
/// AS USER kept (a switch by variable may name it), the rest blanked in
/// place ([`super::context_stack`]).
pub(super) fn switched_part(body: &str, user: &str) -> String {
    kept(
        body,
        &may_run_as(body, |a| match a {
            As::User(Some(u)) => u.eq_ignore_ascii_case(user),
            As::User(None) => true,
            _ => false,
        }),
    )
}

/// What an `EXECUTE AS USER =` names.
#[derive(Debug, PartialEq, Eq)]
enum Switch {
    /// `'x'` or `N'x'`, its quotes undone.
    User(String),
    /// `@u`: any user.
    Variable(String),
}

/// The users `EXECUTE AS USER = 'x'` (or `EXEC AS USER = N'x'`, or `=
/// @u`) names in `body`'s code, in order.
fn targets(body: &str) -> Vec<Switch> {
    let tokens: Vec<_> = tokenize(body)
        .into_iter()
        .filter(|t| {
            !matches!(
                t.kind,
                TokenKind::Whitespace | TokenKind::LineComment | TokenKind::BlockComment
            )
        })
        .collect();
    let word = |i: usize, w: &str| {
        tokens
            .get(i)
            .is_some_and(|t| t.kind == TokenKind::Word && t.text.eq_ignore_ascii_case(w))
    };
    let mut out = Vec::new();
    for i in 0..tokens.len() {
        if !(word(i, "exec") || word(i, "execute")) || !word(i + 1, "as") || !word(i + 2, "user") {
            continue;
        }
        if tokens.get(i + 3).is_none_or(|t| t.text != "=") {
            continue;
        }
        let at = if word(i + 4, "n") { i + 5 } else { i + 4 };
        let Some(t) = tokens.get(at) else { continue };
        if let Some(user) = t.string_value() {
            out.push(Switch::User(user));
        } else if t.text.starts_with('@') {
            out.push(Switch::Variable(t.text.to_string()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{Switch, switched_part, targets};

    #[test]
    fn the_switched_part_ends_at_the_revert() {
        let t = switched_part(
            "CREATE PROCEDURE p WITH EXECUTE AS 'maint' AS EXECUTE AS USER = 'Writer'; SELECT 1; REVERT; \
             UPDATE fence.Resource SET x = 1;",
            "writer",
        );
        assert!(
            t.contains("SELECT 1;") && !t.contains("UPDATE") && !t.contains("maint"),
            "{t}"
        );
    }

    #[test]
    fn each_switch_to_a_user_is_read_with_its_quotes_undone() {
        let t = targets(
            "CREATE PROCEDURE p WITH EXECUTE AS 'maint' AS EXECUTE AS USER = 'writer'; \
             EXEC AS USER=N'o''brien'; EXECUTE AS LOGIN = 'l'; REVERT; EXECUTE AS USER = @u;",
        );
        assert_eq!(
            t,
            vec![
                Switch::User("writer".into()),
                Switch::User("o'brien".into()),
                Switch::Variable("@u".into())
            ]
        );
    }

    #[test]
    fn control_a_switch_in_a_comment_or_a_string_is_not_read() {
        let t = targets("-- EXECUTE AS USER = 'a'\nSELECT 'EXECUTE AS USER = ''b'''; /* EXEC AS USER = 'c' */");
        assert!(t.is_empty(), "{t:?}");
    }
}
