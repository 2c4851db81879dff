//! The permission hierarchy the audit ships (`src/audit/permissions.tsv`) is
//! well formed: every covering and parent permission it names is a row of
//! its class, no permission implies itself through others, and every chain
//! ends at CONTROL SERVER.

use std::collections::{BTreeMap, BTreeSet};

use fencepost::audit::hierarchy::{BuiltinPermission, builtin_permissions, implies};

fn key(class: &str, permission: &str) -> (String, String) {
    (class.to_uppercase(), permission.to_uppercase())
}

fn rows() -> BTreeMap<(String, String), BuiltinPermission> {
    let mut rows = BTreeMap::new();
    for r in builtin_permissions() {
        let previous = rows.insert(key(r.class, r.permission), *r);
        assert!(previous.is_none(), "{} {} is listed twice", r.class, r.permission);
    }
    rows
}

/// What implies `r` directly: its covering permission, its parent permission.
fn up(r: &BuiltinPermission) -> Vec<(String, String)> {
    let mut up = Vec::new();
    if let Some(c) = r.covering {
        up.push(key(r.class, c));
    }
    if let (Some(class), Some(p)) = (r.parent_class, r.parent_covering) {
        up.push(key(class, p));
    }
    up
}

#[test]
fn every_covering_and_parent_permission_is_a_row_of_its_class() {
    let rows = rows();
    let mut dangling = Vec::new();
    for r in rows.values() {
        assert_eq!(
            r.parent_class.is_some(),
            r.parent_covering.is_some(),
            "{} {}: a parent class without a parent permission, or the other way round",
            r.class,
            r.permission
        );
        assert_eq!(
            r.class.eq_ignore_ascii_case("SERVER"),
            r.parent_class.is_none(),
            "{} {}: only SERVER has no parent class",
            r.class,
            r.permission
        );
        for target in up(r) {
            if !rows.contains_key(&target) {
                dangling.push(format!("{} {} -> {} {}", r.class, r.permission, target.0, target.1));
            }
        }
    }
    assert!(
        dangling.is_empty(),
        "implied by permissions that are not rows: {dangling:#?}"
    );
}

#[test]
fn the_hierarchy_has_no_cycle_and_every_chain_ends_at_control_server() {
    let rows = rows();
    for (start, r) in &rows {
        // Walk every path up from this row: none may come back to it, and
        // every one ends at CONTROL SERVER, which nothing implies.
        let mut seen = BTreeSet::new();
        let mut queue = up(r);
        let mut tops = BTreeSet::new();
        while let Some(k) = queue.pop() {
            assert_ne!(&k, start, "{} {} implies itself through others", r.class, r.permission);
            if !seen.insert(k.clone()) {
                continue;
            }
            let next = up(&rows[&k]);
            if next.is_empty() {
                tops.insert(k);
            }
            queue.extend(next);
        }
        if !start.1.eq("CONTROL SERVER") {
            assert_eq!(
                tops,
                BTreeSet::from([key("SERVER", "CONTROL SERVER")]),
                "{} {}",
                r.class,
                r.permission
            );
        }
    }
}

#[test]
fn every_class_the_audit_judges_is_in_the_snapshot_with_control() {
    let rows = rows();
    for class in [
        "SERVER",
        "DATABASE",
        "SCHEMA",
        "OBJECT",
        "USER",
        "ROLE",
        "APPLICATION ROLE",
        "LOGIN",
        "SERVER ROLE",
        "CERTIFICATE",
        "ASYMMETRIC KEY",
        "SYMMETRIC KEY",
        "TYPE",
        "XML SCHEMA COLLECTION",
        "ASSEMBLY",
        "AVAILABILITY GROUP",
        "ENDPOINT",
    ] {
        let control = if class == "SERVER" { "CONTROL SERVER" } else { "CONTROL" };
        assert!(rows.contains_key(&key(class, control)), "{class} has no {control}");
        // CONTROL on a securable implies every permission on it.
        for r in rows.values().filter(|r| r.class == class) {
            assert!(
                implies(class, control, class, r.permission),
                "{class}: {}",
                r.permission
            );
            assert!(
                implies("SERVER", "CONTROL SERVER", class, r.permission),
                "{class}: {}",
                r.permission
            );
        }
    }
}

#[test]
fn the_documented_examples_hold() {
    // Permissions (Database Engine): CONTROL on a schema implies CONTROL on
    // a table, and CONTROL on a table implies SELECT.
    assert!(implies("SCHEMA", "CONTROL", "OBJECT", "CONTROL"));
    assert!(implies("OBJECT", "CONTROL", "OBJECT", "SELECT"));
    // ALTER permission on a schema includes the ability to create, alter and
    // drop objects in it; ALTER ANY SCHEMA is ALTER on every schema.
    assert!(implies("SCHEMA", "ALTER", "OBJECT", "ALTER"));
    assert!(implies("DATABASE", "ALTER ANY SCHEMA", "SCHEMA", "ALTER"));
    // GRANT Database Permissions: ALTER implies ALTER ANY USER, ROLE, SCHEMA.
    for p in [
        "ALTER ANY USER",
        "ALTER ANY ROLE",
        "ALTER ANY SCHEMA",
        "ALTER ANY APPLICATION ROLE",
    ] {
        assert!(implies("DATABASE", "ALTER", "DATABASE", p), "{p}");
    }
    // A read right gives no write.
    assert!(!implies("DATABASE", "VIEW DEFINITION", "OBJECT", "UPDATE"));
    assert!(!implies("DATABASE", "SELECT", "OBJECT", "UPDATE"));
    assert!(!implies("SCHEMA", "EXECUTE", "OBJECT", "ALTER"));
}
