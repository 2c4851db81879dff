//! `fencepost script --schemas`: the first step of the two-step path for a
//! DBA who will not give the deployer rights over the whole database. The
//! DBA creates the three fence schemas and the four fence roles, all owned
//! by dbo; the deployer then needs rights on those schemas only (and CREATE
//! TABLE and CREATE PROCEDURE, which SQL Server grants on the database
//! alone), which `fencepost status` names. A later deploy finds them in
//! place: migration V1 creates its schemas only while they are missing
//! (src/deploy/upgrade.rs), and the role script creates only missing roles.

use std::fmt::Write;

use crate::deploy::upgrade::create_schema_unless_there;
use crate::schema::FENCE_SCHEMAS;
use crate::source::Sources;

/// The permission script that creates the roles.
const ROLES_SCRIPT: &str = "010_roles.sql";

/// The script: the schemas, then the roles, each created only if missing.
pub fn render(sources: &Sources) -> String {
    let mut out = String::from(
        "-- fencepost: the fence schemas and roles, owned by dbo, created by a DBA before the first deploy.
-- Run it as a member of db_owner. Idempotent: each is created only if missing; a schema another
-- principal owns stops it. Then `fencepost status` as the deployer names the rights to grant on them.
SET XACT_ABORT ON;
GO
",
    );
    for schema in FENCE_SCHEMAS {
        let _ = writeln!(out, "{}GO", create_schema_unless_there(schema));
    }
    for script in sources.permissions().iter().filter(|p| p.file() == ROLES_SCRIPT) {
        let _ = writeln!(out, "-- permissions/{ROLES_SCRIPT}");
        for batch in script.batches() {
            let _ = writeln!(out, "{}\nGO", batch.text.trim());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schemas_and_the_roles_each_only_if_missing() {
        let script = render(&Sources::embedded().unwrap());
        for schema in FENCE_SCHEMAS {
            assert!(
                script.contains(&format!(
                    "IF SCHEMA_ID(N'{schema}') IS NULL\n    EXEC (N'CREATE SCHEMA {schema} AUTHORIZATION dbo;');"
                )),
                "{script}"
            );
        }
        assert!(
            script.contains("CREATE ROLE fence_recovery AUTHORIZATION dbo"),
            "{script}"
        );
    }
}
