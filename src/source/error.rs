//! What can be wrong with the shipped T-SQL itself, found before any server
//! is touched.

use std::path::PathBuf;

/// A problem with the T-SQL sources themselves, found before any server is
/// touched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// A source folder or file could not be read.
    #[error("cannot read {path}")]
    Unreadable {
        /// The path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not UTF-8 text.
    #[error("{file} is not UTF-8 text")]
    NotUtf8 {
        /// The file.
        file: String,
    },
    /// A migration file name is not `V<version>__<name>.sql`.
    #[error("migrations/{file}: {reason}")]
    MigrationName {
        /// The file.
        file: String,
        /// What is wrong with its name.
        reason: String,
    },
    /// Two migration files claim one version.
    #[error("migrations/{first} and migrations/{second} both have version {version}")]
    DuplicateVersion {
        /// The version.
        version: i32,
        /// One file.
        first: String,
        /// The other.
        second: String,
    },
    /// A line that starts with `GO` but is not a separator.
    #[error("{file}, {line}")]
    BadGo {
        /// The file, e.g. `migrations/V2__x.sql`.
        file: String,
        /// The line and what is wrong with it.
        line: crate::tsql::BadSeparator,
    },
    /// A migration or permission script with a `USE` statement.
    #[error(
        "{file}, line {line}: USE is not allowed: it would move the rest of the deploy, and the deploy lock, \
         to another database; connect to the database to deploy instead"
    )]
    UseStatement {
        /// The file, e.g. `migrations/V2__x.sql`.
        file: String,
        /// The line of the `USE`.
        line: usize,
    },
    /// A migration with a statement SQL Server refuses inside a transaction,
    /// not marked to run without one.
    #[error(
        "{file}, line {line}: {statement} cannot run inside the migration's transaction; if the migration \
         is safe to re-run from its first batch, put the line `-- fencepost: no-transaction` before its \
         first statement: it then runs batch by batch without a transaction and is recorded only after \
         the last batch succeeds"
    )]
    NeedsNoTransaction {
        /// The file, e.g. `migrations/V2__x.sql`.
        file: String,
        /// The statement's line.
        line: usize,
        /// What it is, e.g. `ALTER DATABASE`.
        statement: String,
    },
    /// A procedure file that does not hold exactly one `CREATE PROCEDURE`.
    #[error(
        "procedures/{file} holds {found} CREATE PROCEDURE statements; a procedure file holds exactly one \
         (write CREATE PROCEDURE, not CREATE OR ALTER: the runner alters it in place)"
    )]
    ProcedureCount {
        /// The file.
        file: String,
        /// How many it holds.
        found: usize,
    },
    /// A procedure file with code before its `CREATE PROCEDURE`.
    #[error("procedures/{file}: CREATE PROCEDURE must be the first statement (only comments may precede it)")]
    ProcedureNotFirst {
        /// The file.
        file: String,
    },
    /// A procedure file with a `GO` line.
    #[error("procedures/{file}: a procedure file is one batch and must not contain GO")]
    ProcedureHasGo {
        /// The file.
        file: String,
    },
    /// A procedure file whose name does not match the procedure it declares.
    #[error("procedures/{file}: the file must be named <schema>.<procedure>.sql after the procedure it creates{}",
        .declared.as_ref().map(|d| format!(" (it creates {d})")).unwrap_or_default())]
    ProcedureName {
        /// The file.
        file: String,
        /// The `schema.name` it declares, if one could be read.
        declared: Option<String>,
    },
    /// A procedure outside `fence_api` and `fence_admin`.
    #[error("procedures/{file}: schema {schema} is not one of fence_api, fence_admin")]
    ProcedureSchema {
        /// The file.
        file: String,
        /// The schema it names.
        schema: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_path_keeps_its_io_error_as_the_cause_only() {
        let error = SourceError::Unreadable {
            path: "/x/migrations".into(),
            source: std::io::Error::other("permission denied"),
        };
        assert_eq!(error.to_string(), "cannot read /x/migrations");
        assert!(std::error::Error::source(&error).is_some());
        crate::says_once::assert_each_cause_said_once(&error);
    }
}
