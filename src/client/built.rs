//! What a [`Client::run_fenced`](super::Client::run_fenced) work hands back
//! to publish.

/// A work's result: the payload to publish and, when the result must not go
/// back to an older source (contract v1.4), the version of the source it was
/// built from. A `String` converts into one without a version, so a work may
/// simply return its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Built {
    /// The payload to publish.
    pub payload: String,
    /// The version of the source it was built from (0 or more): the fence
    /// refuses it as `StaleSource` when a newer one was already published.
    pub source_version: Option<i64>,
}

impl Built {
    /// A payload built from version `source_version` of its source (a
    /// change-feed offset, a snapshot number, a row version).
    pub fn from_source(payload: impl Into<String>, source_version: i64) -> Self {
        Built {
            payload: payload.into(),
            source_version: Some(source_version),
        }
    }
}

impl From<String> for Built {
    fn from(payload: String) -> Self {
        Built {
            payload,
            source_version: None,
        }
    }
}

impl From<&str> for Built {
    fn from(payload: &str) -> Self {
        Built::from(payload.to_string())
    }
}
