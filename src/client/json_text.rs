//! Text as a JSON string, for the procedures that take a list as JSON
//! (tiberius sends no table-valued parameter).

use std::fmt::Write;

/// `text` as a JSON string: quoted, with a quotation mark, a backslash and
/// every control character escaped (RFC 8259, section 7), and nothing more,
/// so the engine's JSON reader sees each key exactly as given.
pub(crate) fn push_json_string(json: &mut String, text: &str) {
    json.push('"');
    for c in text.chars() {
        match c {
            '"' => json.push_str("\\\""),
            '\\' => json.push_str("\\\\"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(json, "\\u{:04x}", u32::from(c));
            }
            c => json.push(c),
        }
    }
    json.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_quotes_backslashes_and_control_characters_are_escaped() {
        let mut json = String::new();
        push_json_string(&mut json, "a\"b\\c\n\u{1}é😀/");
        assert_eq!(json, "\"a\\\"b\\\\c\\u000a\\u0001é😀/\"");
    }
}
