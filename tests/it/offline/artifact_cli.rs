//! `fencepost artifact verify` and `sweep` driven as a pipeline drives them,
//! with no server.

use crate::support;
use support::binary::{run as fencepost, stderr, stdout};

#[test]
fn verify_passes_a_folder_that_refuses_an_overwrite_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let text = fencepost(&["artifact", "verify", "--store", &url, "--prefix", "fenced"]);
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    let said = stdout(&text);
    assert!(
        said.contains("refuses to replace an object written create-only"),
        "{said}"
    );
    assert!(said.contains("the store's clock is in step with this host's"), "{said}");
    assert!(said.contains("the probe was deleted"), "{said}");

    let json = fencepost(&[
        "artifact", "verify", "--store", &url, "--prefix", "fenced", "--format", "json",
    ]);
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    let document: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(document["create_only"], true);
    assert_eq!(document["refused_as"], "already_exists");
    assert_eq!(document["clock_skew_ms"], 0);
    assert_eq!(document["probe_deleted"], true);
    assert_eq!(document["warnings"], serde_json::json!([]));
    assert_eq!(document["problem"], serde_json::Value::Null);
    // The probe was removed again: the folder holds only the prefix's mark.
    let files = walk(dir.path());
    assert_eq!(files, [dir.path().join("fenced/_fencepost")]);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn verify_never_prints_the_secrets_a_store_url_carries() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}?sig=s3cr3t", dir.path().display());
    for format in ["text", "json"] {
        let output = fencepost(&["artifact", "verify", "--store", &url, "--format", format]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let said = stdout(&output);
        assert!(!said.contains("s3cr3t"), "{said}");
        assert!(said.contains("?***"), "{said}");
    }
    let output = fencepost(&["artifact", "verify", "--store", "ftp://user:hunter2@host/x?sig=s3cr3t"]);
    assert_eq!(output.status.code(), Some(2));
    let said = format!("{}{}", stdout(&output), stderr(&output));
    assert!(!said.contains("hunter2") && !said.contains("s3cr3t"), "{said}");
    assert!(said.contains("ftp://***@host/x?***"), "{said}");
}

#[test]
fn verify_refuses_a_url_it_cannot_use_naming_the_forms_it_takes() {
    let output = fencepost(&["artifact", "verify", "--store", "ftp://host/x", "--format", "json"]);
    assert_eq!(output.status.code(), Some(2));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let message = document["error"]["message"].as_str().unwrap();
    assert!(message.contains("az://container/path"), "{message}");
}

#[test]
fn sweep_refuses_a_grace_of_zero_or_not_above_twice_a_named_longest_lease_before_connecting() {
    // No connection is given: the refusal comes first.
    let output = fencepost(&["artifact", "sweep", "--store", "memory://", "--older-than", "0s"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(message.contains("more than zero"), "{message}");
    assert!(message.contains("--older-than"), "{message}");

    let output = fencepost(&[
        "artifact",
        "sweep",
        "--store",
        "memory://",
        "--older-than",
        "20m",
        "--longest-lease",
        "10m",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("must exceed twice"), "{}", stderr(&output));
}

#[test]
fn sweep_refuses_a_whole_store_or_an_unmarked_prefix_before_connecting() {
    let whole = fencepost(&["artifact", "sweep", "--store", "memory://", "--older-than", "1h"]);
    assert_eq!(whole.status.code(), Some(2));
    assert!(stderr(&whole).contains("no prefix to sweep"), "{}", stderr(&whole));
    assert!(stderr(&whole).contains("--whole-store"), "{}", stderr(&whole));

    // A folder no publishing store has opened: the wrong --store or
    // --prefix, or artefacts of fencepost 0.1.0.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let sweep = || {
        fencepost(&[
            "artifact",
            "sweep",
            "--store",
            &url,
            "--prefix",
            "reports",
            "--older-than",
            "1h",
        ])
    };
    std::fs::create_dir_all(dir.path().join("reports")).unwrap();
    let unmarked = sweep();
    assert_eq!(unmarked.status.code(), Some(2));
    let message = stderr(&unmarked);
    assert!(message.contains("not marked as an artefact folder"), "{message}");
    assert!(message.contains("--allow-unmarked"), "{message}");

    // Once opened to publish, the prefix is marked: the sweep goes on, to
    // the connection it was not given.
    let verify = fencepost(&["artifact", "verify", "--store", &url, "--prefix", "reports"]);
    assert_eq!(verify.status.code(), Some(0), "{}", stderr(&verify));
    let marked = sweep();
    assert!(!stderr(&marked).contains("not marked"), "{}", stderr(&marked));
    assert!(stderr(&marked).contains("FENCEPOST_CONNECTION"), "{}", stderr(&marked));
}

#[test]
fn sweep_without_a_connection_names_the_flag_and_the_variable() {
    let output = fencepost(&[
        "artifact",
        "sweep",
        "--store",
        "memory://",
        "--older-than",
        "3h",
        "--longest-lease",
        "1h",
        "--whole-store",
        "--allow-unmarked",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.contains("--connection") && message.contains("FENCEPOST_CONNECTION"),
        "{message}"
    );
}

#[test]
fn sweep_refuses_a_duration_it_cannot_read() {
    let output = fencepost(&["artifact", "sweep", "--store", "memory://", "--older-than", "soon"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("90m, 3h, 2d"), "{}", stderr(&output));
}
