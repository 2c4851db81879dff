//! Statements a migration or permission script must not hold, found before
//! any server is touched.

use super::lexer::{TokenKind, tokenize};

/// The line (1-based) of the first `USE <database>` statement in `text`, if
/// any. A `USE` would move the rest of the deploy, and the name of its lock,
/// to another database. `USE HINT` and `USE PLAN` inside a query's OPTION
/// clause are not statements, and a `USE` in a comment, a string or a quoted
/// identifier is not code.
pub fn use_statement_line(text: &str) -> Option<usize> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
