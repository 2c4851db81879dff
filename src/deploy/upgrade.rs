//! Steps the runner runs inside a shipped migration's transaction, before
//! its first batch, to correct what that migration's text cannot: a
//! migration's text is checksummed into the history of every database that
//! applied it, and a changed text makes each of them refuse every later
//! deploy as divergent. A step here changes nothing for those databases (the
//! migration is not run again) and runs, under `migrate` and in the
//! rendered script alike, for every database that has yet to apply it.

use crate::source::MigrationSource;
use crate::tsql::{Batch, TokenKind, tokenize};

/// Before `V2__exact_resource_keys`: V1's Publish recorded the caller's
/// spelling of the key (`VALUES (@OperationId, @ResourceKey, ...)`), which
/// V1's foreign key accepted under the database's case-insensitive
/// collation. V2 rebuilds both tables binary and, on SQL Server, re-adds the
/// foreign key before copying the operations back, so a row spelled
/// `report:daily` for the key `Report:Daily` made the copy fail with error
/// 547 ("The INSERT statement conflicted with the FOREIGN KEY constraint")
/// on every deploy; on Babelfish, which has no such key, the row was copied
/// and named no key. Each operation takes the spelling its row stores. The
/// join compares under V1's collation, as V1's foreign key did, so it finds
/// exactly the row that key accepted; only rows spelled differently (bytes
/// differ) are written.
const BEFORE_V2: &str = "UPDATE o
   SET ResourceKey = r.ResourceKey
  FROM fence.PublishedOperation AS o
  JOIN fence.Resource AS r ON r.ResourceKey = o.ResourceKey
 WHERE CAST(o.ResourceKey AS varbinary(max)) <> CAST(r.ResourceKey AS varbinary(max));";

/// The step to run before `migration`'s first batch, if any.
pub(super) fn before(migration: &MigrationSource) -> Option<&'static str> {
    (migration.name() == "V2__exact_resource_keys").then_some(BEFORE_V2)
}

/// The batches of `migration` as the runner runs them. A batch that only
/// creates a schema `AUTHORIZATION dbo` (V1's `fence_api` and
/// `fence_admin`) runs only while that schema is missing, so that a DBA may
/// create the schemas first (`fencepost script --schemas`) and grant the
/// deployer rights on them alone; a schema found owned by another principal
/// stops the migration, naming it.
pub(crate) fn batches_as_run(migration: &MigrationSource) -> Vec<Batch> {
    migration
        .batches()
        .iter()
        .map(|batch| match created_schema(&batch.text) {
            Some(schema) => Batch {
                text: create_schema_unless_there(&schema),
                ..batch.clone()
            },
            None => batch.clone(),
        })
        .collect()
}

/// The schema a batch creates `AUTHORIZATION dbo`, when that is all it does.
fn created_schema(sql: &str) -> Option<String> {
    let tokens: Vec<_> = tokenize(sql).into_iter().filter(|t| !t.is_trivia()).collect();
    let words: Vec<&str> = tokens.iter().map(|t| t.text).collect();
    match words.as_slice() {
        [create, schema, name, authorization, dbo] | [create, schema, name, authorization, dbo, ";"]
            if create.eq_ignore_ascii_case("CREATE")
                && schema.eq_ignore_ascii_case("SCHEMA")
                && authorization.eq_ignore_ascii_case("AUTHORIZATION")
                && dbo.eq_ignore_ascii_case("dbo")
                && tokens[2].kind == TokenKind::Word =>
        {
            Some((*name).to_string())
        }
        _ => None,
    }
}

/// Creates `schema` owned by dbo unless it exists; refuses one that another
/// principal owns.
pub(crate) fn create_schema_unless_there(schema: &str) -> String {
    format!(
        "IF SCHEMA_ID(N'{schema}') IS NULL
    EXEC (N'CREATE SCHEMA {schema} AUTHORIZATION dbo;');
ELSE IF (SELECT principal_id FROM sys.schemas WHERE name = N'{schema}') <> USER_ID(N'dbo')
    THROW 50198, N'schema {schema} exists and dbo does not own it: a DBA makes dbo its owner \
(ALTER AUTHORIZATION ON SCHEMA::{schema} TO dbo) or drops it, and the deploy runs again', 1;
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A schema a DBA created before the deploy, owned by someone other than
    /// dbo (the procedures would not share the tables' owner): the T-SQL
    /// throws it written out, which the docs test finds.
    const SCHEMA_NOT_OWNED_BY_DBO: u32 = 50198;
    use crate::source::Sources;

    #[test]
    fn only_v2_has_a_step_before_it() {
        let sources = Sources::embedded().unwrap();
        let with_step: Vec<String> = sources
            .migrations()
            .iter()
            .filter(|m| before(m).is_some())
            .map(MigrationSource::name)
            .collect();
        assert_eq!(with_step, ["V2__exact_resource_keys"]);
    }

    #[test]
    fn only_a_batch_that_creates_a_schema_for_dbo_alone_runs_only_while_it_is_missing() {
        let sources = Sources::embedded().unwrap();
        let v1 = &sources.migrations()[0];
        let run = batches_as_run(v1);
        assert_eq!(run.len(), v1.batches().len());
        let changed: Vec<&str> = run
            .iter()
            .zip(v1.batches())
            .filter(|(ran, shipped)| ran.text != shipped.text)
            .map(|(ran, _)| ran.text.as_str())
            .collect();
        assert_eq!(changed.len(), 2, "{changed:?}");
        assert!(
            changed[0].starts_with("IF SCHEMA_ID(N'fence_api') IS NULL"),
            "{}",
            changed[0]
        );
        assert!(
            changed[1].contains(&format!("THROW {SCHEMA_NOT_OWNED_BY_DBO}")),
            "{}",
            changed[1]
        );
        assert_eq!(created_schema("CREATE SCHEMA x AUTHORIZATION someone;"), None);
        assert_eq!(
            created_schema("CREATE SCHEMA x AUTHORIZATION dbo; CREATE TABLE x.t (a int);"),
            None
        );
        assert_eq!(
            created_schema("-- note\nCREATE SCHEMA x AUTHORIZATION dbo"),
            Some("x".into())
        );
    }
}
