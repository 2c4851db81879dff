//! The checks that open each section of the offline script. A client that
//! carries on after an error (SSMS without SQLCMD mode) runs every batch
//! whatever failed before, so each section checks for itself that the
//! database is one this script may deploy to and that the sections before it
//! completed, and throws otherwise.

use std::fmt::Write;

use crate::schema::HISTORY_TABLE;
use crate::source::Sources;
use crate::tsql::literal;

/// Throws 50191 when the history holds a version this script does not ship,
/// or a shipped version under another name or checksum: what `migrate`
/// refuses as an unknown or divergent migration. Deploying over it would roll
/// a newer database's procedures back.
pub(super) fn history_agrees(sources: &Sources) -> String {
    let shipped: Vec<String> = sources
        .migrations()
        .iter()
        .map(|m| {
            let m = m.migration();
            format!("({}, {}, N'{}')", m.version(), literal(m.name()), m.checksum())
        })
        .collect();
    let unknown = if shipped.is_empty() {
        String::new()
    } else {
        format!(
            "\n    WHERE NOT EXISTS (SELECT 1 FROM (VALUES {}) AS s (version, name, checksum)
                      WHERE s.version = h.version AND s.name = h.name AND s.checksum = h.checksum)",
            shipped.join(", ")
        )
    };
    let refusal = "N' as the database has it (applied by a newer fencepost, or its file changed): deploy with the \
                   fencepost that matches the database; this part of the script changed nothing'";
    format!(
        "DECLARE @NotShipped nvarchar(300) = (SELECT TOP (1) CONCAT(N'V', h.version, N'__', h.name)
    FROM {HISTORY_TABLE} AS h{unknown}
    ORDER BY h.version);
IF @NotShipped IS NOT NULL
BEGIN
    DECLARE @Refusal nvarchar(2048) = CONCAT(N'this script does not ship migration ', @NotShipped, {refusal});
    THROW 50191, @Refusal, 1;
END;
"
    )
}

/// Throws 50192 unless every one of `versions` is in the history: the
/// sections that should have applied them failed.
pub(super) fn after(versions: &[i32]) -> String {
    if versions.is_empty() {
        return String::new();
    }
    let list: Vec<String> = versions.iter().map(ToString::to_string).collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "IF (SELECT COUNT(*) FROM {HISTORY_TABLE} WHERE version IN ({})) <> {}
    THROW 50192, N'an earlier migration of this script is not applied (its section failed): this part of the script changed nothing', 1;
",
        list.join(", "),
        versions.len()
    );
    out
}

/// Both checks: what opens every section.
pub(super) fn section(sources: &Sources, versions: &[i32]) -> String {
    format!("{}{}", history_agrees(sources), after(versions))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Sources {
        Sources::from_files(
            vec![
                ("V1__a.sql".into(), b"SELECT 1;".to_vec()),
                ("V2__b.sql".into(), b"SELECT 2;".to_vec()),
            ],
            vec![],
            vec![],
        )
        .unwrap()
    }

    #[test]
    fn the_history_check_lists_every_shipped_version_with_its_name_and_checksum() {
        let s = two();
        let check = history_agrees(&s);
        for m in s.migrations() {
            let m = m.migration();
            let row = format!("({}, N'{}', N'{}')", m.version(), m.name(), m.checksum());
            assert!(check.contains(&row), "{row} missing from:\n{check}");
        }
        assert!(check.contains("THROW 50191, @Refusal, 1;"), "{check}");
    }

    #[test]
    fn with_nothing_shipped_any_history_row_is_refused() {
        let none = Sources::from_files(vec![], vec![], vec![]).unwrap();
        let check = history_agrees(&none);
        assert!(!check.contains("VALUES"), "{check}");
        assert!(check.contains("FROM fence.SchemaHistory AS h\n    ORDER BY"), "{check}");
    }

    #[test]
    fn a_section_requires_the_migrations_before_it() {
        assert_eq!(after(&[]), "");
        let check = after(&[1, 2]);
        assert!(
            check.starts_with(
                "IF (SELECT COUNT(*) FROM fence.SchemaHistory WHERE version IN (1, 2)) <> 2\n    THROW 50192"
            ),
            "{check}"
        );
    }
}
