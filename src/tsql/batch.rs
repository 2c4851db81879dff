//! Splitting a script into batches on `GO` lines, as sqlcmd and SSMS do.
//!
//! `GO` is not T-SQL: the server never sees it. A line whose first token is
//! `GO` is a separator: `GO`, then optionally a repeat count, then optionally
//! a comment that ends on that line. Anything else on such a line (`GO;`,
//! `GO -1`, `GO 5;`) is refused with its line, as sqlcmd refuses it: kept as
//! SQL, `GO;` after a procedure would become a table alias and pull the next
//! batch into the procedure's body. A `GO` inside a comment, a string or a
//! quoted identifier, or after code on its line, is not a separator.

use super::lexer::{Token, TokenKind, tokenize};

/// One batch of a script, as the server receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The batch's text, without the `GO` line that ended it.
    pub text: String,
    /// The line of the script on which the batch's text begins (1-based), so
    /// a server error at line `n` of the batch is at line `line + n - 1`.
    pub line: usize,
    /// How many times to run it (`GO 3` runs it three times).
    pub repeat: u32,
}

/// A line that starts with `GO` but is not a separator sqlcmd would obey.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: `{text}` is not a batch separator: {reason}")]
pub struct BadSeparator {
    /// The script line of the `GO`.
    pub line: usize,
    /// The line as written, without its line end.
    pub text: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// A `GO` line: where it starts and ends, and how often to run the batch it ends.
struct Separator {
    line_start: usize,
    line_end: usize,
    repeat: u32,
}

const SEPARATOR_SHAPE: &str = "a GO line holds GO, an optional repeat count and an optional comment, nothing else";
const COUNT_RANGE: &str = "a batch repeat count must be between 1 and 4294967295";
const COMMENT_ON_ONE_LINE: &str = "a comment after GO must end on the GO line";

/// Every line of a script whose first token is `GO`, in order: a separator,
/// or the reason it cannot be one.
fn go_lines(script: &str) -> Vec<Result<Separator, BadSeparator>> {
    let tokens = tokenize(script);
    let mut found = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        if !token.is_keyword("GO") {
            continue;
        }
        let line_start = script[..token.start].rfind('\n').map_or(0, |i| i + 1);
        if !script[line_start..token.start].chars().all(|c| c == ' ' || c == '\t') {
            continue;
        }
        let after = token.start + token.text.len();
        let line_end = script[after..].find('\n').map_or(script.len(), |i| after + i);
        let line = line_number(script, token.start);
        let bad = |reason| BadSeparator {
            line,
            text: script[line_start..line_end].trim_end_matches('\r').to_string(),
            reason,
        };
        found.push(match rest_of_go_line(&tokens[index + 1..]) {
            Ok(count) => match count.map_or(Ok(1), str::parse::<u32>) {
                Ok(repeat) if repeat >= 1 => Ok(Separator {
                    line_start,
                    line_end,
                    repeat,
                }),
                _ => Err(bad(COUNT_RANGE)),
            },
            Err(reason) => Err(bad(reason)),
        });
    }
    found
}

/// Reads what follows `GO` up to the end of its line: the repeat count as
/// written, if any, or why the line is not a separator.
fn rest_of_go_line<'a>(after_go: &[Token<'a>]) -> Result<Option<&'a str>, &'static str> {
    let mut count = None;
    let mut commented = false;
    for token in after_go {
        match token.kind {
            TokenKind::Whitespace if token.text.contains('\n') => break,
            TokenKind::Whitespace => {}
            TokenKind::LineComment => break,
            TokenKind::BlockComment if token.text.contains('\n') => return Err(COMMENT_ON_ONE_LINE),
            TokenKind::BlockComment => commented = true,
            TokenKind::Word if count.is_none() && !commented && token.text.bytes().all(|b| b.is_ascii_digit()) => {
                count = Some(token.text);
            }
            TokenKind::Punctuation if token.text == "-" && count.is_none() && !commented => {
                return Err(COUNT_RANGE);
            }
            _ => return Err(SEPARATOR_SHAPE),
        }
    }
    Ok(count)
}

/// Splits a script into the batches to send, dropping batches that hold only
/// whitespace and comments. A line that starts with `GO` but is not a
/// separator is an error, never SQL.
pub fn split_batches(script: &str) -> Result<Vec<Batch>, BadSeparator> {
    let mut batches = Vec::new();
    let mut batch_start = 0;
    for separator in go_lines(script) {
        let separator = separator?;
        push_batch(
            &mut batches,
            script,
            batch_start,
            separator.line_start,
            separator.repeat,
        );
        batch_start = (separator.line_end + 1).min(script.len());
    }
    push_batch(&mut batches, script, batch_start, script.len(), 1);
    Ok(batches)
}

fn push_batch(batches: &mut Vec<Batch>, script: &str, start: usize, end: usize, repeat: u32) {
    let text = &script[start..end];
    let only_trivia = tokenize(text).iter().all(|t| t.is_trivia());
    if only_trivia {
        return;
    }
    batches.push(Batch {
        text: text.to_string(),
        line: line_number(script, start),
        repeat,
    });
}

fn line_number(script: &str, offset: usize) -> usize {
    script[..offset].matches('\n').count() + 1
}

/// True when the text holds a line that starts with `GO`, separator or not
/// (procedure files must hold none).
pub(crate) fn has_separator(script: &str) -> bool {
    !go_lines(script).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(script: &str) -> Vec<String> {
        split_batches(script)
            .unwrap()
            .into_iter()
            .map(|b| b.text.trim().to_string())
            .collect()
    }

    #[test]
    fn go_on_its_own_line_separates_batches() {
        assert_eq!(texts("SELECT 1\nGO\nSELECT 2\n"), ["SELECT 1", "SELECT 2"]);
    }

    #[test]
    fn go_is_case_insensitive_and_may_be_indented_or_followed_by_spaces() {
        assert_eq!(texts("SELECT 1\n  go   \nSELECT 2\n\tGo\t\n"), ["SELECT 1", "SELECT 2"]);
    }

    #[test]
    fn go_in_a_line_comment_is_not_a_separator() {
        assert_eq!(texts("SELECT 1\n-- GO\nSELECT 2"), ["SELECT 1\n-- GO\nSELECT 2"]);
    }

    #[test]
    fn go_in_a_block_comment_is_not_a_separator() {
        assert_eq!(
            texts("SELECT 1\n/*\nGO\n*/\nSELECT 2"),
            ["SELECT 1\n/*\nGO\n*/\nSELECT 2"]
        );
    }

    #[test]
    fn go_in_a_string_is_not_a_separator() {
        assert_eq!(
            texts("SELECT N'\nGO\n'\nGO\nSELECT 2"),
            ["SELECT N'\nGO\n'", "SELECT 2"]
        );
    }

    #[test]
    fn go_in_a_quoted_identifier_is_not_a_separator() {
        assert_eq!(texts("SELECT 1 AS [\nGO\n]"), ["SELECT 1 AS [\nGO\n]"]);
    }

    #[test]
    fn go_sharing_a_line_with_code_is_not_a_separator() {
        assert_eq!(texts("SELECT 1 GO\nGOTO x\nx: GO"), ["SELECT 1 GO\nGOTO x\nx: GO"]);
    }

    #[test]
    fn go_with_a_count_repeats_the_batch() {
        let batches = split_batches("INSERT t VALUES (1)\nGO 3\nSELECT 1").unwrap();
        assert_eq!(batches[0].repeat, 3);
        assert_eq!(batches[1].repeat, 1);
    }

    #[test]
    fn go_may_carry_a_trailing_comment() {
        assert_eq!(
            texts("SELECT 1\nGO -- end of part one\nSELECT 2"),
            ["SELECT 1", "SELECT 2"]
        );
    }

    #[test]
    fn a_zero_count_is_refused_with_its_line() {
        let err = split_batches("SELECT 1\nGO 0\n").unwrap_err();
        assert_eq!(err.line, 2);
    }

    #[test]
    fn go_may_carry_a_block_comment_that_ends_on_its_line() {
        assert_eq!(texts("SELECT 1\nGO /* c */\nSELECT 2"), ["SELECT 1", "SELECT 2"]);
        let batches = split_batches("SELECT 1\nGO 2 /* twice */ -- and why\nSELECT 2").unwrap();
        assert_eq!(batches[0].repeat, 2);
    }

    fn refusal(script: &str) -> BadSeparator {
        split_batches(script).expect_err(script)
    }

    #[test]
    fn go_followed_by_a_semicolon_is_refused_with_its_line_and_text() {
        let err = refusal("CREATE PROCEDURE p AS SELECT 1;\nGO;\nDROP TABLE t;\n");
        assert_eq!(err.line, 2);
        assert_eq!(err.text, "GO;");
        assert!(err.to_string().starts_with("line 2: `GO;`"), "{err}");
    }

    #[test]
    fn a_line_that_starts_with_go_is_a_separator_or_an_error_never_sql() {
        for line in [
            "GO;",
            "GO 5;",
            "GO -1",
            "GO x",
            "GO 1 2",
            "GO /* c */ 2",
            "GO.",
            "  go(1)",
        ] {
            let script = format!("SELECT 1\n{line}\nSELECT 2\n");
            assert_eq!(refusal(&script).line, 2, "{line}");
            assert!(has_separator(&script), "{line}");
        }
    }

    #[test]
    fn a_negative_or_oversized_count_is_refused_as_a_count() {
        for line in ["GO -1", "GO 0", "GO 4294967296"] {
            assert_eq!(refusal(&format!("SELECT 1\n{line}\n")).reason, COUNT_RANGE, "{line}");
        }
    }

    #[test]
    fn a_comment_after_go_that_runs_past_its_line_is_refused() {
        let err = refusal("SELECT 1\nGO /* starts here\n and ends here */\nSELECT 2");
        assert_eq!((err.line, err.reason), (2, COMMENT_ON_ONE_LINE));
    }

    #[test]
    fn crlf_line_ends_are_understood() {
        assert_eq!(
            texts("SELECT 1\r\nGO\r\nSELECT 2\r\nGO 2\r\n"),
            ["SELECT 1", "SELECT 2"]
        );
        assert_eq!(split_batches("SELECT 1\r\nGO 2\r\n").unwrap()[0].repeat, 2);
    }

    #[test]
    fn empty_and_comment_only_batches_are_dropped() {
        assert_eq!(texts("GO\n\nGO\n-- nothing\nGO\nSELECT 1\nGO"), ["SELECT 1"]);
    }

    #[test]
    fn each_batch_knows_the_line_it_starts_on() {
        let batches = split_batches("SELECT 1\nGO\n\nSELECT 2\nGO\nSELECT 3").unwrap();
        let lines: Vec<usize> = batches.iter().map(|b| b.line).collect();
        assert_eq!(lines, [1, 3, 6]);
    }

    #[test]
    fn a_script_without_go_is_one_batch() {
        assert_eq!(texts("SELECT 1;\nSELECT 2;"), ["SELECT 1;\nSELECT 2;"]);
        assert!(!has_separator("SELECT 1;\nSELECT 2;"));
        assert!(has_separator("SELECT 1\nGO\nSELECT 2"));
    }
}
