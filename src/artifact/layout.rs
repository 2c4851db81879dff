//! Where an artefact lives: `{prefix}/{escaped key}/{generation}/{operation id}`,
//! a name only one publish can ever use.
//!
//! The generation is raised by every acquisition and the operation id is
//! fresh per publish, so two workers (a stale one and its successor, or two
//! racing ones) never write to the same name, and a create-only put makes
//! sure nothing is ever written there twice.

use object_store::path::Path;
use uuid::Uuid;

/// The segment probe objects live under, beside the keys' folders. In an
/// escaped key `_` is followed by two upper-case hex digits, never `pr`, so
/// no key's folder has this name.
pub(crate) const PROBE_SEGMENT: &str = "_probe";

/// One artefact's name, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArtifactPath {
    /// The resource key it was published for.
    pub key: String,
    /// The generation of the lease it was uploaded under.
    pub generation: i64,
    /// The operation id of its publish.
    pub operation_id: Uuid,
}

impl ArtifactPath {
    /// Its object path under `prefix`.
    pub fn to_path(&self, prefix: &Path) -> Path {
        prefix
            .clone()
            .join(escape_key(&self.key).as_str())
            .join(self.generation.to_string().as_str())
            .join(self.operation_id.to_string().as_str())
    }

    /// The artefact named by `path`, when it is one under `prefix`; `None`
    /// for anything else (a probe, an object some other tool put there).
    pub fn parse(prefix: &Path, path: &Path) -> Option<ArtifactPath> {
        let parts: Vec<_> = path.prefix_match(prefix)?.collect();
        let [key, generation, operation_id] = parts.as_slice() else {
            return None;
        };
        let key = unescape_key(key.as_ref())?;
        // A key the fence refuses can have no publication: not an artefact.
        let units = key.encode_utf16().count();
        if units > crate::client::MAX_KEY_UTF16_UNITS || key.ends_with(' ') {
            return None;
        }
        let generation: i64 = generation.as_ref().parse().ok().filter(|g| *g >= 0)?;
        let operation_id = Uuid::parse_str(operation_id.as_ref()).ok()?;
        // Only the one spelling `to_path` writes: a path that parses but is
        // spelt otherwise (`007`, an upper-case id) is not ours.
        let parsed = ArtifactPath {
            key,
            generation,
            operation_id,
        };
        (parsed.to_path(prefix) == *path).then_some(parsed)
    }
}

/// A key as one path segment every store accepts unchanged: ASCII letters,
/// digits and `-` stay, every other byte of its UTF-8 is `_` and two
/// upper-case hex digits. Reversible, and keys that differ (also only in
/// case) stay different, as the fence compares them.
pub fn escape_key(key: &str) -> String {
    let mut escaped = String::with_capacity(key.len());
    for byte in key.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' {
            escaped.push(byte as char);
        } else {
            escaped.push_str(&format!("_{byte:02X}"));
        }
    }
    escaped
}

/// The key [`escape_key`] made `segment` from; `None` when it is not one
/// of its spellings.
pub fn unescape_key(segment: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(segment.len());
    let mut rest = segment.as_bytes();
    while let Some((&first, tail)) = rest.split_first() {
        if first == b'_' {
            let hex = tail.get(..2)?;
            if !hex.iter().all(|h| h.is_ascii_digit() || (b'A'..=b'F').contains(h)) {
                return None;
            }
            let byte = u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?;
            if byte.is_ascii_alphanumeric() || byte == b'-' {
                return None;
            }
            bytes.push(byte);
            rest = &tail[2..];
        } else if first.is_ascii_alphanumeric() || first == b'-' {
            bytes.push(first);
            rest = tail;
        } else {
            return None;
        }
    }
    let key = String::from_utf8(bytes).ok()?;
    (!key.is_empty()).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_escape_to_one_segment_and_back() {
        for key in [
            "report:daily",
            "a/b/c",
            "Ä ö",
            "x_y",
            "..",
            "-",
            "UPPER",
            "upper",
            "%7E~",
        ] {
            let escaped = escape_key(key);
            assert!(
                escaped
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            );
            assert_eq!(unescape_key(&escaped).as_deref(), Some(key), "{escaped}");
        }
        assert_eq!(escape_key("report:daily"), "report_3Adaily");
        assert_ne!(escape_key("A"), escape_key("a"));
    }

    #[test]
    fn a_segment_escape_key_cannot_make_is_not_a_key() {
        for segment in ["", "a_", "a_4", "_41", "_3a", "a.b", "_probe", "_FF"] {
            assert_eq!(unescape_key(segment), None, "{segment}");
        }
    }

    #[test]
    fn an_artifact_path_round_trips_and_other_paths_are_not_artifacts() {
        let prefix = Path::from("reports/fenced");
        let artifact = ArtifactPath {
            key: "report:daily".into(),
            generation: 42,
            operation_id: Uuid::new_v4(),
        };
        let path = artifact.to_path(&prefix);
        assert_eq!(
            path.as_ref(),
            format!("reports/fenced/report_3Adaily/42/{}", artifact.operation_id)
        );
        assert_eq!(ArtifactPath::parse(&prefix, &path), Some(artifact.clone()));
        let id = artifact.operation_id;
        for other in [
            format!("reports/fenced/report_3Adaily/042/{id}"),
            format!("reports/fenced/report_3Adaily/-1/{id}"),
            format!("reports/fenced/report_3Adaily/42/{}", id.to_string().to_uppercase()),
            format!("reports/fenced/report_3Adaily/42/{id}/more"),
            format!("reports/fenced/_probe/{id}"),
            format!("reports/other/report_3Adaily/42/{id}"),
            format!("reports/fenced/{}/42/{id}", escape_key(&"k".repeat(257))),
            format!("reports/fenced/{}/42/{id}", escape_key("trailing ")),
        ] {
            assert_eq!(
                ArtifactPath::parse(&prefix, &Path::from(other.as_str())),
                None,
                "{other}"
            );
        }
    }
}
