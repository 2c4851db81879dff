//! The fingerprint of a procedure's definition as the server holds it. The
//! deploy runner records it right after a deploy; the deploy's status and the
//! audit both read it again, and drift is a current hash that differs from
//! the recorded one. All three must use the same expression, or every
//! procedure would read as drifted.

/// The one expression that fingerprints a procedure as the server holds it,
/// over the expression `definition` that yields its text. It stays binary:
/// not every engine converts varbinary to hex text in SQL.
pub(crate) fn definition_hash_sql(definition: &str) -> String {
    format!("HASHBYTES('SHA2_256', {definition})")
}

/// A hash column read as lower-case hex.
pub(crate) fn hash_hex(row: &tiberius::Row, index: usize) -> Option<String> {
    row.get::<&[u8], usize>(index).map(hex::encode)
}

/// Whether two recorded hashes name the same definition. Hex case and
/// `char(64)` padding differ between engines and drivers, not definitions.
#[cfg(feature = "audit")]
pub(crate) fn same_definition(recorded: &str, current: &str) -> bool {
    recorded.trim().eq_ignore_ascii_case(current.trim())
}

#[cfg(all(test, feature = "audit"))]
mod tests {
    use super::*;

    #[test]
    fn hashes_compare_without_case_or_padding() {
        assert!(same_definition("ABCDEF ", "abcdef"));
        assert!(!same_definition("ABCDEF", "ABCDEE"));
    }
}
