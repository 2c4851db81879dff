//! A database whose migration history this fencepost does not ship: an
//! applied migration whose file changed since, or one a newer fencepost
//! applied. `status` names the migration and says that `migrate` stops, and
//! `migrate` refuses with what to do, before it changes anything: the
//! migration it also has pending is neither applied nor recorded. The
//! binary runs against a database of its own, as a deploy pipeline runs it.

use crate::support;

use std::path::Path;

use support::TestDatabase;
use support::binary::{fencepost_on, stderr, stdout};
use support::deploy::{exists, history, shipped, shipped_versions_and, write_sources};

/// A pending migration beside the refused history: a deploy that ran
/// anything before refusing would leave this table behind.
const PENDING: (&str, &str) = (
    "V102__pending_behind_history.sql",
    "CREATE TABLE fence.PendingBehindHistory (Id int NOT NULL);\n",
);

fn run(db: &TestDatabase, args: &[&str]) -> std::process::Output {
    fencepost_on(&db.ado(), args).output().expect("run fencepost")
}

/// The line of `status`'s text output that names `item`.
fn line_of<'a>(text: &'a str, item: &str) -> &'a str {
    text.lines()
        .find(|line| line.trim_start().starts_with(item))
        .unwrap_or_else(|| panic!("status does not list {item}:\n{text}"))
}

/// Writes the shipped sources plus [`PENDING`] into `root`.
fn write_with_pending(root: &Path) {
    let sources = shipped().with_migration(PENDING.0, PENDING.1).unwrap();
    write_sources(root, &sources);
}

/// What `status` and `migrate` say about `refused` (the migration as they
/// name it) with the sources in `source_dir`; `state` is status's word for
/// it and `refusal` a piece of migrate's message.
async fn expect_refused(db: &TestDatabase, source_dir: &str, refused: &str, state: &str, refusal: &str) {
    let status = run(db, &["status", "--source-dir", source_dir]);
    let text = stdout(&status);
    assert_eq!(status.status.code(), Some(1), "{text}{}", stderr(&status));
    assert!(line_of(&text, refused).ends_with(state), "{text}");
    assert!(
        line_of(&text, "V102__pending_behind_history").ends_with("pending"),
        "{text}"
    );
    // The advice is the refusal's, never "run fencepost migrate": that
    // would stop on this very migration.
    assert!(
        text.contains("`fencepost migrate` stops until this is resolved") && text.contains(refusal),
        "{text}"
    );
    assert!(!text.contains("run `fencepost migrate` to deploy"), "{text}");

    let json = run(db, &["status", "--source-dir", source_dir, "--format", "json"]);
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).expect("status --format json");
    let listed = document["migrations"]
        .as_array()
        .expect("migrations")
        .iter()
        .find(|m| m["name"] == refused)
        .unwrap_or_else(|| panic!("status --format json does not list {refused}: {document}"));
    assert_eq!(
        listed["state"],
        if state.starts_with("DIVERGENT") {
            "divergent"
        } else {
            "not_shipped"
        },
        "{listed}"
    );

    let migrate = run(db, &["migrate", "--source-dir", source_dir]);
    let err = stderr(&migrate);
    assert_eq!(migrate.status.code(), Some(2), "{}{err}", stdout(&migrate));
    assert!(err.contains(refused) && err.contains(refusal), "{err}");
    assert!(
        !exists(db, "fence.PendingBehindHistory").await,
        "the refused deploy ran its pending migration: {err}"
    );
}

#[tokio::test]
async fn a_changed_or_a_newer_migration_is_named_by_status_and_refused_by_migrate_before_it_changes_anything() {
    let test = "a_changed_or_a_newer_migration_is_named_by_status_and_refused_by_migrate_before_it_changes_anything";
    let Some(db) = TestDatabase::deployed(test).await else {
        return;
    };

    // An applied migration's file edited after the deploy.
    let edited = tempfile::tempdir().unwrap();
    write_with_pending(edited.path());
    let v1 = edited.path().join("migrations/V1__lease_tables.sql");
    let mut text = std::fs::read_to_string(&v1).unwrap();
    text.push_str("\n-- edited after it was applied\n");
    std::fs::write(&v1, text).unwrap();
    expect_refused(
        &db,
        edited.path().to_str().unwrap(),
        "V1__lease_tables",
        "DIVERGENT: the shipped file changed after it was applied",
        "ship a new migration instead of editing an applied one",
    )
    .await;
    let before = history(&db).await;
    assert_eq!(before, shipped_versions_and(&[]));

    // A migration a newer fencepost applied.
    db.exec(
        "INSERT INTO fence.SchemaHistory (version, name, applied_on, checksum)
         VALUES (900, N'from_a_newer_fencepost', N'2026-01-01T00:00:00Z', N'1');",
    )
    .await;
    let unedited = tempfile::tempdir().unwrap();
    write_with_pending(unedited.path());
    expect_refused(
        &db,
        unedited.path().to_str().unwrap(),
        "V900__from_a_newer_fencepost",
        "UNKNOWN: applied by a newer fencepost",
        "deploy with the newer fencepost",
    )
    .await;
    assert_eq!(history(&db).await, shipped_versions_and(&[900]));
    db.drop().await;
}
