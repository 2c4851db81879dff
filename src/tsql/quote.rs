//! Pasting a name or a text into T-SQL safely, the way the server's own
//! `QUOTENAME` does: everything fencepost generates (the deploy's stubs and
//! drops, the audit's fix statements) quotes through these.

/// `[name]`, with any `]` inside doubled: `QUOTENAME(name)`.
#[cfg(feature = "deploy")]
pub(crate) fn quote_name(name: &str) -> String {
    format!("[{}]", name.replace(']', "]]"))
}

/// `[schema].[name]`.
#[cfg(feature = "deploy")]
pub(crate) fn quote_qualified(schema: &str, name: &str) -> String {
    format!("{}.{}", quote_name(schema), quote_name(name))
}

/// A T-SQL string literal: `N'...'` with quotes doubled.
pub(crate) fn literal(text: &str) -> String {
    format!("N'{}'", text.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(feature = "deploy")]
    fn quoting_doubles_closing_brackets() {
        assert_eq!(quote_name("odd]name"), "[odd]]name]");
        assert_eq!(quote_qualified("fence", "odd]name"), "[fence].[odd]]name]");
    }

    #[test]
    fn a_string_literal_doubles_quotes_and_is_unicode() {
        assert_eq!(literal("it's"), "N'it''s'");
    }
}
