//! docs/check-report.schema.json holds every JSON document `check` prints:
//! the render snapshots, reports of fixture catalogs, the binary's own
//! reports, and the error document it prints when it cannot run.

use std::path::{Path, PathBuf};

use fencepost::audit::{Format, render};
use serde_json::Value;
use support::binary::{run as fencepost, stdout};

use super::audit_render::{azure_accepted_report, broken_report, clean_report};
use crate::support;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn validator() -> jsonschema::Validator {
    let text = std::fs::read_to_string(root().join("docs/check-report.schema.json")).expect("the schema file");
    let schema: Value = serde_json::from_str(&text).expect("the schema is JSON");
    jsonschema::draft202012::new(&schema).expect("the schema is a valid draft 2020-12 schema")
}

/// Every error the schema finds in `document`, one a line, named by `what`.
fn violations(validator: &jsonschema::Validator, what: &str, document: &str) -> Vec<String> {
    let value: Value =
        serde_json::from_str(document).unwrap_or_else(|e| panic!("{what} is not JSON ({e}): {document}"));
    validator
        .iter_errors(&value)
        .map(|e| format!("{what}: {} at {}", e, e.instance_path()))
        .collect()
}

/// The JSON snapshots of the render tests, each without its insta header.
fn json_snapshots() -> Vec<(PathBuf, String)> {
    let dir = root().join("tests/it/offline/snapshots");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("the snapshots folder") {
        let path = entry.expect("a snapshot").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("it__offline__audit_render__") && name.ends_with(".snap")) {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read a snapshot");
        // An insta snapshot: `---`, its metadata, `---`, then the value.
        let body = text.splitn(3, "---\n").nth(2).expect("an insta snapshot").to_string();
        if body.trim_start().starts_with('{') {
            found.push((path, body));
        }
    }
    found.sort();
    found
}

#[test]
fn the_render_snapshots_json_holds_to_the_schema() {
    let validator = validator();
    let snapshots = json_snapshots();
    assert!(snapshots.len() >= 2, "the JSON render snapshots: {snapshots:?}");
    let errors: Vec<String> = snapshots
        .iter()
        .flat_map(|(path, body)| violations(&validator, &path.display().to_string(), body))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn reports_of_fixture_catalogs_hold_to_the_schema() {
    let validator = validator();
    let mut errors = Vec::new();
    for (what, report) in [
        ("clean", clean_report()),
        ("findings and cannot verify", broken_report()),
        ("Azure SQL Database, accepted", azure_accepted_report()),
    ] {
        errors.extend(violations(&validator, what, &render(&report, Format::Json)));
    }
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

#[test]
fn the_binarys_reports_and_error_documents_hold_to_the_schema() {
    let validator = validator();
    let mut errors = Vec::new();
    // The offline lint, with and without an accepted rule.
    for args in [
        &["check", "--offline", "--format", "json"][..],
        &[
            "check",
            "--offline",
            "--format",
            "json",
            "--accept-unverifiable",
            "FP002",
        ],
    ] {
        let output = fencepost(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        errors.extend(violations(&validator, &args.join(" "), &stdout(&output)));
    }
    // Could not run: nothing listens on port 1 of loopback.
    let output = fencepost(&[
        "check",
        "--format",
        "json",
        "--connection",
        "Server=tcp:127.0.0.1,1;User ID=u;Password=Secret#1",
    ]);
    assert_eq!(output.status.code(), Some(2));
    errors.extend(violations(&validator, "unreachable server", &stdout(&output)));
    // Bad input, refused before connecting.
    let dir = tempfile::tempdir().expect("a temporary folder");
    let config = dir.path().join("fencepost.toml");
    std::fs::write(
        &config,
        "[environments.azure]\nconnection_env = \"NO_SUCH_VARIABLE_SET\"\naccept_unverifiable = [\"FP2\"]\n",
    )
    .expect("write the config");
    let output = fencepost(&[
        "check",
        "--format",
        "json",
        "--config",
        config.to_str().unwrap(),
        "--environment",
        "azure",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let document = stdout(&output);
    assert!(document.contains("\"usage\""), "{document}");
    errors.extend(violations(&validator, "unknown rule in the environment", &document));
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// One way to break a rendered report.
type Break = fn(&mut Value);

#[test]
fn the_schema_refuses_a_report_that_breaks_it() {
    let validator = validator();
    let report: Value = serde_json::from_str(&render(&azure_accepted_report(), Format::Json)).unwrap();
    assert!(violations(&validator, "as rendered", &report.to_string()).is_empty());
    // An exit status check never gives, an outcome it has no word for, and
    // an accepted rule that does not say what accepted it: each refused.
    let breaks: [(&str, Break); 3] = [
        ("exit 2 in a report", |r| r["exit_code"] = 2.into()),
        ("an unknown outcome", |r| r["rules"][0]["outcome"] = "skipped".into()),
        ("an acceptance without accepted_by", |r| {
            r["accepted_unverifiable"][0]
                .as_object_mut()
                .unwrap()
                .remove("accepted_by");
        }),
    ];
    for (what, break_it) in breaks {
        let mut broken = report.clone();
        break_it(&mut broken);
        assert!(
            !violations(&validator, what, &broken.to_string()).is_empty(),
            "the schema took {what}"
        );
    }
}
