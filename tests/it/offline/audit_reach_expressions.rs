//! FP027 through the functions a fence table's CHECK, DEFAULT or computed
//! column runs, followed to the end of the chain, on layouts written from
//! Microsoft's documentation ("CREATE FUNCTION": a scalar function may call
//! other functions, and every one of them runs inside the statement that
//! evaluates the expression; "sys.sql_expression_dependencies" records the
//! calls a module makes). Each function is in a schema the fence tables'
//! owner does not own, so only the expression reaches the fence.

use crate::support;

use fencepost::audit::{Catalog, Dependency, ObjectKind, Schema, TableExpression};
use support::fixtures::*;

/// `app.ValidKey` calls `app.Inner`, which calls `app.Leaf`; a CHECK on
/// fence.Resource calls `app.ValidKey`; the schema is app_owner's.
fn chain(c: &mut Catalog) {
    c.principals.push(role("app_owner"));
    c.principals.push(user("appdev", Some("appdev")));
    c.schemas.push(Schema {
        name: "app".into(),
        owner: "app_owner".into(),
    });
    for (name, body) in [
        ("ValidKey", "RETURN app.Inner(@k)"),
        ("Inner", "RETURN [app].[Leaf](@k)"),
        ("Leaf", "RETURN 1"),
        ("Unused", "RETURN 0"),
    ] {
        c.objects.push(module(
            "app",
            name,
            ObjectKind::Function,
            &format!("CREATE FUNCTION app.{name}(@k nvarchar(450)) RETURNS bit AS BEGIN {body} END"),
        ));
    }
    c.table_expressions = Some(vec![TableExpression {
        table: "fence.Resource".into(),
        kind: "CHECK".into(),
        name: "CK_Resource_Key".into(),
        definition: "([app].[ValidKey]([ResourceKey])=(1))".into(),
    }]);
}

#[test]
fn alter_on_a_function_the_checks_function_calls_is_a_way_to_write_the_fence() {
    for callee in ["Inner", "Leaf"] {
        let mut c = clean();
        chain(&mut c);
        c.permissions.push(grant("appdev", "ALTER", object("app", callee)));
        let f = reaching(&c, "appdev");
        assert_eq!(f.len(), 1, "{callee}: {:#?}", check(&c));
        assert_eq!(f[0].object, "fence.Resource");
        let step = &f[0].path[0].step;
        assert!(step.starts_with(&format!("ALTER on app.{callee}, which ")), "{step}");
        assert!(
            step.contains("which app.ValidKey calls, which CHECK CK_Resource_Key of fence.Resource calls"),
            "{step}"
        );
    }
}

#[test]
fn a_call_found_only_by_its_recorded_dependency_counts() {
    // The text calls through a synonym the reader does not resolve; the
    // engine's dependency row names the function.
    let mut c = clean();
    chain(&mut c);
    let inner = c.objects.iter_mut().find(|o| o.name == "Inner").unwrap();
    inner.definition =
        Some("CREATE FUNCTION app.Inner(@k nvarchar(450)) RETURNS bit AS BEGIN RETURN app.LeafAlias(@k) END".into());
    c.dependencies.as_mut().unwrap().push(Dependency {
        referencing: "app.Inner".into(),
        referenced: "app.Leaf".into(),
    });
    c.permissions.push(grant("appdev", "ALTER", object("app", "Leaf")));
    assert_eq!(reaching(&c, "appdev").len(), 1, "{:#?}", check(&c));
}

#[test]
fn a_function_off_the_chain_or_named_only_in_a_comment_stays_clean() {
    let mut c = clean();
    chain(&mut c);
    c.permissions.push(grant("appdev", "ALTER", object("app", "Unused")));
    let leaf = c.objects.iter_mut().find(|o| o.name == "Leaf").unwrap();
    leaf.definition =
        Some("CREATE FUNCTION app.Leaf(@k nvarchar(450)) RETURNS bit AS BEGIN -- not app.Unused\n RETURN 1 END".into());
    assert!(reaching(&c, "appdev").is_empty(), "{:#?}", check(&c));
}
