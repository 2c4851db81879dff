//! A procedure's definition as the server holds it, beside the shipped text:
//! what `status --diff` shows for a drifted procedure.

use similar::TextDiff;

use crate::connection::Connection;

use crate::deploy::error::DeployError;
use crate::source::ProcedureSource;

/// The definition of `schema.name` on the server, or `None` when the login
/// cannot read it (encrypted, or no VIEW DEFINITION) or it does not exist.
pub async fn read_definition(conn: &mut Connection, qualified_name: &str) -> Result<Option<String>, DeployError> {
    let rows = conn
        .query(
            "SELECT m.definition FROM sys.sql_modules AS m WHERE m.object_id = OBJECT_ID(@P1);",
            &[&qualified_name],
        )
        .await
        .map_err(DeployError::server(format!(
            "reading the definition of {qualified_name}"
        )))?
        .into_first_result()
        .await
        .map_err(DeployError::server(format!(
            "reading the definition of {qualified_name}"
        )))?;
    Ok(rows
        .first()
        .and_then(|row| row.get::<&str, usize>(0))
        .map(str::to_string))
}

/// A unified diff from the shipped text of `procedure` (as deployed: its
/// `ALTER`) to `server`, both from their `CREATE`/`ALTER` keyword on: some
/// engines keep the comments before it, others do not.
pub fn definition_diff(procedure: &ProcedureSource, server: &str) -> String {
    let shipped = procedure.alter_text();
    let (shipped, server) = (from_keyword(&shipped), from_keyword(server));
    TextDiff::from_lines(shipped, server)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("shipped procedures/{}", procedure.file()),
            &format!("server {}", procedure.qualified_name()),
        )
        .to_string()
}

/// `text` from the line where its `CREATE` or `ALTER PROCEDURE` starts.
fn from_keyword(text: &str) -> &str {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let upper = line.trim_start().to_ascii_uppercase();
        if upper.starts_with("CREATE PROC") || upper.starts_with("ALTER PROC") {
            return &text[offset..];
        }
        offset += line.len();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str = "-- Reads a lease.\nCREATE PROCEDURE fence_api.Inspect\n    @ResourceKey nvarchar(4000)\nAS\nBEGIN\n    SELECT N'Found' AS Outcome, 1 AS Generation;\nEND;\n";

    #[test]
    fn the_diff_shows_only_what_changed_on_the_server() {
        let procedure = ProcedureSource::parse("fence_api.Inspect.sql", SHIPPED).unwrap();
        // As Babelfish keeps it: the ALTER as deployed, without the comment
        // before it, and one line changed by hand.
        let server = "ALTER PROCEDURE fence_api.Inspect\n    @ResourceKey nvarchar(4000)\nAS\nBEGIN\n    SELECT N'Found' AS Outcome, 2 AS Generation;\nEND;\n";
        let diff = definition_diff(&procedure, server);
        assert!(
            diff.starts_with("--- shipped procedures/fence_api.Inspect.sql\n+++ server fence_api.Inspect\n"),
            "{diff}"
        );
        assert!(
            diff.contains("\n-    SELECT N'Found' AS Outcome, 1 AS Generation;\n"),
            "{diff}"
        );
        assert!(
            diff.contains("\n+    SELECT N'Found' AS Outcome, 2 AS Generation;\n"),
            "{diff}"
        );
        assert!(!diff.contains("Reads a lease"), "{diff}");
    }

    #[test]
    fn an_unchanged_definition_has_an_empty_diff() {
        let procedure = ProcedureSource::parse("fence_api.Inspect.sql", SHIPPED).unwrap();
        assert_eq!(definition_diff(&procedure, &procedure.alter_text()), "");
    }
}
