//! Views of a text for reading it as code: comments never count, and string
//! literals count only where dynamic SQL could run them. Built on the one
//! lexer, so a `--` inside a string or a bracketed name is never a comment
//! and block comments nest as the server nests them.

use super::lexer::{Token, TokenKind, tokenize};

/// The text with every comment replaced by a space, string literals kept.
pub(crate) fn without_comments(sql: &str) -> String {
    tokenize(sql).iter().map(|t| kept(t, false)).collect()
}

/// The text with comments and the contents of string literals blanked, so
/// that words inside messages (`N'... EXECUTE AS ...'`) are not read as code.
/// A string keeps its quotes: `''`, or `'` when it is never closed.
pub(crate) fn code_only(sql: &str) -> String {
    tokenize(sql).iter().map(|t| kept(t, true)).collect()
}

/// The text with every byte where it was, for reading keywords by their
/// place: each comment becomes spaces, and the inside of each string
/// literal and of each delimited name (`[for]`, `"After"`) becomes `x`, so
/// none of them is read as a word of the code, and a stray `"` or `[` in a
/// comment opens nothing.
pub(crate) fn keywords_in_place(sql: &str) -> String {
    in_place(sql, true)
}

/// The text with every byte where it was, for reading names by their place:
/// each comment becomes spaces and the inside of each string literal `x`;
/// delimited names stay as they are.
pub(crate) fn code_in_place(sql: &str) -> String {
    in_place(sql, false)
}

fn in_place(sql: &str, blank_names: bool) -> String {
    tokenize(sql)
        .iter()
        .map(|t| match t.kind {
            TokenKind::LineComment | TokenKind::BlockComment => " ".repeat(t.text.len()),
            TokenKind::QuotedIdentifier if !blank_names => t.text.to_string(),
            // Each opens and closes with one ASCII byte (an unclosed one
            // runs to the end of the text, so its last byte is no matter).
            TokenKind::StringLiteral | TokenKind::QuotedIdentifier => {
                let last = t.text.len().saturating_sub(1).max(1);
                let end = if t.text.is_char_boundary(last) {
                    &t.text[last..]
                } else {
                    ""
                };
                format!("{}{}{end}", &t.text[..1], "x".repeat(t.text.len() - 1 - end.len()))
            }
            _ => t.text.to_string(),
        })
        .collect()
}

fn kept<'a>(token: &Token<'a>, blank_strings: bool) -> &'a str {
    match token.kind {
        TokenKind::LineComment | TokenKind::BlockComment => " ",
        TokenKind::StringLiteral if blank_strings && is_closed(token.text) => "''",
        TokenKind::StringLiteral if blank_strings => "'",
        _ => token.text,
    }
}

/// Whether a string literal's text ends with its closing quote: after the
/// opening one, an odd run of trailing quotes is pairs of escaped quotes and
/// the closing one; an even run is escaped quotes only.
fn is_closed(literal: &str) -> bool {
    let body = &literal[1..];
    let trailing = body.bytes().rev().take_while(|&b| b == b'\'').count();
    trailing % 2 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_become_one_space_and_strings_stay() {
        assert_eq!(
            without_comments("SELECT N'--x' /* a /* b */ c */ -- tail\nFROM [t--]"),
            "SELECT N'--x'    \nFROM [t--]"
        );
    }

    #[test]
    fn code_only_blanks_string_contents_but_keeps_their_quotes() {
        assert_eq!(code_only("THROW 1, N'it''s EXEC (x)', 1;"), "THROW 1, N'', 1;");
        assert_eq!(code_only("SELECT ''"), "SELECT ''");
        assert_eq!(code_only("SELECT 'open"), "SELECT '");
        assert_eq!(code_only("SELECT 'open''"), "SELECT '");
        assert_eq!(code_only("SELECT [a'b]"), "SELECT [a'b]");
    }

    #[test]
    fn keywords_in_place_keeps_every_byte_where_it_was() {
        for sql in [
            "CREATE TRIGGER [for] ON t /* it's \"x [ */ AFTER UPDATE AS SELECT 'as' -- [\n;",
            "SELECT [a]]b], \"c\"\"d\", N'é''s', 'open",
            "SELECT 'é",
            "SELECT [",
        ] {
            for masked in [keywords_in_place(sql), code_in_place(sql)] {
                assert_eq!(masked.len(), sql.len(), "{masked}");
            }
        }
        assert_eq!(
            keywords_in_place("ON t /* \"x */ AFTER [for] AS 'as'"),
            format!("ON t {} AFTER [xxx] AS 'xx'", " ".repeat("/* \"x */".len()))
        );
        assert_eq!(code_in_place("ON [t] -- x\n 'a'"), "ON [t]     \n 'x'");
    }
}
