//! docs/cli.md is `fencepost man --markdown`: the reference a reader without
//! a build finds is the binary's own help. `FENCEPOST_UPDATE_CLI_DOC=1` (or
//! `make cli-doc`) writes it anew instead of failing on a difference.

use crate::support::binary::{run, stderr, stdout};

/// The reference documents every command, `artifact` included: only a build
/// with the `artifacts` feature (a default one) can write or check it.
#[cfg(feature = "artifacts")]
#[test]
fn docs_cli_md_is_what_the_binary_prints() {
    let output = run(&["man", "--markdown"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let printed = stdout(&output);
    for heading in [
        "## `fencepost migrate`",
        "## `fencepost lease force-release`",
        "## `fencepost check`",
    ] {
        assert!(printed.contains(heading), "no {heading} in:\n{printed}");
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/cli.md");
    if std::env::var("FENCEPOST_UPDATE_CLI_DOC").as_deref() == Ok("1") {
        std::fs::write(&path, &printed).unwrap();
        return;
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == printed,
        "docs/cli.md differs from `fencepost man --markdown`: run `make cli-doc` (FENCEPOST_UPDATE_CLI_DOC=1 for \
         this test) and commit the result"
    );
}
