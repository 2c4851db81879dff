//! The publication of an artefact: a small JSON document with a format
//! marker, so a reader tells a pointer from an ordinary payload.

use serde::{Deserialize, Serialize};

/// The value of a pointer's `format` field.
pub const POINTER_FORMAT: &str = "fencepost.artifact/1";

/// What every version of the pointer's `format` starts with, so a build
/// tells a pointer it cannot read from a payload that is no pointer.
pub(crate) const POINTER_FORMAT_FAMILY: &str = "fencepost.artifact/";

/// What is published for an artefact: where it is and what its bytes are,
/// so a reader can prove it got the bytes that were published.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pointer {
    /// Always [`POINTER_FORMAT`].
    pub format: String,
    /// The object's path in the store (prefix included).
    pub location: String,
    /// Its size in bytes.
    pub size: u64,
    /// The SHA-256 of its bytes, lower-case hex.
    pub sha256: String,
    /// The store's entity tag for the object, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e_tag: Option<String>,
    /// The store's version id for the object, when it keeps versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The version of the source it was built from (contract v1.4), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_version: Option<i64>,
}

impl Pointer {
    /// The pointer as the payload to publish.
    pub fn to_payload(&self) -> String {
        serde_json::to_string(self).expect("a pointer always serializes")
    }

    /// The pointer a payload holds; an error for anything else (an ordinary
    /// payload, a pointer of another format).
    pub fn from_payload(payload: &str) -> Result<Pointer, serde_json::Error> {
        let pointer: Pointer = serde_json::from_str(payload)?;
        if pointer.format != POINTER_FORMAT {
            return Err(serde::de::Error::custom(format!(
                "format `{}` is not {POINTER_FORMAT}",
                pointer.format
            )));
        }
        Ok(pointer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pointer() -> Pointer {
        Pointer {
            format: POINTER_FORMAT.into(),
            location: "p/k/1/id".into(),
            size: 3,
            sha256: "ab".into(),
            e_tag: Some("\"e\"".into()),
            version: None,
            source_version: Some(7),
        }
    }

    #[test]
    fn a_pointer_round_trips_through_its_payload() {
        let payload = pointer().to_payload();
        assert!(payload.starts_with(r#"{"format":"fencepost.artifact/1","location":"p/k/1/id""#));
        assert!(!payload.contains("version\":null"));
        assert_eq!(Pointer::from_payload(&payload).unwrap(), pointer());
    }

    #[test]
    fn an_ordinary_payload_or_another_format_is_not_a_pointer() {
        assert!(Pointer::from_payload("a plain report").is_err());
        assert!(Pointer::from_payload(r#"{"location":"x"}"#).is_err());
        let other = pointer()
            .to_payload()
            .replace("fencepost.artifact/1", "fencepost.artifact/2");
        assert!(Pointer::from_payload(&other).is_err());
    }
}
