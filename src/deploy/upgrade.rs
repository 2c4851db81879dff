//! Steps the runner runs inside a shipped migration's transaction, before
//! its first batch, to correct what that migration's text cannot: a
//! migration's text is checksummed into the history of every database that
//! applied it, and a changed text makes each of them refuse every later
//! deploy as divergent. A step here changes nothing for those databases (the
//! migration is not run again) and runs, under `migrate` and in the
//! rendered script alike, for every database that has yet to apply it.

use crate::source::MigrationSource;

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

#[cfg(test)]
mod tests {
    use super::*;
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
}
