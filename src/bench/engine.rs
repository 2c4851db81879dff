//! The engine's own name for itself, for the report's `engine` field.

use super::BenchError;
use crate::Connection;

/// "Babelfish 4.2.0 (…)" on Babelfish, the first line of `@@VERSION` on SQL
/// Server: enough to tell runs on different engines apart.
pub(crate) async fn name(admin: &mut Connection) -> Result<String, BenchError> {
    const SQL: &str = "SELECT CAST(SERVERPROPERTY('BabelfishVersion') AS nvarchar(128)) AS Babelfish, \
                              CAST(@@VERSION AS nvarchar(4000)) AS Version;";
    let row = admin
        .simple_query(SQL)
        .await
        .map_err(BenchError::server("reading the engine's version"))?
        .into_row()
        .await
        .map_err(BenchError::server("reading the engine's version"))?;
    let text = |column: &str| {
        row.as_ref()
            .and_then(|r| r.try_get::<&str, _>(column).ok().flatten())
            .map(|s| s.trim().to_string())
    };
    let version = text("Version").unwrap_or_default();
    let first_line = version.lines().next().unwrap_or("unknown").trim().to_string();
    Ok(match text("Babelfish") {
        Some(babelfish) => format!("Babelfish {babelfish} ({first_line})"),
        None => first_line,
    })
}
