//! A shipped migration, `migrations/V<version>__<name>.sql`: its name
//! checked, its text split on `GO` and checked for what must not run in (or
//! cannot run outside) the deploy's transaction.

use super::error::SourceError;
use super::lint::{has_no_transaction_marker, refuse_use, statement_needing_no_transaction};
use crate::tsql::{Batch, split_batches};

/// A versioned migration, `migrations/V<version>__<name>.sql`, run once.
#[derive(Clone, Debug)]
pub struct MigrationSource {
    file: String,
    migration: refinery::Migration,
    batches: Vec<Batch>,
    transactional: bool,
}

impl MigrationSource {
    pub(crate) fn parse(file: &str, text: &str) -> Result<Self, SourceError> {
        let bad_name = |reason: &str| SourceError::MigrationName {
            file: file.to_string(),
            reason: reason.to_string(),
        };
        let stem = file
            .strip_suffix(".sql")
            .ok_or_else(|| bad_name("a migration file must end in .sql"))?;
        if !stem.starts_with('V') {
            return Err(bad_name("a migration file must be named V<version>__<name>.sql"));
        }
        // A name is written to the history as text and compared on every
        // deploy; an engine or an older runner that stores it as non-Unicode
        // text reads `Größe` back as `Gr??e`, and the migration then blocks
        // every later deploy as divergent.
        if !stem.is_ascii() {
            return Err(bad_name(
                "a migration name must be ASCII (letters a-z, digits and _): the history may store it as non-Unicode text, and a changed name blocks every later deploy",
            ));
        }
        let migration = refinery::Migration::unapplied(stem, text)
            .map_err(|e| bad_name(&format!("{e} (expected V<version>__<name>.sql)")))?;
        let batches = split_batches(text).map_err(|line| SourceError::BadGo {
            file: format!("migrations/{file}"),
            line,
        })?;
        refuse_use(&format!("migrations/{file}"), text)?;
        let transactional = !has_no_transaction_marker(text);
        if let Some((line, statement)) = statement_needing_no_transaction(text).filter(|_| transactional) {
            return Err(SourceError::NeedsNoTransaction {
                file: format!("migrations/{file}"),
                line,
                statement,
            });
        }
        Ok(Self {
            file: file.to_string(),
            migration,
            batches,
            transactional,
        })
    }

    /// False for a migration marked `-- fencepost: no-transaction`: its
    /// batches run one by one without a transaction, and it is recorded only
    /// after the last succeeds.
    pub fn is_transactional(&self) -> bool {
        self.transactional
    }

    /// The file name, e.g. `V1__lease_tables.sql`.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The name the history records, e.g. `V1__lease_tables`.
    pub fn name(&self) -> String {
        self.migration.to_string()
    }

    /// The version number.
    pub fn version(&self) -> i32 {
        self.migration.version()
    }

    /// The migration as refinery sees it (its checksum covers name, version and text).
    pub fn migration(&self) -> &refinery::Migration {
        &self.migration
    }

    /// The batches the file splits into on `GO` lines.
    pub fn batches(&self) -> &[Batch] {
        &self.batches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_ascii_migration_name_is_refused_naming_the_file() {
        let err = MigrationSource::parse("V2__größe.sql", "SELECT 1;").unwrap_err();
        assert!(matches!(err, SourceError::MigrationName { ref file, .. } if file == "V2__größe.sql"));
        assert!(err.to_string().contains("must be ASCII"), "{err}");
        assert!(!err.to_string().contains("  "), "a run of spaces in the message: {err}");
    }

    #[test]
    fn a_statement_that_cannot_run_in_a_transaction_is_refused_unless_the_migration_opts_out() {
        let text = "ALTER DATABASE CURRENT SET READ_COMMITTED_SNAPSHOT ON;\n";
        let err = MigrationSource::parse("V2__rcsi.sql", text).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("migrations/V2__rcsi.sql, line 1: ALTER DATABASE cannot run"),
            "{err}"
        );
        assert!(err.to_string().contains("-- fencepost: no-transaction"), "{err}");
        let marked = MigrationSource::parse("V2__rcsi.sql", &format!("-- fencepost: no-transaction\n{text}")).unwrap();
        assert!(!marked.is_transactional());
        assert!(
            MigrationSource::parse("V1__a.sql", "SELECT 1;")
                .unwrap()
                .is_transactional()
        );
    }
}
