//! Babelfish's PostgreSQL side, reached with `psql` at the URL in
//! `FENCEPOST_TEST_POSTGRES`: where the script that makes the fence
//! procedures SECURITY DEFINER runs. psql rather than a driver: it is how an
//! administrator runs the script, `\set` and all.

use std::io::Write;
use std::process::{Command, Stdio};

use fencepost::deploy::render_babelfish_postgres_script;

/// The variable holding a PostgreSQL URL for a superuser (or the owner of
/// the Babelfish database) on the engine that `FENCEPOST_TEST_MSSQL` names.
pub const POSTGRES_ENV: &str = "FENCEPOST_TEST_POSTGRES";

/// The PostgreSQL URL, or `None` after printing the skip line for `test`.
pub fn postgres_or_skip(test: &str) -> Option<String> {
    match std::env::var(POSTGRES_ENV) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            super::skip(test, &format!("{POSTGRES_ENV} not set"));
            None
        }
    }
}

/// Runs `sql` with psql (stopping at the first error) and returns its
/// output, notices included; panics with psql's stderr if it fails.
pub fn psql(url: &str, sql: &str) -> String {
    let mut child = Command::new("psql")
        .args([url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run psql");
    child.stdin.take().unwrap().write_all(sql.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "psql failed: {text}");
    text
}

/// Runs `fencepost script --target babelfish-postgres` for `database` and
/// returns psql's output (the script's notice says what it changed).
pub fn run_security_definer_script(url: &str, database: &str) -> String {
    psql(url, &render_babelfish_postgres_script(database))
}

/// The fence procedures of `database` that are not SECURITY DEFINER, as
/// `schema.name` in PostgreSQL's lower case, read from PostgreSQL's catalog.
pub fn procedures_not_security_definer(url: &str, database: &str) -> Vec<String> {
    let sql = format!(
        "SELECT s.orig_name::text COLLATE \"C\" || '.' || p.proname::text COLLATE \"C\" FROM pg_proc p \
         JOIN pg_namespace n ON n.oid = p.pronamespace \
         JOIN sys.babelfish_namespace_ext s ON s.nspname = n.nspname \
         JOIN sys.babelfish_sysdatabases d ON d.dbid = s.dbid \
         WHERE d.name = '{}' AND s.orig_name::text IN ('fence_api', 'fence_admin') AND NOT p.prosecdef \
         ORDER BY 1;",
        database.replace('\'', "''")
    );
    psql(url, &sql).lines().map(str::to_owned).collect()
}
