//! The state query and its decoder, side by side: what a database holds of
//! fencepost, read in one round trip however many objects there are, hashing
//! only the definitions of the shipped procedures.

use std::collections::HashMap;

use super::session::Session;
use crate::deploy::error::DeployError;
use crate::deploy::rights::{parse_probe, probe_query};
use crate::deploy::state::{AppliedMigration, ServerProcedure, ServerState};
use crate::schema::HISTORY_TABLE;
use crate::source::{ProcedureSource, Sources};
use crate::tsql::{definition_hash_sql, hash_hex, literal};

/// The names of the shipped procedures, `schema.name`: the definitions the
/// state query hashes.
pub(crate) fn shipped_names(sources: &Sources) -> Vec<String> {
    sources
        .procedures()
        .iter()
        .map(ProcedureSource::qualified_name)
        .collect()
}

/// The state query: a fixed number of result sets, whatever the database
/// holds, the last of them the rights the deploying login lacks
/// ([`probe_query`]). Missing tables (a database never deployed) give empty sets; their
/// queries go through EXEC so the batch compiles without them. Every
/// procedure the login can see in a fence schema is listed by name, including
/// one whose definition it cannot read: that one exists, and must never be
/// created again, and one never deployed stops the deploy. Only the
/// definitions of `shipped` (`schema.name`) are hashed, by object id and
/// joined here rather than on the server: those are all the plan compares,
/// and other objects, however many, add no hashing.
pub(crate) fn state_query(shipped: &[String]) -> String {
    let hash = definition_hash_sql("m.definition");
    let rights = probe_query();
    // The ids go into a table first: an IN list of OBJECT_ID calls is
    // evaluated row by row of sys.sql_modules on some engines (Babelfish),
    // which grows with the database.
    let shipped_ids = if shipped.is_empty() {
        String::new()
    } else {
        let names: Vec<String> = shipped.iter().map(|name| format!("({})", literal(name))).collect();
        format!(
            "INSERT INTO @Shipped (ObjectId)
SELECT DISTINCT OBJECT_ID(v.Name) FROM (VALUES {}) AS v (Name) WHERE OBJECT_ID(v.Name) IS NOT NULL;\n",
            names.join(", ")
        )
    };
    format!(
        "SET NOCOUNT ON;
DECLARE @Shipped TABLE (ObjectId int NOT NULL PRIMARY KEY);
{shipped_ids}IF OBJECT_ID(N'{HISTORY_TABLE}', N'U') IS NOT NULL
    EXEC (N'SELECT CAST(version AS int), CAST(name AS nvarchar(255)), CAST(applied_on AS nvarchar(255)),
                  CAST(checksum AS nvarchar(255)) FROM {HISTORY_TABLE} ORDER BY version;');
ELSE
    SELECT CAST(NULL AS int), CAST(NULL AS nvarchar(255)), CAST(NULL AS nvarchar(255)), CAST(NULL AS nvarchar(255))
     WHERE 1 = 0;

SELECT CAST(s.name + N'.' + p.name AS nvarchar(256)) AS ProcedureName, CAST(p.object_id AS int) AS ObjectId
  FROM sys.procedures AS p
  JOIN sys.schemas AS s ON s.schema_id = p.schema_id
 WHERE s.name IN (N'fence_api', N'fence_admin');

SELECT CAST(m.object_id AS int) AS ObjectId, {hash} AS DefinitionHash
  FROM sys.sql_modules AS m
 WHERE m.object_id IN (SELECT ObjectId FROM @Shipped);

IF OBJECT_ID(N'fence.DeployedProcedure', N'U') IS NOT NULL
    EXEC (N'SELECT ProcedureName, SourceChecksum, DefinitionHash FROM fence.DeployedProcedure;');
ELSE
    SELECT CAST(NULL AS nvarchar(256)), CAST(NULL AS char(64)), CAST(NULL AS binary(32)) WHERE 1 = 0;

{ROLE_OWNER_CHECK}

{rights}"
    )
}

/// The deploying user when the permission scripts would fail half way for it:
/// `CREATE ROLE ... AUTHORIZATION dbo` needs IMPERSONATE on dbo (CREATE
/// ROLE), and `ALTER AUTHORIZATION ON ROLE::... TO dbo` TAKE OWNERSHIP on
/// the role as well (ALTER AUTHORIZATION), which dbo and db_owner members
/// hold; a least-privilege deployer (db_ddladmin and db_securityadmin) does
/// not. Needed only while a fence role is missing or owned by another.
/// Babelfish shows no role owner and creates the roles plainly.
const ROLE_OWNER_CHECK: &str = "IF SERVERPROPERTY(N'Babelfish') IS NULL
    EXEC (N'SELECT CAST(USER_NAME() AS nvarchar(256)) AS DeployingUser
      FROM (SELECT CASE WHEN ISNULL(HAS_PERMS_BY_NAME(N''dbo'', N''USER'', N''IMPERSONATE''), 0) = 1
                        THEN 1 ELSE 0 END AS MayImpersonateDbo) AS d
     WHERE USER_NAME() <> N''dbo'' AND ISNULL(IS_MEMBER(N''db_owner''), 0) <> 1
       AND EXISTS (SELECT 1 FROM (VALUES (N''fence_service''), (N''fence_reader''), (N''fence_operator''),
                                         (N''fence_recovery'')) AS r (name)
                     LEFT JOIN sys.database_principals AS p ON p.name = r.name
                    WHERE p.principal_id IS NULL AND d.MayImpersonateDbo = 0
                       OR p.owning_principal_id <> USER_ID(N''dbo'')
                          AND (d.MayImpersonateDbo = 0
                               OR ISNULL(HAS_PERMS_BY_NAME(r.name, N''ROLE'', N''TAKE OWNERSHIP''), 0) <> 1));');
ELSE
    SELECT CAST(NULL AS nvarchar(256)) WHERE 1 = 0;";

/// How many result sets [`state_query`] returns.
pub(crate) const STATE_RESULT_SETS: usize = 6;

/// Reads the history, the procedures (hashing the definitions of `shipped`)
/// and the journal in one round trip.
pub(crate) async fn read_state(session: &mut Session<'_>, shipped: &[String]) -> Result<ServerState, DeployError> {
    let results = session
        .run(&state_query(shipped))
        .await
        .map_err(DeployError::server(STATE_CONTEXT))?;
    parse_state(results, STATE_CONTEXT)
}

const STATE_CONTEXT: &str = "reading the deployed state";

/// The [`ServerState`] in the result sets of [`state_query`].
pub(crate) fn parse_state(results: Vec<Vec<tiberius::Row>>, context: &str) -> Result<ServerState, DeployError> {
    let [history, procedures, hashes, journal, role_owner, rights] = <[_; STATE_RESULT_SETS]>::try_from(results)
        .map_err(|r: Vec<_>| {
            DeployError::unexpected(
                context,
                format_args!("expected {STATE_RESULT_SETS} result sets, got {}", r.len()),
            )
        })?;

    let text = |row: &tiberius::Row, i: usize| row.get::<&str, usize>(i).map(|s| s.trim().to_string());
    let mut state = ServerState {
        cannot_give_roles_to_dbo: role_owner.first().and_then(|row| text(row, 0)),
        rights: parse_probe(&rights),
        ..ServerState::default()
    };
    for row in &history {
        let checksum = text(row, 3).and_then(|c| c.parse::<u64>().ok()).unwrap_or_default();
        state.migrations.push(AppliedMigration {
            version: row.get::<i32, usize>(0).unwrap_or_default(),
            name: text(row, 1).unwrap_or_default(),
            applied_on: text(row, 2).unwrap_or_default(),
            checksum,
        });
    }
    let hashes: HashMap<i32, String> = hashes
        .iter()
        .filter_map(|row| Some((row.get::<i32, usize>(0)?, hash_hex(row, 1)?)))
        .collect();
    for row in &procedures {
        let id = row.get::<i32, usize>(1);
        state.procedures.push(ServerProcedure {
            name: text(row, 0).unwrap_or_default(),
            exists: true,
            definition_hash: id.and_then(|id| hashes.get(&id).cloned()),
            deployed_checksum: None,
            deployed_definition_hash: None,
        });
    }
    for row in &journal {
        let name = text(row, 0).unwrap_or_default();
        let index = match state.procedures.iter().position(|p| p.name.eq_ignore_ascii_case(&name)) {
            Some(i) => i,
            None => {
                state.procedures.push(ServerProcedure {
                    name,
                    exists: false,
                    definition_hash: None,
                    deployed_checksum: None,
                    deployed_definition_hash: None,
                });
                state.procedures.len() - 1
            }
        };
        state.procedures[index].deployed_checksum = text(row, 1);
        state.procedures[index].deployed_definition_hash = hash_hex(row, 2);
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_query_hashes_only_the_shipped_definitions_and_lists_every_fence_procedure() {
        let sql = state_query(&["fence_api.A".into(), "fence_admin.B'x".into()]);
        assert!(
            sql.contains("FROM (VALUES (N'fence_api.A'), (N'fence_admin.B''x')) AS v (Name)"),
            "{sql}"
        );
        assert!(
            sql.contains("FROM sys.sql_modules AS m\n WHERE m.object_id IN (SELECT ObjectId FROM @Shipped);"),
            "{sql}"
        );
        assert_eq!(sql.matches("HASHBYTES").count(), 1, "{sql}");
        let listing = sql.find("FROM sys.procedures AS p").expect("every procedure is listed");
        assert!(
            !sql[listing..].starts_with("FROM sys.procedures AS p\n  LEFT JOIN sys.sql_modules"),
            "{sql}"
        );
    }

    #[test]
    fn with_nothing_shipped_the_state_query_hashes_nothing() {
        let sql = state_query(&[]);
        assert!(!sql.contains("INSERT INTO @Shipped"), "{sql}");
        assert!(sql.contains("IN (SELECT ObjectId FROM @Shipped)"), "{sql}");
    }
}
