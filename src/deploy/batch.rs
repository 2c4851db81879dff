//! Splitting a script into batches on `GO` lines, as sqlcmd and SSMS do.
//!
//! `GO` is not T-SQL: the server never sees it. A line holding only `GO`
//! (any case, optionally a repeat count and a `--` comment) ends a batch; a
//! `GO` inside a comment, a string or a quoted identifier, or sharing its line
//! with code, does not.

use super::lexer::tokenize;

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

/// A `GO` line that cannot be obeyed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: `GO {count}`: a batch repeat count must be between 1 and {max}", max = u32::MAX)]
pub struct BadRepeatCount {
    /// The script line of the `GO`.
    pub line: usize,
    /// The count as written.
    pub count: String,
}

/// A `GO` line: where it starts and ends, and its repeat count as written.
struct Separator<'a> {
    line_start: usize,
    line_end: usize,
    line: usize,
    count: Option<&'a str>,
}

/// Every `GO` separator line of a script, in order.
fn separators(script: &str) -> Vec<Separator<'_>> {
    let mut found = Vec::new();
    for token in tokenize(script) {
        if !token.is_keyword("GO") {
            continue;
        }
        let line_start = script[..token.start].rfind('\n').map_or(0, |i| i + 1);
        if !script[line_start..token.start].chars().all(|c| c == ' ' || c == '\t') {
            continue;
        }
        let after = token.start + token.text.len();
        let line_end = script[after..].find('\n').map_or(script.len(), |i| after + i);
        if let Some(count) = repeat_count(&script[after..line_end]) {
            found.push(Separator {
                line_start,
                line_end,
                line: line_number(script, token.start),
                count,
            });
        }
    }
    found
}

/// Splits a script into the batches to send, dropping batches that hold only
/// whitespace and comments.
pub fn split_batches(script: &str) -> Result<Vec<Batch>, BadRepeatCount> {
    let mut batches = Vec::new();
    let mut batch_start = 0;
    for separator in separators(script) {
        let repeat = match separator.count {
            None => 1,
            Some(text) => match text.parse::<u32>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    return Err(BadRepeatCount {
                        line: separator.line,
                        count: text.to_string(),
                    });
                }
            },
        };
        push_batch(&mut batches, script, batch_start, separator.line_start, repeat);
        batch_start = (separator.line_end + 1).min(script.len());
    }
    push_batch(&mut batches, script, batch_start, script.len(), 1);
    Ok(batches)
}

/// What follows `GO` on its line, if it makes a separator: `Some(None)` for
/// a bare `GO`, `Some(Some(count))` for `GO count`, `None` when the line holds
/// anything else.
fn repeat_count(rest_of_line: &str) -> Option<Option<&str>> {
    let rest = rest_of_line.trim_end_matches('\r');
    let code = match rest.find("--") {
        Some(i) => &rest[..i],
        None => rest,
    };
    let mut words = code.split_whitespace();
    match (words.next(), words.next()) {
        (None, _) => Some(None),
        (Some(count), None) if count.chars().all(|c| c.is_ascii_digit()) => Some(Some(count)),
        _ => None,
    }
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

/// True when the text holds a `GO` separator line (procedure files must not).
pub(crate) fn has_separator(script: &str) -> bool {
    !separators(script).is_empty()
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
