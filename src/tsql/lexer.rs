//! Just enough T-SQL lexing to tell code from comments, strings and quoted
//! identifiers: the batch splitter and the procedure-file parser must never
//! act on a `GO` or a `CREATE` that sits inside one of those, nor the audit
//! read a name in a comment as a reference.

/// What a span of source text is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// Letters, digits, `_`, `@`, `#`, `$`: keywords, names, variables, numbers.
    Word,
    /// `[name]` or `"name"`.
    QuotedIdentifier,
    /// `'text'` or `N'text'` (the `N` is a separate word).
    StringLiteral,
    /// `-- to end of line`.
    LineComment,
    /// `/* ... */`, which T-SQL lets nest.
    BlockComment,
    /// Spaces, tabs, line breaks.
    Whitespace,
    /// Any other single character.
    Punctuation,
}

/// A span of the source, by byte offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    pub kind: TokenKind,
    pub text: &'a str,
    pub start: usize,
}

impl Token<'_> {
    /// True for a word equal to `keyword`, ignoring case.
    #[cfg(feature = "deploy")]
    pub(crate) fn is_keyword(&self, keyword: &str) -> bool {
        self.kind == TokenKind::Word && self.text.eq_ignore_ascii_case(keyword)
    }

    /// The text a string literal holds, its quotes undone (`'it''s'` holds
    /// `it's`); `None` for any other token.
    #[cfg(feature = "audit")]
    pub(crate) fn string_value(&self) -> Option<String> {
        if self.kind != TokenKind::StringLiteral {
            return None;
        }
        let inner = self.text.strip_prefix('\'').unwrap_or(self.text);
        let inner = inner.strip_suffix('\'').unwrap_or(inner);
        Some(inner.replace("''", "'"))
    }

    /// True for tokens the server ignores.
    pub(crate) fn is_trivia(&self) -> bool {
        matches!(
            self.kind,
            TokenKind::Whitespace | TokenKind::LineComment | TokenKind::BlockComment
        )
    }
}

/// Splits `sql` into tokens that cover it completely and in order. An
/// unterminated string or comment runs to the end of the text; the server will
/// report it.
pub(crate) fn tokenize(sql: &str) -> Vec<Token<'_>> {
    let bytes = sql.as_bytes();
    let mut tokens = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let (kind, end) = scan_one(sql, pos);
        tokens.push(Token {
            kind,
            text: &sql[pos..end],
            start: pos,
        });
        pos = end;
    }
    tokens
}

fn scan_one(sql: &str, start: usize) -> (TokenKind, usize) {
    let bytes = sql.as_bytes();
    let at = |i: usize| bytes.get(i).copied();
    match bytes[start] {
        b'-' if at(start + 1) == Some(b'-') => {
            let end = sql[start..].find('\n').map_or(sql.len(), |i| start + i);
            (TokenKind::LineComment, end)
        }
        b'/' if at(start + 1) == Some(b'*') => (TokenKind::BlockComment, block_comment_end(bytes, start)),
        b'\'' => (TokenKind::StringLiteral, quoted_end(bytes, start, b'\'')),
        b'"' => (TokenKind::QuotedIdentifier, quoted_end(bytes, start, b'"')),
        b'[' => (TokenKind::QuotedIdentifier, quoted_end(bytes, start, b']')),
        b if b.is_ascii_whitespace() => {
            let len = bytes[start..].iter().take_while(|b| b.is_ascii_whitespace()).count();
            (TokenKind::Whitespace, start + len)
        }
        b if is_word_byte(b) => {
            let len = bytes[start..].iter().take_while(|b| is_word_byte(**b)).count();
            (TokenKind::Word, start + len)
        }
        _ => {
            let len = sql[start..].chars().next().map_or(1, char::len_utf8);
            (TokenKind::Punctuation, start + len)
        }
    }
}

fn is_word_byte(b: u8) -> bool {
    // Bytes of multi-byte UTF-8 characters count as word bytes so that a
    // non-ASCII identifier stays one word and slicing stays on char boundaries.
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'@' | b'#' | b'$') || b >= 0x80
}

/// The end of a quoted span opened at `start`; a doubled closing quote is an
/// escaped quote inside it (`'it''s'`, `[a]]b]`).
fn quoted_end(bytes: &[u8], start: usize, close: u8) -> usize {
    let mut i = start + 1;
    while i < bytes.len() {
        if bytes[i] == close {
            if bytes.get(i + 1) == Some(&close) {
                i += 2;
                continue;
            }
            return i + 1;
        }
        i += 1;
    }
    bytes.len()
}

fn block_comment_end(bytes: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(sql: &str) -> Vec<(TokenKind, &str)> {
        tokenize(sql)
            .into_iter()
            .filter(|t| t.kind != TokenKind::Whitespace)
            .map(|t| (t.kind, t.text))
            .collect()
    }

    #[test]
    fn tokens_cover_the_text_exactly() {
        let sql = "SELECT N'a''b' /* x /* y */ z */ [q]]r] -- tail\nFROM \"t\";";
        let joined: String = tokenize(sql).iter().map(|t| t.text).collect();
        assert_eq!(joined, sql);
    }

    #[test]
    fn doubled_quotes_stay_inside_the_string() {
        assert_eq!(
            kinds("'it''s' x"),
            vec![(TokenKind::StringLiteral, "'it''s'"), (TokenKind::Word, "x")]
        );
    }

    #[test]
    fn block_comments_nest() {
        assert_eq!(
            kinds("/* a /* b */ GO */ x"),
            vec![(TokenKind::BlockComment, "/* a /* b */ GO */"), (TokenKind::Word, "x")]
        );
    }

    #[test]
    fn bracketed_identifiers_escape_the_closing_bracket() {
        assert_eq!(
            kinds("[a]]b].c"),
            vec![
                (TokenKind::QuotedIdentifier, "[a]]b]"),
                (TokenKind::Punctuation, "."),
                (TokenKind::Word, "c")
            ]
        );
    }

    #[test]
    fn an_unterminated_string_runs_to_the_end() {
        assert_eq!(
            kinds("x 'abc"),
            vec![(TokenKind::Word, "x"), (TokenKind::StringLiteral, "'abc")]
        );
    }

    #[test]
    fn non_ascii_text_is_sliced_on_character_boundaries() {
        let sql = "SELECT Größe — ok";
        let joined: String = tokenize(sql).iter().map(|t| t.text).collect();
        assert_eq!(joined, sql);
    }
}
