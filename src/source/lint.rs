//! Statements a migration or permission script must not hold, found before
//! any server is touched.

use super::error::SourceError;
use crate::tsql::{TokenKind, tokenize};

/// The line (1-based) of the first `USE <database>` statement in `text`, if
/// any. A `USE` would move the rest of the deploy, and the name of its lock,
/// to another database. `USE HINT` and `USE PLAN` inside a query's OPTION
/// clause are not statements, and a `USE` in a comment, a string or a quoted
/// identifier is not code.
pub(super) fn use_statement_line(text: &str) -> Option<usize> {
    let tokens = tokenize(text);
    let code: Vec<_> = tokens.iter().filter(|t| !t.is_trivia()).collect();
    code.iter().enumerate().find_map(|(i, token)| {
        let next = code.get(i + 1);
        let is_statement = token.is_keyword("USE")
            && next.is_some_and(|n| {
                matches!(n.kind, TokenKind::Word | TokenKind::QuotedIdentifier)
                    && !n.is_keyword("HINT")
                    && !n.is_keyword("PLAN")
            });
        is_statement.then(|| text[..token.start].matches('\n').count() + 1)
    })
}

/// `use_statement_line` as a source error naming `file`.
pub(super) fn refuse_use(file: &str, text: &str) -> Result<(), SourceError> {
    match use_statement_line(text) {
        Some(line) => Err(SourceError::UseStatement {
            file: file.to_string(),
            line,
        }),
        None => Ok(()),
    }
}

/// The marker, as a line comment among a migration's leading comments, that
/// runs it without a transaction.
pub(super) const NO_TRANSACTION_MARKER: &str = "fencepost: no-transaction";

/// True when `text` opts out of the migration transaction: a line comment
/// `-- fencepost: no-transaction` before its first statement.
pub(super) fn has_no_transaction_marker(text: &str) -> bool {
    tokenize(text)
        .iter()
        .take_while(|t| t.is_trivia())
        .filter(|t| t.kind == TokenKind::LineComment)
        .any(|t| {
            let comment: String = t.text[2..].split_whitespace().collect::<Vec<_>>().join(" ");
            comment.eq_ignore_ascii_case(NO_TRANSACTION_MARKER)
                || comment.eq_ignore_ascii_case(&NO_TRANSACTION_MARKER.replace(' ', ""))
        })
}

/// The line and words of the first statement that SQL Server refuses inside
/// a transaction (`ALTER DATABASE`, full-text DDL, a resumable index
/// operation), if `text` has one.
pub(super) fn statement_needing_no_transaction(text: &str) -> Option<(usize, String)> {
    let tokens = tokenize(text);
    let code: Vec<_> = tokens.iter().filter(|t| !t.is_trivia()).collect();
    let line = |start: usize| text[..start].matches('\n').count() + 1;
    code.iter().enumerate().find_map(|(i, token)| {
        let next = |k: usize| code.get(i + k).copied();
        let ddl = ["CREATE", "ALTER", "DROP"].iter().any(|w| token.is_keyword(w));
        if token.is_keyword("ALTER") && next(1).is_some_and(|n| n.is_keyword("DATABASE")) {
            return Some((line(token.start), "ALTER DATABASE".to_string()));
        }
        if ddl && next(1).is_some_and(|n| n.is_keyword("FULLTEXT")) {
            return Some((
                line(token.start),
                format!("{} FULLTEXT", token.text.to_ascii_uppercase()),
            ));
        }
        let resumable_on = token.is_keyword("RESUMABLE")
            && next(1).is_some_and(|n| n.text == "=")
            && next(2).is_some_and(|n| n.is_keyword("ON"));
        resumable_on.then(|| (line(token.start), "RESUMABLE = ON".to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_no_transaction_marker_is_a_leading_line_comment() {
        assert!(has_no_transaction_marker(
            "-- why\n--   fencepost:   no-transaction\nALTER DATABASE x;"
        ));
        assert!(has_no_transaction_marker("-- FENCEPOST:NO-TRANSACTION\nSELECT 1;"));
        assert!(!has_no_transaction_marker("SELECT 1;\n-- fencepost: no-transaction\n"));
        assert!(!has_no_transaction_marker("/* fencepost: no-transaction */ SELECT 1;"));
    }

    #[test]
    fn statements_sql_server_refuses_in_a_transaction_are_found_with_their_line() {
        let found = |t: &str| statement_needing_no_transaction(t);
        assert_eq!(
            found("SELECT 1;\nALTER DATABASE CURRENT SET READ_COMMITTED_SNAPSHOT ON;"),
            Some((2, "ALTER DATABASE".into()))
        );
        assert_eq!(found("CREATE FULLTEXT CATALOG c;"), Some((1, "CREATE FULLTEXT".into())));
        assert_eq!(
            found("ALTER INDEX ix ON t REBUILD WITH (ONLINE = ON, RESUMABLE = ON);"),
            Some((1, "RESUMABLE = ON".into()))
        );
        assert_eq!(found("-- ALTER DATABASE x\nSELECT N'ALTER DATABASE';"), None);
    }

    #[test]
    fn a_use_statement_is_found_with_its_line() {
        assert_eq!(use_statement_line("SELECT 1;\nGO\nUSE master;\nSELECT 2;"), Some(3));
        assert_eq!(use_statement_line("use [other db]"), Some(1));
    }

    #[test]
    fn use_hint_use_plan_comments_and_strings_are_not_use_statements() {
        let text = "SELECT 1 OPTION (USE HINT ('FORCE_LEGACY_CARDINALITY_ESTIMATION'));\n\
                    SELECT 2 OPTION (USE PLAN N'<xml/>');\n\
                    -- USE master\n/* USE master */ SELECT N'USE master', [USE] FROM t;";
        assert_eq!(use_statement_line(text), None);
    }
}
