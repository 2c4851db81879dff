//! How long an artefact's name may be, checked before anything is done for
//! it: a key whose name no store can hold is refused before its lease is
//! taken and its work run, not after, when the upload fails.
//!
//! One rule for every store, so that a key that works against a folder in
//! tests works against a bucket in production and the other way round: the
//! store behind an `ArtifactStore` is a `dyn ObjectStore`, often wrapped,
//! and its kind cannot be told reliably.

use object_store::path::Path;

use super::error::ArtifactError;
use super::layout::escape_key;

/// The longest path segment a local file system takes: 255 bytes on ext4,
/// XFS, Btrfs, ZFS and APFS (NTFS counts 255 UTF-16 units, the same for the
/// ASCII an escaped key is made of). An escaped key is one segment.
pub(crate) const MAX_SEGMENT_BYTES: usize = 255;

/// The longest object name S3 and GCS take (1024 bytes of UTF-8) and Azure
/// Blob (1024 characters, the same for ASCII names).
pub(crate) const MAX_NAME_BYTES: usize = 1024;

/// What follows the escaped key in a name, at its longest:
/// `/{generation}/{operation id}`, a generation of up to 19 digits (an
/// `i64`) and a hyphenated UUID of 36. Counted at its longest so that the
/// answer does not depend on a generation not acquired yet.
const LONGEST_TAIL_BYTES: usize = 1 + 19 + 1 + 36;

/// Refuses `key` when its artefacts' names under `prefix` would not fit
/// every store: the escaped key (every byte but a lower-case ASCII letter, a
/// digit or `-` takes 3) must fit one path segment, and the whole name
/// (`{prefix}/{escaped key}/{generation}/{operation id}`) an object name.
pub(crate) fn check_name(prefix: &Path, key: &str) -> Result<(), ArtifactError> {
    let escaped = escape_key(key).len();
    let too_long = |part, length, limit| ArtifactError::KeyTooLong {
        key: key.to_string(),
        part,
        length,
        limit,
    };
    if escaped > MAX_SEGMENT_BYTES {
        return Err(too_long("the escaped key", escaped, MAX_SEGMENT_BYTES));
    }
    let prefix = prefix.as_ref().len();
    let separator = usize::from(prefix > 0);
    let name = prefix + separator + escaped + LONGEST_TAIL_BYTES;
    if name > MAX_NAME_BYTES {
        return Err(too_long("the object name", name, MAX_NAME_BYTES));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::artifact::ArtifactPath;

    #[test]
    fn an_escaped_key_of_255_bytes_fits_and_one_of_256_does_not() {
        let prefix = Path::from("reports");
        // 85 colons escape to 255 bytes; one letter more is 256.
        assert!(check_name(&prefix, &":".repeat(85)).is_ok());
        let refused = check_name(&prefix, &format!("{}a", ":".repeat(85))).unwrap_err();
        assert!(
            matches!(
                &refused,
                ArtifactError::KeyTooLong {
                    part: "the escaped key",
                    length: 256,
                    limit: 255,
                    ..
                }
            ),
            "{refused:?}"
        );
        // The key's own length is not what counts: 256 plain letters are a
        // key the fence takes, and a segment too long all the same.
        assert!(check_name(&prefix, &"k".repeat(256)).is_err());
        assert!(check_name(&prefix, &"k".repeat(255)).is_ok());
    }

    #[test]
    fn the_whole_name_at_its_longest_generation_must_fit_1024_bytes() {
        let key = "k".repeat(200);
        // The longest name this key can have, with the largest generation.
        let longest = |prefix: &Path| {
            ArtifactPath {
                key: key.clone(),
                generation: i64::MAX,
                operation_id: Uuid::new_v4(),
            }
            .to_path(prefix)
            .as_ref()
            .len()
        };
        let fits = Path::from("p".repeat(1024 - 200 - LONGEST_TAIL_BYTES - 1));
        assert_eq!(longest(&fits), MAX_NAME_BYTES);
        assert!(check_name(&fits, &key).is_ok());
        let over = Path::from("p".repeat(1024 - 200 - LONGEST_TAIL_BYTES));
        let refused = check_name(&over, &key).unwrap_err();
        assert!(
            matches!(
                &refused,
                ArtifactError::KeyTooLong {
                    part: "the object name",
                    length: 1025,
                    limit: 1024,
                    ..
                }
            ),
            "{refused:?}"
        );
        // No prefix, no separator.
        assert!(check_name(&Path::from(""), &key).is_ok());
    }

    #[test]
    fn the_error_names_the_key_the_length_and_the_limit() {
        let key = "é".repeat(43);
        let refused = check_name(&Path::from("p"), &key).unwrap_err();
        assert_eq!(
            refused.to_string(),
            format!(
                "{key}: the escaped key would be 258 bytes long, over the store limit of 255 \
                 (every byte of a key but a lower-case ASCII letter, a digit or `-` takes 3)"
            )
        );
    }
}
