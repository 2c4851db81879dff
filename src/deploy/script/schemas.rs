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
-- principal owns stops it (error 50198). Then `fencepost status` as the deployer names the rights to
-- grant on them, VIEW DEFINITION on each role among them (a role dbo owns is invisible to a deployer
-- that holds no right on it, which could then neither find it nor grant to it). Not the path on Babelfish, which grants no database-level right (CREATE TABLE,
-- CREATE PROCEDURE) to a user: there the deployer's login is made the database's owner instead, by
-- the statement `fencepost status` prints.
-- Run with sqlcmd (e.g. sqlcmd -S server -d database -i this-file), or in SSMS with SQLCMD mode on.
:on error exit
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

    /// Under sqlcmd's defaults a THROW (50198: a schema another principal
    /// owns) ends only its batch, and the roles would be created after it.
    #[test]
    fn the_script_stops_at_its_first_error_and_names_babelfish_s_path() {
        let script = render(&Sources::embedded().unwrap());
        let stop = script.find("\n:on error exit\n").expect(":on error exit");
        assert!(stop < script.find("CREATE SCHEMA").unwrap(), "{script}");
        assert!(script.contains("Babelfish"), "{script}");
    }

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
