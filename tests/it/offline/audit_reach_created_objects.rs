//! Objects a principal creates, and grants on synonyms for code, on layouts
//! written from Microsoft's documentation of SQL Server:
//!
//! - "CREATE SCHEMA" / "Ownership and user-schema separation": an object
//!   created in a schema belongs to the schema's owner, not its creator.
//!   "CREATE VIEW", "CREATE FUNCTION", "CREATE SYNONYM" and "CREATE TABLE"
//!   each need their CREATE permission on the database and ALTER on the
//!   schema; "CREATE TRIGGER": a DML trigger needs ALTER on its table.
//! - "GRANT Schema Permissions" / "Permissions (Database Engine)": ALTER on a
//!   schema implies ALTER on its objects, never INSERT, UPDATE, DELETE or
//!   EXECUTE, which only CONTROL on the schema (or the same right on the
//!   schema or the database) implies. So a creator that is not the owner
//!   gets past the check on what it created only by such a right.
//! - "Ownership Chains": a statement through the new object reaches a fence
//!   table of the same owner unchecked.
//! - "Synonyms (Database Engine)": a right on a synonym is checked there,
//!   and its base object, of the same owner, is not checked.
//! - "Qualifying Names Inside Stored Procedures": a DDL statement's one-part
//!   name, and `db..t` (the database's default schema), resolve in the
//!   default schema of the user the module runs as; `DROP TABLE` takes a
//!   list.
//!
//! Each positive layout must name `etl` with its path; each control of the
//! same shape must leave it unnamed.

use crate::support;

use super::audit_reach_lending_modules::with_etl;

use fencepost::audit::{Catalog, ObjectKind, Rule, Schema, Securable};
use support::fixtures::*;

const WRITE: &str = "write the fence tables";
const ADMIN: &str = "run fence_admin procedures";

/// `etl`, and an empty schema `staging` owned by `owner`, on which `etl`
/// holds ALTER, `create` on the database and each of `rights` on the
/// schema.
fn staging(owner: &str, create: &str, rights: &[&str]) -> Catalog {
    let mut c = with_etl();
    if owner != "dbo" {
        c.principals.push(user(owner, None));
    }
    c.schemas.push(Schema {
        name: "staging".into(),
        owner: owner.into(),
    });
    c.permissions.push(grant("etl", create, Securable::Database));
    c.permissions.push(grant("etl", "ALTER", schema("staging")));
    for r in rights {
        c.permissions.push(grant("etl", r, schema("staging")));
    }
    c
}

/// The paths of the findings naming `who` for `goal`, each joined: FP027's
/// own, or another rule's that names `who` first and gains the path.
fn paths(c: &Catalog, who: &str, goal: &str) -> Vec<String> {
    check(c)
        .findings
        .into_iter()
        .filter(|f| {
            f.principal
                .as_deref()
                .is_some_and(|p| p.split(", ").any(|n| n.eq_ignore_ascii_case(who)))
        })
        .filter(|f| !f.path.is_empty())
        .filter(|f| f.rule != Rule::ReachesFence || f.permission.as_deref() == Some(goal))
        .map(|f| step_texts(&f).join(" | "))
        .collect()
}

fn named(c: &Catalog, who: &str, goal: &str, through: &[&str]) {
    let found = paths(c, who, goal);
    assert!(
        found.iter().any(|steps| through.iter().all(|t| steps.contains(t))),
        "{who} is not named for {goal} through {through:?}: {found:#?}\n{:#?}",
        check(c)
    );
}

fn unnamed(c: &Catalog, who: &str, goal: &str) {
    let found = paths(c, who, goal);
    assert!(found.is_empty(), "{who} is named for {goal}: {found:#?}");
}

// ---- 1a. A DML trigger.

/// Already followed: ALTER on a table dbo owns (here through ALTER on its
/// schema) is writing the fence, a trigger added there running in dbo's
/// chain, whoever fires it.
#[test]
fn alter_on_a_schema_holding_a_dbo_table_writes_the_fence_by_a_trigger_on_it() {
    let mut c = staging("dbo", "CONNECT", &[]);
    c.objects.push(module(
        "staging",
        "Orders",
        ObjectKind::Table,
        "CREATE TABLE staging.Orders (Id int)",
    ));
    named(
        &c,
        "etl",
        WRITE,
        &["ALTER on staging.Orders", "a trigger it adds there"],
    );
}

#[test]
fn control_alter_on_a_schema_holding_a_table_of_another_owner_writes_nothing() {
    let mut c = staging("loader", "CONNECT", &[]);
    c.objects.push(module(
        "staging",
        "Orders",
        ObjectKind::Table,
        "CREATE TABLE staging.Orders (Id int)",
    ));
    unnamed(&c, "etl", WRITE);
}

/// CREATE TABLE and ALTER on an empty schema dbo owns: the table is dbo's,
/// a trigger etl adds to it (ALTER on the table, by the schema) runs in
/// dbo's chain, and etl fires it by INSERT on the schema.
#[test]
fn create_table_with_alter_and_insert_on_an_empty_dbo_schema_writes_the_fence_by_its_trigger() {
    let c = staging("dbo", "CREATE TABLE", &["INSERT"]);
    named(&c, "etl", WRITE, &["CREATE TABLE", "SCHEMA::staging", "trigger"]);
}

/// Control: ALTER on the schema gives ALTER on the table, not INSERT: etl
/// adds a trigger that no one fires.
#[test]
fn control_create_table_with_alter_alone_on_an_empty_dbo_schema_writes_nothing() {
    let c = staging("dbo", "CREATE TABLE", &["SELECT"]);
    unnamed(&c, "etl", WRITE);
}

// ---- 1b. A view, an inline function, a synonym.

#[test]
fn create_view_with_alter_and_update_on_an_empty_dbo_schema_writes_the_fence_through_it() {
    let c = staging("dbo", "CREATE VIEW", &["UPDATE"]);
    named(&c, "etl", WRITE, &["CREATE VIEW", "SCHEMA::staging", "UPDATE"]);
}

/// Control: ALTER on a schema implies no data right on what is in it, so
/// the view etl creates refuses its UPDATE.
#[test]
fn control_create_view_with_alter_and_select_on_an_empty_dbo_schema_writes_nothing() {
    let c = staging("dbo", "CREATE VIEW", &["SELECT"]);
    unnamed(&c, "etl", WRITE);
}

/// Control: the view would be owned by another user, so the chain to the
/// fence tables breaks.
#[test]
fn control_create_view_with_alter_and_update_on_a_schema_of_another_owner_writes_nothing() {
    let c = staging("loader", "CREATE VIEW", &["UPDATE"]);
    unnamed(&c, "etl", WRITE);
}

/// An inline table-valued function is updatable as a view is.
#[test]
fn create_function_with_alter_and_delete_on_an_empty_dbo_schema_writes_the_fence_through_an_inline_function() {
    let c = staging("dbo", "CREATE FUNCTION", &["DELETE"]);
    named(&c, "etl", WRITE, &["CREATE FUNCTION", "SCHEMA::staging", "DELETE"]);
}

/// Control: EXECUTE runs a function, which cannot change the database's
/// state ("CREATE FUNCTION").
#[test]
fn control_create_function_with_alter_and_execute_on_an_empty_dbo_schema_writes_nothing() {
    let c = staging("dbo", "CREATE FUNCTION", &["EXECUTE"]);
    unnamed(&c, "etl", WRITE);
}

#[test]
fn create_synonym_with_alter_and_insert_on_an_empty_dbo_schema_writes_the_fence_through_it() {
    let c = staging("dbo", "CREATE SYNONYM", &["INSERT"]);
    named(&c, "etl", WRITE, &["CREATE SYNONYM", "SCHEMA::staging", "INSERT"]);
}

#[test]
fn control_create_synonym_with_alter_and_insert_on_a_schema_of_another_owner_writes_nothing() {
    let c = staging("loader", "CREATE SYNONYM", &["INSERT"]);
    unnamed(&c, "etl", WRITE);
}

/// A synonym for a fence_admin procedure dbo owns, run by EXECUTE on the
/// schema.
#[test]
fn create_synonym_with_alter_and_execute_on_an_empty_dbo_schema_runs_fence_admin() {
    let c = staging("dbo", "CREATE SYNONYM", &["EXECUTE"]);
    named(&c, "etl", ADMIN, &["CREATE SYNONYM", "SCHEMA::staging", "EXECUTE"]);
}

#[test]
fn control_create_synonym_with_alter_and_execute_on_a_schema_of_another_owner_runs_nothing() {
    let c = staging("loader", "CREATE SYNONYM", &["EXECUTE"]);
    unnamed(&c, "etl", ADMIN);
}

// ---- 2. Grants on a synonym for code that reaches the fence.

/// A dbo procedure that writes a fence table, and a synonym `dbo.Bump`
/// for it owned by `synonym_owner` (None: the schema's owner, dbo).
fn synonym_for_procedure(synonym_owner: Option<&str>) -> Catalog {
    let mut c = with_etl();
    c.objects.push(module(
        "dbo",
        "BumpGeneration",
        ObjectKind::Procedure,
        "CREATE PROCEDURE dbo.BumpGeneration @Id bigint AS \
         UPDATE fence.Resource SET Generation = Generation + 1 WHERE ResourceId = @Id;",
    ));
    let mut s = module("dbo", "Bump", ObjectKind::Synonym, "[dbo].[BumpGeneration]");
    if let Some(o) = synonym_owner {
        c.principals.push(user(o, None));
        s.owner = Some(o.into());
    }
    c.objects.push(s);
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "Bump")));
    c
}

#[test]
fn execute_on_a_dbo_synonym_for_a_procedure_writing_the_fence_names_the_grantee() {
    let c = synonym_for_procedure(None);
    named(
        &c,
        "etl",
        WRITE,
        &["EXECUTE on the synonym dbo.Bump", "dbo.BumpGeneration"],
    );
}

/// Control: a synonym of another owner breaks the chain, and etl holds
/// nothing on the procedure.
#[test]
fn control_execute_on_a_synonym_of_another_owner_for_a_writing_procedure_writes_nothing() {
    let c = synonym_for_procedure(Some("loader"));
    unnamed(&c, "etl", WRITE);
}

/// A dbo view over fence.Resource, `definition`, and a dbo synonym
/// `dbo.Leases` for it on which etl holds UPDATE.
fn synonym_for_view(definition: &str) -> Catalog {
    let mut c = with_etl();
    c.objects.push(module("dbo", "LeaseView", ObjectKind::View, definition));
    c.objects
        .push(module("dbo", "Leases", ObjectKind::Synonym, "[dbo].[LeaseView]"));
    c.permissions.push(grant("etl", "UPDATE", object("dbo", "Leases")));
    c
}

#[test]
fn update_on_a_dbo_synonym_for_an_updatable_view_over_the_fence_names_the_grantee() {
    let c = synonym_for_view("CREATE VIEW dbo.LeaseView AS SELECT ResourceId, Generation FROM fence.Resource;");
    named(&c, "etl", WRITE, &["UPDATE on the synonym dbo.Leases", "dbo.LeaseView"]);
}

/// Control: a view that aggregates is read-only ("Modify Data Through a
/// View").
#[test]
fn control_update_on_a_dbo_synonym_for_a_read_only_view_writes_nothing() {
    let c = synonym_for_view("CREATE VIEW dbo.LeaseView AS SELECT COUNT(*) AS Leases FROM fence.Resource;");
    unnamed(&c, "etl", WRITE);
}

// ---- 3. DDL names in module text.

/// dbo.Purge runs as `janitor` (default schema fence, ALTER on it), whose
/// text is `body`; etl may run it.
fn purge_as_janitor(body: &str) -> Catalog {
    let mut c = with_etl();
    let mut janitor = user("janitor", None);
    janitor.default_schema = Some("fence".into());
    c.principals.push(janitor);
    c.permissions.push(grant("janitor", "ALTER", schema("fence")));
    let mut purge = module(
        "dbo",
        "Purge",
        ObjectKind::Procedure,
        &format!("CREATE PROCEDURE dbo.Purge WITH EXECUTE AS 'janitor' AS {body}"),
    );
    purge.execute_as = Some("janitor".into());
    c.objects.push(purge);
    c.permissions.push(grant("etl", "EXECUTE", object("dbo", "Purge")));
    c
}

/// `DROP TABLE a, b` drops every table in the list.
#[test]
fn every_table_of_a_drop_table_list_is_read() {
    let c = purge_as_janitor("TRUNCATE TABLE Scratch; DROP TABLE Scratch, Resource;");
    named(&c, "etl", WRITE, &["dbo.Purge writes fence.Resource"]);
}

#[test]
fn control_a_drop_table_list_without_a_fence_table_writes_nothing() {
    let c = purge_as_janitor("TRUNCATE TABLE Scratch; DROP TABLE Scratch, Other;");
    unnamed(&c, "etl", WRITE);
}

/// `orders..Resource` leaves the schema out: in this database it resolves
/// as the one-part name does.
#[test]
fn a_ddl_name_with_this_database_and_no_schema_resolves_as_a_one_part_name() {
    let c = purge_as_janitor("TRUNCATE TABLE orders..Resource;");
    named(&c, "etl", WRITE, &["dbo.Purge writes fence.Resource"]);
}

/// Control: `archive..Resource` is a table of another database.
#[test]
fn control_a_ddl_name_with_another_database_and_no_schema_names_no_fence_table() {
    let c = purge_as_janitor("TRUNCATE TABLE archive..Resource;");
    unnamed(&c, "etl", WRITE);
}
