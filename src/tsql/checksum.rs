//! The fingerprint of a shipped text: what the journal records for a
//! procedure and what tells an edited file from the one deployed.

use sha2::{Digest, Sha256};

/// SHA-256 of a text, lower-case hex.
pub(crate) fn checksum(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// Line ends and a byte-order mark are accidents of the editor, not content:
/// dropping them keeps checksums equal across checkouts on any platform.
pub fn normalize(text: &str) -> String {
    text.strip_prefix('\u{feff}').unwrap_or(text).replace("\r\n", "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_do_not_change_with_line_endings() {
        assert_eq!(checksum(&normalize("a\r\nb")), checksum("a\nb"));
    }

    #[test]
    fn a_byte_order_mark_is_not_content() {
        assert_eq!(normalize("\u{feff}SELECT 1;"), "SELECT 1;");
    }

    #[test]
    fn a_checksum_is_lower_case_hex_sha256() {
        assert_eq!(
            checksum(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
