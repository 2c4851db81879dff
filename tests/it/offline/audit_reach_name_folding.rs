//! Names in module text compared as the database's collation may compare
//! them. SQL Server compares identifiers by the database's collation
//! ("Database Identifiers", "Collation and Unicode support"): a Windows
//! collation without `_WS` does not tell full-width letters from their
//! ASCII forms, one with `_AI` does not tell accented letters from plain
//! ones, and every `_CI` collation folds case beyond ASCII. A module that
//! spells a fence table so still writes it; the audit folds width, accents
//! and case before it compares, so it never reads such a module as clean.

use crate::support;

use fencepost::audit::{Catalog, ObjectKind, Schema};
use support::fixtures::*;

/// The clean deployment with `etl`, a login that is no service, allowed to
/// run `dbo.Nightly` whose text is `body`.
fn running(body: &str) -> Catalog {
    let mut c = clean();
    c.principals.push(user("etl", Some("etl")));
    c.permissions
        .push(grant("etl", "CONNECT", fencepost::audit::Securable::Database));
    c.objects.push(module(
        "dbo",
        "Nightly",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE dbo.Nightly @Id bigint AS {body}"),
    ));
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "Nightly")));
    c
}

/// Whether FP027 names `principal` as writing the fence tables.
fn named_writer(c: &Catalog, principal: &str) -> bool {
    reaching(c, principal)
        .iter()
        .any(|f| f.permission.as_deref() == Some("write the fence tables"))
}

#[test]
fn a_fence_table_spelled_in_full_width_letters_is_written() {
    let c = running("UPDATE ｆｅｎｃｅ.Ｒｅｓｏｕｒｃｅ SET Generation = Generation + 1 WHERE ResourceId = @Id;");
    assert!(named_writer(&c, "etl"), "{:#?}", check(&c));
}

#[test]
fn a_fence_table_spelled_with_accents_is_written() {
    let c = running("UPDATE fence.Résource SET Generation = Generation + 1 WHERE ResourceId = @Id;");
    assert!(named_writer(&c, "etl"), "{:#?}", check(&c));
}

#[test]
fn a_one_part_execute_of_an_accented_name_runs_that_procedure() {
    // "Qualifying Names Inside Stored Procedures": `EXEC écrire` resolves
    // in the caller's default schema, which any user may set to ops; the
    // procedure of that name there, owned by dbo too, writes.
    let mut c = running("EXEC écrire @Id = @Id;");
    c.schemas.push(Schema {
        name: "ops".into(),
        owner: "dbo".into(),
    });
    c.objects.push(module(
        "ops",
        "Écrire",
        ObjectKind::Procedure,
        "CREATE PROCEDURE ops.Écrire @Id bigint AS \
         UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    ));
    assert!(named_writer(&c, "etl"), "{:#?}", check(&c));
}

#[test]
fn control_a_name_that_differs_by_a_letter_is_not_the_fence_table() {
    let c = running("UPDATE dbo.Ｒｅｓｓｏｕｒｃｅ SET Generation = 1; UPDATE fence.Ressource SET Generation = 1;");
    assert!(!named_writer(&c, "etl"), "{:#?}", check(&c));
}

#[test]
fn a_fence_table_spelled_with_a_dotless_i_is_written() {
    // Turkish_CI_AS lower-cases I to ı (U+0131).
    let c = running("DELETE FROM fence.Databaseıdentity;");
    assert!(named_writer(&c, "etl"), "{:#?}", check(&c));
}

#[test]
fn a_fence_table_spelled_with_a_soft_hyphen_is_written() {
    let c = running("UPDATE fence.Re\u{ad}source SET Generation = 1;");
    assert!(named_writer(&c, "etl"), "{:#?}", check(&c));
}
