//! The one place that says how a procedure's definition is hashed and how two
//! hashes compare: the deploy runner records the hash right after a deploy,
//! and drift is a current hash that differs from the recorded one.

/// The T-SQL expression, over `sys.sql_modules AS m`, that the deploy runner
/// records in `fence.DeployedProcedure.DefinitionHash`. Both sides must use
/// the same one, or every procedure would read as drifted: it comes from the
/// runner. Its value is binary; the reader turns it into hex.
pub(crate) fn definition_hash_sql() -> String {
    crate::deploy::definition_hash_sql("m.definition")
}

/// Whether two recorded hashes name the same definition. Hex case and
/// `char(64)` padding differ between engines and drivers, not definitions.
pub(crate) fn same_definition(recorded: &str, current: &str) -> bool {
    recorded.trim().eq_ignore_ascii_case(current.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_compare_without_case_or_padding() {
        assert!(same_definition("ABCDEF ", "abcdef"));
        assert!(!same_definition("ABCDEF", "ABCDEE"));
    }
}
