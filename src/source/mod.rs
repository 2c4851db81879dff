//! The shipped T-SQL as data: migrations, procedures and permission scripts,
//! embedded in the binary or read from a folder, each checked as it is read.
//! This room reads files, never a server.

mod error;
mod lint;
mod migration;
mod permission;
mod procedure;
mod sources;

/// How every file is read: without a byte-order mark and with `\n` line
/// ends, so a checkout on any platform gives the same texts and checksums.
pub use crate::tsql::normalize;
pub use error::SourceError;
pub use migration::MigrationSource;
pub use permission::ScriptSource;
pub use procedure::ProcedureSource;
pub use sources::Sources;
