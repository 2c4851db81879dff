//! Why a catalog could not be read.

/// A failure to read the catalog. A rule the catalog cannot answer is not an
/// error but a [`CannotVerify`](super::CannotVerify) in the report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// A catalog query failed.
    #[error("reading {what} from the catalog failed: {source}")]
    Query {
        /// What was being read (`database principals`).
        what: &'static str,
        /// The driver's error.
        #[source]
        source: tiberius::error::Error,
    },
    /// The catalog answered in a shape the reader does not understand.
    #[error("unexpected answer reading {what} from the catalog: {reason}")]
    UnexpectedShape {
        /// What was being read.
        what: &'static str,
        /// What was wrong with it.
        reason: String,
    },
}
