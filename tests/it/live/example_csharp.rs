//! The C# example (`examples/csharp/`), compiled with Mono's `mcs` and run
//! on Mono's System.Data.SqlClient against a database `fencepost migrate`
//! deployed, as a login that holds only `fence_service`: the recipe of
//! docs/callers.md is the code that ran. Its lines are asserted one by one.
//!
//! Without `mcs` and `mono` the test reports itself skipped, unless
//! `FENCEPOST_REQUIRE_CSHARP=1` (which `.ci/run` sets after installing them)
//! makes that a failure.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::TestDatabase;
use support::babelfish_postgres::{postgres_or_skip, run_security_definer_script};
use support::binary::{fencepost_on, stderr, stdout, tokio};

/// What the program prints after its first line (the contract version the
/// database answers, asserted against the one this crate deploys), line by
/// line, on any engine.
const EXPECTED: &[&str] = &[
    "cycle: provision Created",
    "cycle: acquired generation 1, lease until Utc",
    "cycle: renewed while working",
    "cycle: publish-and-release Published",
    "replay: outcome before any publish Unknown",
    "replay: the first publish's reply is treated as lost",
    "replay: replay AlreadyPublished",
    "replay: outcome Published",
    "handover: A acquired generation 1",
    "handover: A's lease ran out on the server's clock",
    "handover: B Acquired generation 2",
    "handover: B publish-and-release Published",
    "handover: A keeper: Lost, work cancelled True",
    "handover: A publish Superseded",
    "handover: A release NotHolder",
    "handover: A renew Lost",
    "handover: B replay AlreadyPublished",
    "handover: read generation 2 payload report by B",
    "refused: over-long key 50101, retryable False",
    "refused: nil owner 50102, retryable False",
    "done: ",
];

/// Whether `tool` runs at all (`mcs --version`, `mono --version`).
fn installed(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Compiles the example's sources into `dir`, returning the program's path.
fn compile(dir: &Path) -> PathBuf {
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/csharp");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&sources)
        .expect("examples/csharp")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "cs"))
        .collect();
    files.sort();
    let program = dir.join("fenced-report.exe");
    let output = Command::new("mcs")
        .arg("-warnaserror+")
        .arg(format!("-out:{}", program.display()))
        .arg("-r:System.Data.dll")
        .args(&files)
        .output()
        .expect("run mcs");
    assert!(
        output.status.success(),
        "mcs refused the example:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    program
}

#[tokio::test]
async fn the_csharp_example_runs_the_recipe_as_a_fence_service_login() {
    const TEST: &str = "the_csharp_example_runs_the_recipe_as_a_fence_service_login";
    if !(installed("mcs") && installed("mono")) {
        assert_ne!(
            std::env::var("FENCEPOST_REQUIRE_CSHARP").as_deref(),
            Ok("1"),
            "FENCEPOST_REQUIRE_CSHARP=1 but mcs or mono does not run"
        );
        support::skip(TEST, "Mono's mcs and mono are not installed");
        return;
    }
    let Some(mut db) = TestDatabase::new(TEST).await else {
        return;
    };
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("csharp-{}", db.name));
    std::fs::create_dir_all(&dir).unwrap();
    let program = compile(&dir);

    // Deployed as a pipeline would, by the binary.
    let deploy = tokio(fencepost_on(&db.ado(), ["migrate"])).output().await.unwrap();
    assert!(deploy.status.success(), "{}{}", stdout(&deploy), stderr(&deploy));
    let service = db.login_in_role(Some("fence_service")).await;
    if db.is_babelfish().await {
        // Babelfish does not chain ownership: EXECUTE alone reaches the
        // tables only once the procedures are SECURITY DEFINER.
        let Some(postgres) = postgres_or_skip(TEST) else {
            db.drop().await;
            return;
        };
        run_security_definer_script(&postgres, &db.name);
    }

    let run = tokio::process::Command::new("mono")
        .arg(&program)
        .arg(&service)
        .arg("report:daily")
        .kill_on_drop(true)
        .output()
        .await
        .expect("run mono");
    let (out, err) = (
        String::from_utf8_lossy(&run.stdout).into_owned(),
        String::from_utf8_lossy(&run.stderr).into_owned(),
    );
    assert!(run.status.success(), "the example failed:\n{out}{err}");
    let mut lines = out.lines();
    let deployed = fencepost::client::CONTRACT_VERSION;
    let contract = format!("contract: {}.{}", deployed.major, deployed.minor);
    assert_eq!(lines.next(), Some(contract.as_str()), "stderr:\n{err}");
    assert_eq!(lines.collect::<Vec<_>>(), EXPECTED, "stderr:\n{err}");
    let _ = std::fs::remove_dir_all(&dir);
    db.drop().await;
}
