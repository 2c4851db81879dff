//! A shipped procedure file: exactly one `CREATE PROCEDURE`, turned into the
//! stub-then-`ALTER` pair that keeps grants and works on every engine.

use super::error::SourceError;
use crate::schema::PROCEDURE_SCHEMAS;
use crate::tsql::{Token, TokenKind, checksum, has_separator, quote_name, tokenize};

/// One procedure as shipped in `procedures/<schema>.<name>.sql`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcedureSource {
    file: String,
    schema: String,
    name: String,
    text: String,
    create_offset: usize,
    checksum: String,
}

impl ProcedureSource {
    /// Parses a procedure file. The file must hold exactly one
    /// `CREATE PROCEDURE` as its first statement, no `GO`, and declare the
    /// procedure its file name promises.
    pub fn parse(file: &str, text: &str) -> Result<Self, SourceError> {
        let tokens = tokenize(text);
        let creates: Vec<usize> = (0..tokens.len()).filter(|&i| is_create_procedure(&tokens, i)).collect();
        if creates.len() != 1 {
            return Err(SourceError::ProcedureCount {
                file: file.to_string(),
                found: creates.len(),
            });
        }
        let create = creates[0];
        let first_code = tokens.iter().position(|t| !t.is_trivia());
        if first_code != Some(create) {
            return Err(SourceError::ProcedureNotFirst { file: file.to_string() });
        }
        if has_separator(text) {
            return Err(SourceError::ProcedureHasGo { file: file.to_string() });
        }
        let (schema, name) = declared_name(&tokens, create).ok_or_else(|| SourceError::ProcedureName {
            file: file.to_string(),
            declared: None,
        })?;
        let expected = file.strip_suffix(".sql").unwrap_or(file);
        if !format!("{schema}.{name}").eq_ignore_ascii_case(expected) {
            return Err(SourceError::ProcedureName {
                file: file.to_string(),
                declared: Some(format!("{schema}.{name}")),
            });
        }
        if !PROCEDURE_SCHEMAS.iter().any(|s| s.eq_ignore_ascii_case(&schema)) {
            return Err(SourceError::ProcedureSchema {
                file: file.to_string(),
                schema,
            });
        }
        Ok(Self {
            file: file.to_string(),
            schema,
            name,
            text: text.to_string(),
            create_offset: tokens[create].start,
            checksum: checksum(text),
        })
    }

    /// The file it came from, e.g. `fence_api.Acquire.sql`.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// `schema.name`, e.g. `fence_api.Acquire`.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }

    /// The shipped text, with line ends normalised to LF.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// SHA-256 of the shipped text, lower-case hex: what the journal records.
    pub fn checksum(&self) -> &str {
        &self.checksum
    }

    /// The shipped text with its `CREATE` turned into `ALTER`. Altering in
    /// place keeps the procedure's grants, and unlike `CREATE OR ALTER` it
    /// runs on every engine fencepost supports.
    pub fn alter_text(&self) -> String {
        let after_create = self.create_offset + "CREATE".len();
        format!(
            "{}ALTER{}",
            &self.text[..self.create_offset],
            &self.text[after_create..]
        )
    }

    /// A placeholder that makes the procedure exist, so the `ALTER` has
    /// something to alter.
    pub fn stub_text(&self) -> String {
        format!(
            "CREATE PROCEDURE {}.{} AS RETURN 0;",
            quote_name(&self.schema),
            quote_name(&self.name)
        )
    }
}

fn next_code<'t>(tokens: &'t [Token<'t>], after: usize) -> Option<(usize, &'t Token<'t>)> {
    tokens.iter().enumerate().skip(after + 1).find(|(_, t)| !t.is_trivia())
}

fn is_create_procedure(tokens: &[Token<'_>], i: usize) -> bool {
    tokens[i].is_keyword("CREATE")
        && next_code(tokens, i).is_some_and(|(_, t)| t.is_keyword("PROCEDURE") || t.is_keyword("PROC"))
}

/// Reads `schema.name` after `CREATE PROCEDURE`, either part bracketed or not.
fn declared_name(tokens: &[Token<'_>], create: usize) -> Option<(String, String)> {
    let (keyword, _) = next_code(tokens, create)?;
    let (schema_at, schema) = next_code(tokens, keyword)?;
    let (dot_at, dot) = next_code(tokens, schema_at)?;
    let (_, name) = next_code(tokens, dot_at)?;
    (dot.text == ".").then_some(())?;
    Some((identifier(schema)?, identifier(name)?))
}

fn identifier(token: &Token<'_>) -> Option<String> {
    match token.kind {
        TokenKind::Word => Some(token.text.to_string()),
        TokenKind::QuotedIdentifier if token.text.starts_with('[') => {
            Some(token.text[1..token.text.len() - 1].replace("]]", "]"))
        }
        TokenKind::QuotedIdentifier => Some(token.text[1..token.text.len() - 1].replace("\"\"", "\"")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACQUIRE: &str = "-- takes it\nCREATE PROCEDURE fence_api.Acquire @K int AS\nBEGIN\n  SELECT 1; -- CREATE PROCEDURE in a comment\nEND;\n";

    #[test]
    fn a_procedure_file_is_parsed_with_its_name() {
        let p = ProcedureSource::parse("fence_api.Acquire.sql", ACQUIRE).unwrap();
        assert_eq!(p.qualified_name(), "fence_api.Acquire");
        assert_eq!(p.checksum().len(), 64);
    }

    #[test]
    fn alter_text_changes_only_the_create_keyword() {
        let p = ProcedureSource::parse("fence_api.Acquire.sql", ACQUIRE).unwrap();
        assert_eq!(
            p.alter_text(),
            ACQUIRE.replacen("\nCREATE PROCEDURE", "\nALTER PROCEDURE", 1)
        );
    }

    #[test]
    fn a_file_without_a_create_procedure_is_rejected_naming_the_file() {
        let err = ProcedureSource::parse("fence_api.X.sql", "SELECT 1;").unwrap_err();
        assert!(matches!(&err, SourceError::ProcedureCount { found: 0, .. }));
        assert!(err.to_string().contains("fence_api.X.sql"), "{err}");
    }

    #[test]
    fn a_file_with_two_create_procedures_is_rejected_naming_the_file() {
        let text = "CREATE PROCEDURE fence_api.X AS SELECT 1;\nCREATE PROC fence_api.Y AS SELECT 2;";
        let err = ProcedureSource::parse("fence_api.X.sql", text).unwrap_err();
        assert!(matches!(&err, SourceError::ProcedureCount { found: 2, .. }));
        assert!(err.to_string().contains("fence_api.X.sql"), "{err}");
    }

    #[test]
    fn create_inside_strings_and_comments_does_not_count() {
        let text = "/* CREATE PROCEDURE a.b */ CREATE PROCEDURE fence_api.X AS SELECT N'CREATE PROC y';";
        assert!(ProcedureSource::parse("fence_api.X.sql", text).is_ok());
    }

    #[test]
    fn the_declared_name_must_match_the_file_name() {
        let err = ProcedureSource::parse("fence_api.Other.sql", ACQUIRE).unwrap_err();
        assert!(matches!(err, SourceError::ProcedureName { declared: Some(_), .. }));
    }

    #[test]
    fn bracketed_names_are_understood() {
        let text = "CREATE PROCEDURE [fence_api].[Acquire] AS SELECT 1;";
        assert!(ProcedureSource::parse("fence_api.Acquire.sql", text).is_ok());
    }

    #[test]
    fn a_procedure_outside_the_fence_schemas_is_rejected() {
        let err = ProcedureSource::parse("dbo.X.sql", "CREATE PROCEDURE dbo.X AS SELECT 1;").unwrap_err();
        assert!(matches!(err, SourceError::ProcedureSchema { .. }));
    }

    #[test]
    fn code_before_the_create_is_rejected() {
        let err = ProcedureSource::parse(
            "fence_api.X.sql",
            "SELECT 1;\nCREATE PROCEDURE fence_api.X AS SELECT 1;",
        )
        .unwrap_err();
        assert!(matches!(err, SourceError::ProcedureNotFirst { .. }));
    }

    #[test]
    fn a_go_line_is_rejected() {
        let err =
            ProcedureSource::parse("fence_api.X.sql", "CREATE PROCEDURE fence_api.X AS SELECT 1;\nGO\n").unwrap_err();
        assert!(matches!(err, SourceError::ProcedureHasGo { .. }));
    }

    #[test]
    fn a_go_line_with_a_semicolon_is_rejected_too() {
        let text = "CREATE PROCEDURE fence_api.X AS SELECT 1;\nGO;\nDROP TABLE fence.Resource;\n";
        let err = ProcedureSource::parse("fence_api.X.sql", text).unwrap_err();
        assert!(matches!(err, SourceError::ProcedureHasGo { .. }));
    }

    #[test]
    fn the_stub_creates_the_same_procedure() {
        let p = ProcedureSource::parse("fence_api.Acquire.sql", ACQUIRE).unwrap();
        assert_eq!(p.stub_text(), "CREATE PROCEDURE [fence_api].[Acquire] AS RETURN 0;");
    }
}
