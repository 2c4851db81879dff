//! SQL Server's permission hierarchy, as data: which permission implies
//! which. A permission is implied by its covering permission on the same
//! securable class (ALTER ANY ROLE by ALTER on the database) and by its
//! parent permission on the class that contains it (ALTER on a schema by
//! ALTER ANY SCHEMA on the database, UPDATE on a table by UPDATE on its
//! schema), up to CONTROL SERVER. The rules ask [`implies`] rather than
//! match permission names, so a grant of a covering permission is judged
//! by what it gives.
//!
//! The rows are a snapshot of `sys.fn_builtin_permissions(DEFAULT)` written
//! from Microsoft's documentation (`permissions.tsv` says which pages and
//! version), shipped with the crate so the rules stay a pure function of the
//! catalog; a live test compares it with the engine's own function where the
//! engine has one.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

const SNAPSHOT: &str = include_str!("permissions.tsv");

/// One row of `sys.fn_builtin_permissions(DEFAULT)`: a permission on a
/// securable class and what implies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BuiltinPermission {
    /// The securable class (`DATABASE`, `SCHEMA`, `OBJECT`, `USER`, ...).
    pub class: &'static str,
    /// The permission (`ALTER ANY SCHEMA`).
    pub permission: &'static str,
    /// The permission on the same class that implies this one; `None` for
    /// the class's top permission (CONTROL, CONTROL SERVER).
    pub covering: Option<&'static str>,
    /// The class that contains this one; `None` for SERVER.
    pub parent_class: Option<&'static str>,
    /// The permission on the parent class that implies this one.
    pub parent_covering: Option<&'static str>,
    /// The SQL Server version that added it, when newer than 2019 (`2022`):
    /// an older engine does not list it.
    pub since: Option<&'static str>,
}

struct Snapshot {
    rows: Vec<BuiltinPermission>,
    /// For each (class, permission), upper-cased: the permissions that
    /// imply it directly.
    up: HashMap<(String, String), Vec<(String, String)>>,
}

fn snapshot() -> &'static Snapshot {
    static SNAPSHOT_ROWS: OnceLock<Snapshot> = OnceLock::new();
    SNAPSHOT_ROWS.get_or_init(|| {
        let field = |f: Option<&'static str>| f.map(str::trim).filter(|f| !f.is_empty());
        let rows: Vec<BuiltinPermission> = SNAPSHOT
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|l| {
                let mut f = l.split('\t');
                BuiltinPermission {
                    class: field(f.next()).expect("permissions.tsv: a row without a class"),
                    permission: field(f.next()).expect("permissions.tsv: a row without a permission"),
                    covering: field(f.next()),
                    parent_class: field(f.next()),
                    parent_covering: field(f.next()),
                    since: field(f.next()),
                }
            })
            .collect();
        let mut up: HashMap<(String, String), Vec<(String, String)>> = HashMap::new();
        for r in &rows {
            let edges = up.entry(key(r.class, r.permission)).or_default();
            if let Some(c) = r.covering {
                edges.push(key(r.class, c));
            }
            if let (Some(pc), Some(pp)) = (r.parent_class, r.parent_covering) {
                edges.push(key(pc, pp));
            }
        }
        Snapshot { rows, up }
    })
}

fn key(class: &str, permission: &str) -> (String, String) {
    (class_name(class), permission.trim().to_uppercase())
}

/// Every row of the snapshot, in file order.
pub fn builtin_permissions() -> &'static [BuiltinPermission] {
    &snapshot().rows
}

/// The class name `sys.fn_builtin_permissions` uses for a `class_desc` of
/// `sys.database_permissions` or `sys.server_permissions`
/// (`OBJECT_OR_COLUMN` is `OBJECT`, `SYMMETRIC_KEYS` is `SYMMETRIC KEY`).
/// `DATABASE_PRINCIPAL` and `SERVER_PRINCIPAL` stay as they are: which
/// class they are (USER, ROLE, LOGIN, SERVER ROLE) depends on the principal.
pub fn class_name(class_desc: &str) -> String {
    let spaced = class_desc.trim().to_uppercase().replace('_', " ");
    match spaced.as_str() {
        "OBJECT OR COLUMN" => "OBJECT".into(),
        "SERVICE CONTRACT" => "CONTRACT".into(),
        "SYMMETRIC KEYS" => "SYMMETRIC KEY".into(),
        "DATABASE PRINCIPAL" => "DATABASE_PRINCIPAL".into(),
        "SERVER PRINCIPAL" => "SERVER_PRINCIPAL".into(),
        _ => spaced,
    }
}

/// Whether holding `held_permission` on a securable of `held_class` gives
/// `wanted_permission` on securables of `wanted_class` inside it (the same
/// securable, or one it contains): reflexive, and following covering
/// permissions within a class and parent permissions up the class chain.
/// CONTROL on a database implies every permission on every schema and object
/// in it; ALTER on a database implies ALTER ANY SCHEMA, which implies ALTER
/// on every schema; CONTROL SERVER implies everything. A permission the
/// snapshot does not know implies only itself.
pub fn implies(held_class: &str, held_permission: &str, wanted_class: &str, wanted_permission: &str) -> bool {
    let held = key(held_class, held_permission);
    implying_keys(wanted_class, wanted_permission).contains(&held)
}

/// Every (class, permission) that implies `wanted_permission` on
/// `wanted_class`, itself included, upper-cased.
pub fn implying(wanted_class: &str, wanted_permission: &str) -> BTreeSet<(String, String)> {
    implying_keys(wanted_class, wanted_permission).as_ref().clone()
}

/// [`implying`], walked once for each permission asked about: the audit
/// asks about the same few permissions for every pair of principal and
/// securable, and the walk, not the lookup, is what a large catalog paid for.
fn implying_keys(wanted_class: &str, wanted_permission: &str) -> Arc<BTreeSet<(String, String)>> {
    type Closures = Mutex<HashMap<(String, String), Arc<BTreeSet<(String, String)>>>>;
    static CLOSURES: OnceLock<Closures> = OnceLock::new();
    let wanted = key(wanted_class, wanted_permission);
    let closures = CLOSURES.get_or_init(Closures::default);
    if let Some(known) = closures.lock().unwrap_or_else(|e| e.into_inner()).get(&wanted) {
        return Arc::clone(known);
    }
    let walked = Arc::new(walk_up(wanted.clone()));
    closures
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(wanted, Arc::clone(&walked));
    walked
}

fn walk_up(wanted: (String, String)) -> BTreeSet<(String, String)> {
    let up = &snapshot().up;
    let mut seen = BTreeSet::new();
    let mut queue = vec![wanted];
    while let Some(k) = queue.pop() {
        if let Some(next) = up.get(&k) {
            queue.extend(next.iter().filter(|n| !seen.contains(*n)).cloned());
        }
        seen.insert(k);
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_implies_itself_and_one_the_snapshot_does_not_know_only_itself() {
        assert!(implies("OBJECT", "UPDATE", "OBJECT", "UPDATE"));
        assert!(implies("OBJECT", "MADE UP", "OBJECT", "made up"));
        assert!(!implies("OBJECT", "MADE UP", "OBJECT", "UPDATE"));
    }

    #[test]
    fn control_on_a_database_implies_everything_on_its_schemas_and_objects() {
        // "CONTROL on a database implies all permissions on the database, all
        // permissions on all assemblies in the database, all permissions on all
        // schemas in the database, and all permissions on objects within all
        // schemas" (Permissions (Database Engine), naming conventions).
        for p in [
            "UPDATE",
            "INSERT",
            "DELETE",
            "ALTER",
            "TAKE OWNERSHIP",
            "EXECUTE",
            "SELECT",
        ] {
            assert!(implies("DATABASE", "CONTROL", "OBJECT", p), "{p}");
            assert!(implies("DATABASE", "CONTROL", "SCHEMA", p), "{p}");
        }
        assert!(implies("DATABASE", "CONTROL", "ASSEMBLY", "ALTER"));
        assert!(implies("DATABASE", "CONTROL", "USER", "IMPERSONATE"));
        assert!(implies("DATABASE", "CONTROL", "CERTIFICATE", "CONTROL"));
    }

    #[test]
    fn alter_on_a_database_implies_the_alter_any_permissions_and_alter_on_every_schema() {
        // GRANT Database Permissions: ALTER ANY ROLE, USER, SCHEMA,
        // APPLICATION ROLE and CREATE PROCEDURE are implied by ALTER.
        for p in [
            "ALTER ANY ROLE",
            "ALTER ANY USER",
            "ALTER ANY SCHEMA",
            "ALTER ANY APPLICATION ROLE",
            "CREATE PROCEDURE",
            "CREATE SCHEMA",
        ] {
            assert!(implies("DATABASE", "ALTER", "DATABASE", p), "{p}");
        }
        // GRANT Schema Permissions: ALTER on a schema is implied by ALTER ANY
        // SCHEMA; GRANT Object Permissions: ALTER on an object by ALTER on its schema.
        assert!(implies("DATABASE", "ALTER ANY SCHEMA", "SCHEMA", "ALTER"));
        assert!(implies("DATABASE", "ALTER ANY SCHEMA", "OBJECT", "ALTER"));
        assert!(implies("DATABASE", "ALTER", "OBJECT", "ALTER"));
        assert!(implies("DATABASE", "ALTER ANY USER", "USER", "ALTER"));
        assert!(implies("DATABASE", "ALTER ANY ROLE", "ROLE", "ALTER"));
        // ALTER gives neither data nor ownership nor impersonation.
        assert!(!implies("DATABASE", "ALTER", "OBJECT", "UPDATE"));
        assert!(!implies("DATABASE", "ALTER", "SCHEMA", "TAKE OWNERSHIP"));
        assert!(!implies("DATABASE", "ALTER", "USER", "IMPERSONATE"));
        assert!(!implies("DATABASE", "ALTER", "DATABASE", "CONTROL"));
    }

    #[test]
    fn data_permissions_flow_down_from_the_database_and_schema_but_not_sideways() {
        assert!(implies("DATABASE", "UPDATE", "OBJECT", "UPDATE"));
        assert!(implies("SCHEMA", "UPDATE", "OBJECT", "UPDATE"));
        assert!(implies("SCHEMA", "CONTROL", "OBJECT", "DELETE"));
        assert!(!implies("SCHEMA", "SELECT", "OBJECT", "UPDATE"));
        assert!(!implies("OBJECT", "UPDATE", "SCHEMA", "UPDATE"));
        // VIEW DEFINITION implies no write, and EXECUTE no ALTER.
        for p in ["UPDATE", "INSERT", "ALTER", "CONTROL", "TAKE OWNERSHIP"] {
            assert!(!implies("DATABASE", "VIEW DEFINITION", "OBJECT", p), "{p}");
            assert!(!implies("SCHEMA", "EXECUTE", "OBJECT", p), "{p}");
        }
    }

    #[test]
    fn control_server_implies_everything_in_every_database() {
        for (class, p) in [
            ("OBJECT", "UPDATE"),
            ("SCHEMA", "ALTER"),
            ("DATABASE", "CONTROL"),
            ("USER", "IMPERSONATE"),
            ("LOGIN", "IMPERSONATE"),
            ("SERVER ROLE", "ALTER"),
            ("AVAILABILITY GROUP", "ALTER"),
            ("SERVER", "ALTER ANY LOGIN"),
        ] {
            assert!(implies("SERVER", "CONTROL SERVER", class, p), "{class} {p}");
        }
        // ALTER ANY DATABASE is ALTER on every database, and so on every schema.
        assert!(implies("SERVER", "ALTER ANY DATABASE", "DATABASE", "ALTER ANY ROLE"));
        assert!(implies("SERVER", "ALTER ANY DATABASE", "SCHEMA", "ALTER"));
        assert!(!implies("SERVER", "ALTER ANY DATABASE", "OBJECT", "UPDATE"));
        // GRANT Server Permissions: VIEW SERVER STATE is implied by ALTER
        // SERVER STATE, CREATE ANY DATABASE by ALTER ANY DATABASE.
        assert!(implies("SERVER", "ALTER SERVER STATE", "SERVER", "VIEW SERVER STATE"));
        assert!(implies("SERVER", "ALTER ANY DATABASE", "SERVER", "CREATE ANY DATABASE"));
        assert!(implies(
            "SERVER",
            "VIEW SERVER STATE",
            "DATABASE",
            "VIEW DATABASE STATE"
        ));
        assert!(implies("SERVER", "AUTHENTICATE SERVER", "DATABASE", "AUTHENTICATE"));
        assert!(!implies("SERVER", "VIEW ANY DEFINITION", "OBJECT", "SELECT"));
    }

    #[test]
    fn principals_and_keys_are_controlled_from_the_database() {
        // GRANT Database Principal Permissions: IMPERSONATE on a user is
        // implied by CONTROL on it and by CONTROL on the database only.
        assert!(implies("USER", "CONTROL", "USER", "IMPERSONATE"));
        assert!(!implies("USER", "ALTER", "USER", "IMPERSONATE"));
        assert!(!implies("DATABASE", "ALTER ANY USER", "USER", "IMPERSONATE"));
        assert!(implies("ROLE", "CONTROL", "ROLE", "TAKE OWNERSHIP"));
        assert!(implies(
            "DATABASE",
            "ALTER ANY APPLICATION ROLE",
            "APPLICATION ROLE",
            "ALTER"
        ));
        assert!(implies("DATABASE", "ALTER ANY CERTIFICATE", "CERTIFICATE", "ALTER"));
        assert!(!implies("DATABASE", "ALTER ANY CERTIFICATE", "CERTIFICATE", "CONTROL"));
        assert!(implies("LOGIN", "CONTROL", "LOGIN", "IMPERSONATE"));
        assert!(implies("SERVER", "ALTER ANY SERVER ROLE", "SERVER ROLE", "ALTER"));
    }

    #[test]
    fn catalog_class_descs_are_named_as_the_builtin_function_names_them() {
        assert_eq!(class_name("OBJECT_OR_COLUMN"), "OBJECT");
        assert_eq!(class_name("SYMMETRIC_KEYS"), "SYMMETRIC KEY");
        assert_eq!(class_name("XML_SCHEMA_COLLECTION"), "XML SCHEMA COLLECTION");
        assert_eq!(class_name("SERVICE_CONTRACT"), "CONTRACT");
        assert!(implies("object_or_column", "update", "OBJECT", "UPDATE"));
    }
}
