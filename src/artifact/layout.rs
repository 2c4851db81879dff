//! Where an artefact lives: `{prefix}/{escaped key}/{generation}/{operation id}`,
//! a name only one publish can ever use.
//!
//! The generation is raised by every acquisition and the operation id is
//! fresh per publish, so two workers (a stale one and its successor, or two
//! racing ones) never write to the same name, and a create-only put makes
//! sure nothing is ever written there twice.
//!
//! An artefact's identity is its (key, generation, operation id), not the
//! spelling of its path: a publisher and a sweep (or a reader) whose stores
//! are rooted at different folders spell one object differently, and both
//! recognise it by the last three segments.

use object_store::path::Path;
use uuid::Uuid;

/// The segment probe objects live under, beside the keys' folders. In an
/// escaped key `_` is followed by two upper-case hex digits, never `pr`, so
/// no key's folder has this name.
pub(crate) const PROBE_SEGMENT: &str = "_probe";

/// The object that marks a prefix as fencepost's artefact folder, written by
/// every store opened to publish. The sweep walks only a marked prefix. Like
/// [`PROBE_SEGMENT`] no escaped key can spell it.
pub(crate) const MARKER_SEGMENT: &str = "_fencepost";

/// One artefact's name, parsed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
        self.spelt(prefix, escape_key(&self.key))
    }

    fn spelt(&self, prefix: &Path, escaped_key: String) -> Path {
        prefix
            .clone()
            .join(escaped_key.as_str())
            .join(self.generation.to_string().as_str())
            .join(self.operation_id.to_string().as_str())
    }

    /// The artefact named by `path`, when it is one under `prefix`; `None`
    /// for anything else (a probe, an object some other tool put there).
    /// The key may be spelt as [`escape_key`] spells it or as fencepost
    /// 0.1.0 did, with upper-case letters as they are.
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
        // Only a spelling fencepost writes: a path that parses but is spelt
        // otherwise (`007`, an upper-case id) is not ours.
        let parsed = ArtifactPath {
            key,
            generation,
            operation_id,
        };
        let ours = parsed.to_path(prefix) == *path || parsed.spelt(prefix, escape_key_0_1(&parsed.key)) == *path;
        ours.then_some(parsed)
    }

    /// The artefact a pointer's `location` names, whatever store root and
    /// prefix it was spelt under: its last three segments.
    pub fn from_location(location: &str) -> Option<ArtifactPath> {
        let path = Path::parse(location).ok()?;
        let parts: Vec<_> = path.parts().collect();
        let at = parts.len().checked_sub(3)?;
        let prefix: Path = parts[..at].iter().cloned().collect();
        ArtifactPath::parse(&prefix, &path)
    }
}

/// The other key whose artefacts a case-insensitive file system may hold in
/// the folder of the artefact at `path` under `prefix`: for a folder spelt
/// as fencepost 0.1.0 spelt keys (upper-case letters as they are), the key
/// whose spelling now is that folder's name in lower case. A key of this
/// version writing into `Report/` finds an existing `Report/` folder of
/// 0.1.0's key `Report` on such a file system, and its uploads are listed as
/// that key's. `None` for a folder with no upper-case letter outside an
/// escape, or whose lower-case name spells no key.
pub(crate) fn case_folded_twin(prefix: &Path, path: &Path) -> Option<String> {
    let segment = path.prefix_match(prefix)?.next()?;
    let segment = segment.as_ref();
    let mut folded = String::with_capacity(segment.len());
    let mut bytes = segment.bytes();
    let mut upper = false;
    while let Some(byte) = bytes.next() {
        if byte == b'_' {
            // An escape keeps its upper-case hex digits.
            folded.push('_');
            folded.extend(bytes.by_ref().take(2).map(char::from));
        } else {
            upper |= byte.is_ascii_uppercase();
            folded.push(char::from(byte.to_ascii_lowercase()));
        }
    }
    let twin = unescape_key(&folded).filter(|key| escape_key(key) == folded)?;
    upper.then_some(twin)
}

/// A key as one path segment every store accepts unchanged, and that no
/// other key's segment equals even on a case-insensitive file system:
/// lower-case ASCII letters, digits and `-` stay, every other byte of its
/// UTF-8 (upper-case letters too) is `_` and two upper-case hex digits.
/// Reversible: keys that differ (also only in case) stay different, as the
/// fence compares them.
pub fn escape_key(key: &str) -> String {
    escape_bytes(key, |byte| {
        byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-'
    })
}

/// How fencepost 0.1.0 spelt a key: upper-case letters as they are, so two
/// keys that differ only in case shared a folder on a case-insensitive file
/// system. Still recognised, never written.
fn escape_key_0_1(key: &str) -> String {
    escape_bytes(key, |byte| byte.is_ascii_alphanumeric() || byte == b'-')
}

fn escape_bytes(key: &str, stays: impl Fn(u8) -> bool) -> String {
    let mut escaped = String::with_capacity(key.len());
    for byte in key.bytes() {
        if stays(byte) {
            escaped.push(byte as char);
        } else {
            escaped.push_str(&format!("_{byte:02X}"));
        }
    }
    escaped
}

/// The key [`escape_key`] (or fencepost 0.1.0, which kept upper-case letters
/// as they are) made `segment` from; `None` when it is not one of their
/// spellings.
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
            if byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-' {
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
    let spelt_by_us = escape_key(&key) == segment || escape_key_0_1(&key) == segment;
    (!key.is_empty() && spelt_by_us).then_some(key)
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
        assert_eq!(escape_key("Report"), "_52eport");
        assert_ne!(escape_key("A"), escape_key("a"));
    }

    #[test]
    fn keys_that_differ_only_in_case_never_share_a_folder_on_a_case_insensitive_file_system() {
        let keys = [
            "Report", "report", "REPORT", "rEpOrT", "a_b", "A_B", "_41", "a", "A", "Ä", "ä",
        ];
        let folded: std::collections::HashSet<String> =
            keys.iter().map(|k| escape_key(k).to_ascii_lowercase()).collect();
        assert_eq!(folded.len(), keys.len(), "{folded:?}");
    }

    #[test]
    fn a_key_spelt_as_fencepost_0_1_0_spelt_it_is_still_read_and_only_one_spelling_is_written() {
        assert_eq!(unescape_key("Report_3Adaily").as_deref(), Some("Report:daily"));
        assert_eq!(unescape_key("_52eport_3Adaily").as_deref(), Some("Report:daily"));
        // Neither spelling: part escaped, part not.
        assert_eq!(unescape_key("R_45port"), None);
        let id = Uuid::new_v4();
        let prefix = Path::from("fenced");
        let legacy = Path::from(format!("fenced/Report/3/{id}"));
        let parsed = ArtifactPath::parse(&prefix, &legacy).unwrap();
        assert_eq!((parsed.key.as_str(), parsed.generation), ("Report", 3));
        assert_eq!(parsed.to_path(&prefix).as_ref(), format!("fenced/_52eport/3/{id}"));
    }

    #[test]
    fn a_0_1_0_folder_with_upper_case_letters_has_the_lower_case_key_as_its_twin() {
        let id = Uuid::new_v4();
        let prefix = Path::from("fenced");
        let twin = |folder: &str| case_folded_twin(&prefix, &Path::from(format!("fenced/{folder}/3/{id}")));
        assert_eq!(twin("Report").as_deref(), Some("report"));
        assert_eq!(twin("Re_3Aport").as_deref(), Some("re:port"));
        // Spelt as this version spells: no upper-case letter outside an escape.
        assert_eq!(twin("_52eport"), None);
        assert_eq!(twin("report_3Adaily"), None);
    }

    #[test]
    fn a_pointer_s_location_names_its_artefact_whatever_the_root_it_was_spelt_under() {
        let artifact = ArtifactPath {
            key: "report:daily".into(),
            generation: 42,
            operation_id: Uuid::new_v4(),
        };
        for prefix in ["", "daily", "var/reports/daily"] {
            let location = artifact.to_path(&Path::from(prefix)).to_string();
            assert_eq!(
                ArtifactPath::from_location(&location),
                Some(artifact.clone()),
                "{location}"
            );
        }
        let id = artifact.operation_id;
        for other in ["", "a/b", &format!("k/x/{id}"), &format!("daily/_probe/{id}")] {
            assert_eq!(ArtifactPath::from_location(other), None, "{other}");
        }
    }

    #[test]
    fn a_segment_escape_key_cannot_make_is_not_a_key() {
        for segment in ["", "a_", "a_4", "_61", "_3a", "a.b", "_probe", "_fencepost", "_FF"] {
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
