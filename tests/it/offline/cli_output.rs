//! What the binary prints around its work, with no server: a document on
//! failure for the formats pipelines parse, each cause once, a quiet end on a
//! closed pipe, -q, --version, completions and the manual page.

use crate::support;

use std::io::Read;
use std::process::{Output, Stdio};

const UNREACHABLE: &str = "Server=tcp:127.0.0.1,1;User ID=u;Password=Secret#1";

fn fencepost(args: &[&str]) -> Output {
    support::binary::fencepost(args).output().expect("run fencepost")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_json_command_that_fails_prints_its_error_as_json() {
    for command in ["status", "migrate", "check", "bench"] {
        let output = fencepost(&[command, "--format", "json", "--connection", UNREACHABLE]);
        assert_eq!(output.status.code(), Some(2), "{command}");
        let document: serde_json::Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{command}: no JSON on stdout ({e}): {}", text(&output.stdout)));
        assert_eq!(document["error"]["kind"], "connect", "{command}: {document}");
        let message = document["error"]["message"].as_str().unwrap();
        assert!(message.contains("cannot reach 127.0.0.1:1"), "{command}: {message}");
        assert!(
            !text(&output.stdout).contains("Secret#1"),
            "{command}: the password leaked"
        );
    }
}

#[test]
fn input_refused_before_connecting_is_a_usage_error_in_json() {
    let output = fencepost(&["status", "--format", "json"]);
    assert_eq!(output.status.code(), Some(2));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    assert_eq!(document["error"]["kind"], "usage");
    assert!(
        document["error"]["message"]
            .as_str()
            .unwrap()
            .contains("FENCEPOST_CONNECTION")
    );
}

#[test]
fn a_junit_check_that_fails_prints_a_report_with_the_error() {
    let output = fencepost(&["check", "--format", "junit", "--connection", UNREACHABLE]);
    assert_eq!(output.status.code(), Some(2));
    let report = text(&output.stdout);
    assert!(report.starts_with("<?xml"), "{report}");
    assert!(report.contains("errors=\"1\""), "{report}");
    assert!(report.contains("type=\"connect\""), "{report}");
}

#[test]
fn a_text_command_that_fails_prints_nothing_on_stdout() {
    let output = fencepost(&["status", "--connection", UNREACHABLE]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(text(&output.stdout), "");
}

#[test]
fn each_cause_of_an_error_is_printed_once() {
    let missing = tempfile::tempdir().unwrap().path().join("absent");
    let output = fencepost(&["script", "--source-dir", missing.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let err = text(&output.stderr);
    assert_eq!(err.matches("os error 2").count(), 1, "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn a_reader_that_closes_the_pipe_early_ends_the_command_quietly() {
    let mut child = support::binary::fencepost(["script"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run fencepost");
    let mut first = [0u8; 16];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The reader is gone: the rest of the script meets a closed pipe.
    let output = child.wait_with_output().unwrap();
    let err = text(&output.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err, "", "a closed pipe printed: {err}");
}

#[test]
fn quiet_leaves_out_progress_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deploy.sql");
    let path = path.to_str().unwrap();
    let loud = fencepost(&["script", "--output", path]);
    assert!(
        text(&loud.stderr).contains("wrote the script to"),
        "{}",
        text(&loud.stderr)
    );
    let quiet = fencepost(&["script", "--output", path, "-q"]);
    assert!(quiet.status.success());
    assert_eq!(text(&quiet.stderr), "");
}

#[test]
fn version_names_the_procedure_contract() {
    let output = fencepost(&["--version"]);
    assert!(output.status.success());
    let version = fencepost::client::CONTRACT_VERSION.to_string();
    assert_eq!(
        text(&output.stdout).trim(),
        format!("fencepost {} (procedure contract {version})", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn completions_and_the_manual_page_cover_every_command() {
    let bash = fencepost(&["completions", "bash"]);
    assert!(bash.status.success());
    let manual = fencepost(&["man"]);
    assert!(manual.status.success());
    let (bash, manual) = (text(&bash.stdout), text(&manual.stdout));
    assert!(manual.starts_with(".ie"), "not roff: {manual}");
    for command in ["migrate", "status", "script", "check", "bench"] {
        assert!(bash.contains(command), "completions lack {command}");
        assert!(manual.contains(command), "the manual page lacks {command}");
    }
    let unknown = fencepost(&["completions", "cmd.exe"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("bash"), "{}", text(&unknown.stderr));
}

#[test]
fn a_grant_outside_the_fence_roles_is_refused_before_connecting() {
    let output = fencepost(&["migrate", "--grant", "db_owner=svc", "--connection", UNREACHABLE]);
    assert_eq!(output.status.code(), Some(2));
    let err = text(&output.stderr);
    assert!(
        err.contains("not a fence role") && err.contains("fence_service"),
        "{err}"
    );
    assert!(!err.contains("cannot reach"), "it connected first: {err}");
}

#[test]
fn an_environment_without_a_file_says_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let output = support::binary::fencepost(["status", "--environment", "prod"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let err = text(&output.stderr);
    assert!(err.contains("fencepost.toml") && err.contains("--config"), "{err}");
}

#[test]
fn an_environment_the_file_lacks_is_named_with_the_ones_it_has() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("deploy.toml");
    std::fs::write(&file, "[environments.staging]\nconnection_env = \"STAGING_DB\"\n").unwrap();
    let output = fencepost(&["status", "-e", "prod", "--config", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2));
    let err = text(&output.stderr);
    assert!(err.contains("prod") && err.contains("staging"), "{err}");
}
