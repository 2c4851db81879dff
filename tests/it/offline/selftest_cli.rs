//! `fencepost selftest`'s input, refused before anything connects.

use crate::support::binary;

/// An address where nothing listens: a command that got past its input
/// checks would fail to connect instead, with another message.
const NOWHERE: &str =
    "Server=tcp:127.0.0.1,1;Database=app;User ID=u;Password=p;Encrypt=DANGER_PLAINTEXT;Connect Timeout=2";

#[test]
fn list_names_every_check_in_run_order_without_a_server() {
    let output = binary::run(&["selftest", "--list"]);
    assert_eq!(output.status.code(), Some(0), "{}", binary::stderr(&output));
    let names: Vec<String> = binary::stdout(&output).lines().map(str::to_string).collect();
    assert_eq!(names, fencepost::selftest::check_names());
    assert_eq!(names.first().map(String::as_str), Some("handover"));
}

#[test]
fn an_unknown_check_is_refused_naming_the_checks_there_are() {
    let output = binary::run(&["selftest", "--connection", NOWHERE, "--check", "handover,nope"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = binary::stderr(&output);
    assert!(stderr.contains("no check is named \"nope\""), "{stderr}");
    assert!(stderr.contains("late_release_and_renew"), "{stderr}");
}

#[test]
fn an_empty_key_prefix_is_taken_as_the_reserved_root_alone() {
    // The prefix only ever follows `fencepost-selftest:`, so an empty one is
    // no risk to the user's keys: the run goes on, to the connection.
    let output = binary::run(&["selftest", "--connection", NOWHERE, "--key-prefix", " "]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = binary::stderr(&output);
    assert!(!stderr.contains("--key-prefix"), "{stderr}");
    assert!(stderr.contains("cannot reach"), "{stderr}");
}

#[test]
fn a_failure_to_run_under_json_prints_a_json_error() {
    let output = binary::run(&["selftest", "--connection", NOWHERE, "--format", "json"]);
    assert_eq!(output.status.code(), Some(2));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("a JSON error document");
    assert!(json["error"]["message"].is_string(), "{json}");
}

#[test]
fn a_key_prefix_is_measured_in_utf16_code_units_as_a_key_is() {
    // 100 characters, 200 UTF-16 code units: past the 128 a prefix may have.
    let prefix = "😀".repeat(100);
    let output = binary::run(&["selftest", "--connection", NOWHERE, "--key-prefix", &prefix]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = binary::stderr(&output);
    assert!(stderr.contains("at most 128 UTF-16 code units"), "{stderr}");
}

#[test]
fn a_source_dir_without_a_scratch_database_is_refused() {
    let output = binary::run(&["selftest", "--connection", NOWHERE, "--source-dir", "."]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = binary::stderr(&output);
    assert!(stderr.contains("--scratch-database"), "{stderr}");
}

#[test]
fn a_source_dir_without_the_fence_is_refused_before_anything_connects() {
    let empty = std::env::temp_dir().join(format!("fencepost-no-sources-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let output = binary::run(&[
        "selftest",
        "--connection",
        NOWHERE,
        "--scratch-database",
        "--source-dir",
        empty.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir(&empty);
    assert_eq!(output.status.code(), Some(2));
    let stderr = binary::stderr(&output);
    assert!(stderr.contains("reading T-SQL from"), "{stderr}");
}

#[test]
fn help_gives_every_exit_the_binary_gives_and_which_t_sql_the_scratch_database_runs() {
    let output = binary::run(&["selftest", "--help"]);
    assert_eq!(output.status.code(), Some(0), "{}", binary::stderr(&output));
    let help = binary::stdout(&output).split_whitespace().collect::<Vec<_>>().join(" ");
    // A run in which every check was skipped proved nothing: 1, as a failure.
    assert!(
        help.contains("when none held (every check was skipped: nothing was proven)"),
        "{help}"
    );
    assert!(help.contains("left behind"), "{help}");
    assert!(help.contains("130 when stopped by Ctrl-C, 143 by SIGTERM"), "{help}");
    // The scratch database runs the binary's T-SQL unless told otherwise.
    assert!(
        help.contains("the T-SQL built into this binary, not what your database runs"),
        "{help}"
    );
}
