//! The header of a DML trigger's text, read by its grammar ("CREATE
//! TRIGGER": `CREATE TRIGGER name ON object [WITH options] {FOR | AFTER |
//! INSTEAD OF} events [WITH APPEND] [NOT FOR REPLICATION] AS body`). The
//! trigger's name and the object it is on are read as names first: AFTER
//! and INSTEAD are not reserved keywords ("Reserved Keywords"), so a
//! trigger or a table may be named After without brackets, and only the
//! first FOR, AFTER or INSTEAD OF past the ON clause says when it fires.

use crate::tsql::keywords_in_place;

/// The data statements a DML trigger may fire for.
pub(super) const DATA: [&str; 3] = ["UPDATE", "INSERT", "DELETE"];

/// Whether a DML trigger's header says INSTEAD OF, and the events it names,
/// wherever the lines break.
pub(super) fn header(definition: &str) -> (bool, Vec<&'static str>) {
    let tokens = tokens(definition);
    let Some(at) = event_keyword(&tokens) else {
        return (false, Vec::new());
    };
    let instead = tokens[at].is("instead");
    let from = if instead { at + 2 } else { at + 1 };
    let events = tokens[from..]
        .iter()
        .take_while(|t| t.text == "," || data(t.text).is_some())
        .filter_map(|t| data(t.text))
        .collect();
    (instead, events)
}

/// The text of a trigger after its header: after the AS that follows its
/// events (or the first AS past its ON clause when they cannot be read).
/// Comments, strings and delimited names are read as no words, so neither a
/// name like `[for]` nor a stray `"` or `[` in a comment moves the header's
/// end.
pub(super) fn trigger_body(definition: &str) -> &str {
    let tokens = tokens(definition);
    let from = event_keyword(&tokens).or_else(|| on_target(&tokens)).unwrap_or(0);
    match tokens[from..].iter().find(|t| t.is("as")) {
        Some(t) => &definition[t.end..],
        None => definition,
    }
}

/// A word, a delimited name (its inside blanked), or one other character,
/// with the byte where it ends in the text.
struct Token<'a> {
    text: &'a str,
    end: usize,
}

impl Token<'_> {
    fn is(&self, word: &str) -> bool {
        self.text.eq_ignore_ascii_case(word)
    }

    /// A part of a name: a word that is no punctuation, or a delimited name.
    fn is_name_part(&self) -> bool {
        self.text.starts_with(['[', '"']) || self.text.chars().all(word_char)
    }
}

fn word_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '@' | '#' | '$')
}

fn data(word: &str) -> Option<&'static str> {
    DATA.into_iter().find(|d| d.eq_ignore_ascii_case(word))
}

/// The tokens of the code, comments dropped; strings and delimited names
/// are kept whole with their insides blanked, so no word in them is read.
fn tokens(definition: &str) -> Vec<Token<'_>> {
    let code = keywords_in_place(definition);
    let mut out = Vec::new();
    let mut chars = code.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        let close = match c {
            '[' => Some(']'),
            '"' => Some('"'),
            '\'' => Some('\''),
            _ => None,
        };
        let mut end = start + c.len_utf8();
        if let Some(close) = close {
            // The inside is blanked, so the first closing character ends it.
            for (i, d) in chars.by_ref() {
                end = i + d.len_utf8();
                if d == close {
                    break;
                }
            }
        } else if word_char(c) {
            while let Some(&(i, d)) = chars.peek() {
                if !word_char(d) {
                    break;
                }
                end = i + d.len_utf8();
                chars.next();
            }
        }
        out.push(Token {
            text: &definition[start..end],
            end,
        });
    }
    out
}

/// Where a name starting at `at` ends: its parts, each a word or a
/// delimited name, joined by dots.
fn name_end(tokens: &[Token<'_>], mut at: usize) -> Option<usize> {
    let start = at;
    loop {
        match tokens.get(at) {
            Some(t) if t.text == "." => at += 1,
            Some(t) if t.is_name_part() && (at == start || tokens[at - 1].text == ".") => at += 1,
            _ => break,
        }
    }
    (at > start).then_some(at)
}

/// The token just past the object a `CREATE TRIGGER name ON object` header
/// names, when the text has one.
fn on_target(tokens: &[Token<'_>]) -> Option<usize> {
    let trigger = tokens
        .windows(2)
        .position(|w| (w[0].is("create") || w[0].is("alter")) && w[1].is("trigger"))?
        + 2;
    let on = name_end(tokens, trigger)?;
    if !tokens.get(on)?.is("on") {
        return None;
    }
    name_end(tokens, on + 1)
}

/// The FOR, AFTER or INSTEAD (of INSTEAD OF) that says when the trigger
/// fires: the first past the ON clause, or the first in the text when its
/// header cannot be read by the grammar.
fn event_keyword(tokens: &[Token<'_>]) -> Option<usize> {
    let from = on_target(tokens).unwrap_or(0);
    (from..tokens.len()).find(|&i| {
        let t = &tokens[i];
        t.is("for") || t.is("after") || t.is("instead") && tokens.get(i + 1).is_some_and(|n| n.is("of"))
    })
}

#[cfg(test)]
mod tests {
    use super::{header, trigger_body};

    #[test]
    fn reads_trigger_headers() {
        assert_eq!(
            header("CREATE TRIGGER dbo.T ON dbo.V INSTEAD OF UPDATE AS UPDATE dbo.Orders SET Id = Id;"),
            (true, vec!["UPDATE"])
        );
    }

    #[test]
    fn names_after_and_instead_are_names() {
        assert_eq!(
            header("CREATE TRIGGER After ON dbo.Orders AFTER INSERT AS SELECT 1;"),
            (false, vec!["INSERT"])
        );
        assert_eq!(
            header("CREATE TRIGGER dbo.T ON Instead INSTEAD OF DELETE, UPDATE AS SELECT 1;"),
            (true, vec!["DELETE", "UPDATE"])
        );
        assert_eq!(
            header("create trigger [dbo] . [For] on [After] with execute as owner for insert as select 1"),
            (false, vec!["INSERT"])
        );
        assert_eq!(
            trigger_body("CREATE TRIGGER [As] ON dbo.[As] FOR INSERT AS SELECT 1"),
            " SELECT 1"
        );
    }
}
