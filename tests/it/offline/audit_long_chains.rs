//! Long chains, at the sizes a large database has: a write through a
//! hundred views each selecting from the next, and a session leaving a
//! hundred and fifty denied roles where every role it may leave still holds
//! a right it needs. Each is found with its whole route, and the same
//! layout with one link broken stays clean.

use crate::support;

use super::audit_reach_leaving_roles::{deny, on_role};
use fencepost::audit::{Catalog, Dependency, Finding, ObjectKind, Securable};
use support::fixtures::*;

/// A user of its own login, with CONNECT.
fn add_user(c: &mut Catalog, name: &str) {
    c.principals.push(user(name, Some(name)));
    c.permissions.push(grant(name, "CONNECT", Securable::Database));
}

/// `views` dbo-owned views, `dbo.Chain0` selecting from `dbo.Chain1` and so
/// on, the last from fence.Resource, listed outermost first (the order that
/// finds one more link each time the catalog is read), and `etl` granted
/// UPDATE on `dbo.Chain0`.
pub(super) fn chain_of_views(views: usize) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "etl");
    for i in 0..views {
        let from = if i + 1 < views {
            format!("dbo.Chain{}", i + 1)
        } else {
            "fence.Resource".to_string()
        };
        let name = format!("Chain{i}");
        let text = format!("CREATE VIEW dbo.{name} AS SELECT ResourceId, Owner, Generation FROM {from};");
        c.objects.push(module("dbo", &name, ObjectKind::View, &text));
        c.dependencies.get_or_insert_with(Vec::new).push(Dependency {
            referencing: format!("dbo.{name}"),
            referenced: from,
        });
    }
    c.permissions.push(grant("etl", "UPDATE", object("dbo", "Chain0")));
    c
}

/// `u` holds UPDATE on fence.Resource and is in each of `roles` roles, all
/// denied UPDATE on the fence schema; `u` may alter the first when
/// `first_alterable`, and each may alter the next. Each also holds ALTER on
/// `kept`, a role `u` is in that is denied nothing, so every role `u` may
/// leave holds a right over a role it stays in: no drop is free, and each
/// is weighed against the others.
pub(super) fn chain_of_needed_denied_roles(roles: usize, first_alterable: bool) -> Catalog {
    let mut c = clean();
    add_user(&mut c, "u");
    c.permissions.push(grant("u", "UPDATE", object("fence", "Resource")));
    c.principals.push(role("kept"));
    c.memberships.push(member("kept", "u"));
    for i in 0..roles {
        let r = format!("r{i}");
        c.principals.push(role(&r));
        c.permissions.push(deny(&r, "UPDATE", schema("fence")));
        c.memberships.push(member(&r, "u"));
        c.permissions.push(grant(&r, "ALTER", on_role("kept")));
        if i + 1 < roles {
            c.permissions.push(grant(&r, "ALTER", on_role(&format!("r{}", i + 1))));
        }
    }
    if first_alterable {
        c.permissions.push(grant("u", "ALTER", on_role("r0")));
    }
    c
}

/// The FP027 finding naming `who` for writing the fence tables.
fn writes(c: &Catalog, who: &str) -> Vec<Finding> {
    reaching(c, who)
        .into_iter()
        .filter(|f| f.permission.as_deref() == Some("write the fence tables"))
        .collect()
}

#[test]
fn update_on_the_outermost_of_a_hundred_chained_views_names_the_grantee_with_every_view() {
    let c = chain_of_views(100);
    let found = writes(&c, "etl");
    assert_eq!(found.len(), 1, "{:#?}", check(&c));
    let steps = step_texts(&found[0]);
    assert!(steps[0].starts_with("UPDATE on dbo.Chain0"), "{steps:#?}");
    for i in 0..99 {
        let link = format!("dbo.Chain{i} selects from dbo.Chain{}", i + 1);
        assert!(steps.iter().any(|s| s.starts_with(&link)), "{link} missing: {steps:#?}");
    }
    assert!(
        steps
            .last()
            .unwrap()
            .starts_with("dbo.Chain99 selects from fence.Resource"),
        "{steps:#?}"
    );
}

#[test]
fn a_hundred_chained_views_with_the_last_owned_by_someone_else_write_nothing() {
    let mut c = chain_of_views(100);
    c.principals.push(user("report_owner", None));
    object_mut(&mut c, "dbo.Chain99").owner = Some("report_owner".into());
    assert!(writes(&c, "etl").is_empty(), "{:#?}", check(&c));
}

/// The steps of `who`'s path to writing a fence table, in the finding of
/// the rule that names it: FP003 for a grant held directly, which FP027
/// then leaves out.
fn write_path(c: &Catalog, who: &str) -> Option<String> {
    check(c)
        .findings
        .iter()
        .filter(|f| f.principal.as_deref() == Some(who))
        .map(|f| step_texts(f).join(" | "))
        .find(|steps| steps.contains("UPDATE on fence.Resource"))
}

#[test]
fn a_chain_of_a_hundred_and_fifty_denied_roles_each_still_needed_is_left_from_the_last_to_the_first() {
    let c = chain_of_needed_denied_roles(150, true);
    let steps = write_path(&c, "u").unwrap_or_else(|| panic!("u does not write: {:#?}", check(&c)));
    let drops: String = (0..150)
        .rev()
        .map(|i| format!("ALTER ROLE [r{i}] DROP MEMBER [u];"))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(steps.contains(&format!("({drops})")), "{steps}");
}

#[test]
fn a_chain_of_a_hundred_and_fifty_denied_roles_whose_first_no_one_may_alter_stays_a_cut() {
    let c = chain_of_needed_denied_roles(150, false);
    assert!(write_path(&c, "u").is_none(), "{:#?}", check(&c));
}
