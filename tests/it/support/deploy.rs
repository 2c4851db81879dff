//! What the deploy integrity tests share: the shipped sources, and questions
//! about what a deploy left behind.

use std::path::Path;

use fencepost::deploy::Sources;

use crate::support::{TestDatabase, connect_ado};

pub fn shipped() -> Sources {
    Sources::embedded().expect("embedded sources")
}

/// The shipped migrations' versions, then `extra`: what the history holds
/// after a deploy of the shipped sources plus test migrations `extra`.
pub fn shipped_versions_and(extra: &[i32]) -> Vec<i32> {
    let mut versions: Vec<i32> = shipped().migrations().iter().map(|m| m.version()).collect();
    versions.extend_from_slice(extra);
    versions
}

/// The versions in the migration history, in order.
pub async fn history(db: &TestDatabase) -> Vec<i32> {
    db.query("SELECT version FROM fence.SchemaHistory ORDER BY version;")
        .await
        .iter()
        .map(|r| r.get::<i32, usize>(0).unwrap())
        .collect()
}

/// Whether `OBJECT_ID` finds `object`.
pub async fn exists(db: &TestDatabase, object: &str) -> bool {
    let rows = db
        .query(&format!(
            "SELECT CASE WHEN OBJECT_ID(N'{object}') IS NULL THEN 0 ELSE 1 END;"
        ))
        .await;
    rows[0].get::<i32, usize>(0) == Some(1)
}

/// The definition the server holds for `procedure`.
pub async fn definition(db: &TestDatabase, procedure: &str) -> String {
    let rows = db
        .query(&format!("SELECT OBJECT_DEFINITION(OBJECT_ID(N'{procedure}'));"))
        .await;
    rows[0].get::<&str, usize>(0).unwrap_or_default().to_string()
}

/// Runs a rendered script on one connection as a client that carries on
/// after errors does (SSMS without SQLCMD mode): every batch, whatever failed
/// before. Returns the errors, in order.
pub async fn run_carrying_on(db: &TestDatabase, script: &str) -> Vec<String> {
    // sqlcmd directives (lines starting with ':') are for sqlcmd, not the server.
    let sql: String = script
        .lines()
        .filter(|l| !l.starts_with(':'))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut conn = connect_ado(&db.ado()).await;
    let mut errors = Vec::new();
    for batch in fencepost::deploy::split_batches(&sql).unwrap() {
        let result = match conn.simple_query(batch.text).await {
            Ok(stream) => stream.into_results().await.map(drop),
            Err(e) => Err(e),
        };
        if let Err(e) = result {
            errors.push(e.to_string());
        }
    }
    errors
}

/// Writes a source set into `root` in the layout `--source-dir` reads.
pub fn write_sources(root: &Path, sources: &Sources) {
    let mut files: Vec<(String, String)> = Vec::new();
    for m in sources.migrations() {
        files.push((format!("migrations/{}", m.file()), m.migration().sql().unwrap().into()));
    }
    for p in sources.procedures() {
        files.push((format!("procedures/{}", p.file()), p.text().into()));
    }
    for p in sources.permissions() {
        files.push((format!("permissions/{}", p.file()), p.text().into()));
    }
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}
