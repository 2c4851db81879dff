//! Why a catalog could not be read.

/// A failure to read the catalog. A rule the catalog cannot answer is not an
/// error but a [`CannotVerify`](super::CannotVerify) in the report. A cause
/// is kept as `source` only, so a chain printed with `{:#}` shows it once.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// A catalog query failed.
    #[error("reading {what} from the catalog failed")]
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
    /// The catalog queries were answered with a different number of result
    /// sets, so no answer could be matched to its query.
    #[error("the {queries} catalog queries were answered with {answered} result sets")]
    ResultSets {
        /// How many queries were sent.
        queries: usize,
        /// How many result sets came back.
        answered: usize,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_query_keeps_the_driver_error_as_the_cause_only() {
        let error = AuditError::Query {
            what: "database principals",
            source: tiberius::error::Error::Io {
                kind: std::io::ErrorKind::ConnectionReset,
                message: "connection reset by peer".into(),
            },
        };
        assert_eq!(error.to_string(), "reading database principals from the catalog failed");
        assert!(std::error::Error::source(&error).is_some());
        crate::says_once::assert_each_cause_said_once(&error);
    }
}
