//! FP027 through assemblies, SAFE ones included, on layouts written from
//! Microsoft's documentation ("ALTER ASSEMBLY": FROM replaces the code of
//! the assembly, and with it what every CLR module it holds runs; ALTER on
//! an assembly is implied by CONTROL on it, which its owner holds, and by
//! ALTER ANY ASSEMBLY on the database; SAFE code runs inside the server
//! with the context of whoever runs the module). The modules are dbo's,
//! in dbo's schema: only the assembly lets anyone change them.

use crate::support;

use fencepost::audit::{Assembly, Catalog, ObjectKind, Securable, TableExpression};
use support::fixtures::*;

/// A SAFE assembly `Utils` owned by devlead, holding `dbo.Checksum` (a
/// function) and `dbo.Compress` (a procedure).
fn utils(c: &mut Catalog, owner: &str) {
    c.principals.push(user("devlead", Some("devlead")));
    c.assemblies = Some(vec![Assembly {
        name: "Utils".into(),
        owner: Some(owner.into()),
        permission_set: "SAFE_ACCESS".into(),
    }]);
    for (name, kind) in [("Checksum", ObjectKind::Function), ("Compress", ObjectKind::Procedure)] {
        let mut clr = module("dbo", name, kind, "");
        clr.definition = None;
        clr.assembly = Some("Utils (SAFE_ACCESS)".into());
        c.objects.push(clr);
    }
}

fn check_calls_checksum(c: &mut Catalog) {
    c.table_expressions = Some(vec![TableExpression {
        table: "fence.Resource".into(),
        kind: "CHECK".into(),
        name: "CK_Resource_Sum".into(),
        definition: "([dbo].[Checksum]([ResourceKey])=(1))".into(),
    }]);
}

#[test]
fn the_owner_of_a_safe_assembly_rewrites_a_function_a_fence_check_calls() {
    let mut c = clean();
    utils(&mut c, "devlead");
    check_calls_checksum(&mut c);
    let f = reaching(&c, "devlead");
    assert_eq!(f.len(), 1, "{:#?}", check(&c));
    assert_eq!(
        step_texts(&f[0])[0],
        "ALTER on ASSEMBLY::Utils (by the hierarchy: devlead owns ASSEMBLY::Utils, which implies ALTER on \
         ASSEMBLY::Utils), which holds the code of dbo.Checksum (ALTER ASSEMBLY ... FROM), which CHECK \
         CK_Resource_Sum of fence.Resource calls: its rewrite runs inside every write the shipped procedures make \
         to fence.Resource, deciding what a DEFAULT writes or refusing the write"
    );
    assert_eq!(f[0].fix, "ALTER AUTHORIZATION ON ASSEMBLY::[Utils] TO [dbo];");
}

#[test]
fn alter_granted_on_the_assembly_rewrites_a_procedure_a_ddl_trigger_calls() {
    let mut c = clean();
    utils(&mut c, "dbo");
    c.principals.push(user("intern", Some("intern")));
    c.permissions.push(grant(
        "intern",
        "ALTER",
        Securable::Other {
            class_desc: "ASSEMBLY".into(),
            name: Some("Utils".into()),
        },
    ));
    c.objects.push(module(
        "",
        "compress_ddl",
        ObjectKind::DatabaseTrigger,
        "CREATE TRIGGER compress_ddl ON DATABASE FOR DDL_DATABASE_LEVEL_EVENTS AS EXEC dbo.Compress;",
    ));
    let f = reaching(&c, "intern");
    assert!(!f.is_empty(), "{:#?}", check(&c));
    assert_eq!(
        step_texts(&f[0])[..2],
        [
            "ALTER on ASSEMBLY::Utils, which holds the code of dbo.Compress (ALTER ASSEMBLY ... FROM): may rewrite it",
            "dbo.Compress is run by the DDL trigger compress_ddl, which fires on the deploy's DDL and runs as that \
             member of db_owner"
        ]
    );
}

#[test]
fn an_assembly_nothing_runs_or_that_dbo_owns_stays_clean_and_unread_owners_are_unverified() {
    // Owned by devlead, but no expression, trigger or job runs its code.
    let mut c = clean();
    utils(&mut c, "devlead");
    assert!(reaching(&c, "devlead").is_empty(), "{:#?}", check(&c));
    // Called by a fence CHECK, but owned by dbo, which is trusted.
    let mut c = clean();
    utils(&mut c, "dbo");
    check_calls_checksum(&mut c);
    assert!(reaching(&c, "devlead").is_empty(), "{:#?}", check(&c));
    // Owners unread while CLR modules exist: FP027 cannot be proven.
    c.assemblies = None;
    let report = check(&c);
    assert!(
        report
            .cannot_verify
            .iter()
            .any(|u| u.rule.id() == "FP027" && u.reason.contains("sys.assemblies")),
        "{report:#?}"
    );
}
