//! Deployed databases made ahead of the tests that need one. A deploy on a
//! new Babelfish session spends about a second warming the engine's parser
//! before the procedures themselves; a test that deployed its own database
//! paid that, and the whole deploy, before its first step. A filler process
//! instead keeps a few databases deployed on one long-lived session, in
//! the engine's idle time while other tests wait on their leases, and a test
//! takes one: the same sources, deployed by the same login with the same
//! runner, so nothing a test can observe of its database changes, but the
//! deploy is off its path.
//!
//! The filler is this test binary run once more, on its hidden test
//! `live::deploy_pool::fill`, started by the run's first test that asks for a deployed
//! database (that test deploys its own). Everything it shares with the tests
//! is a directory of the run's, `fp_pool_<run>` under the target's
//! temporary directory: `<database>.ready` is a database any test may take,
//! and taking it is renaming that file, which one process wins. The
//! databases are named `fp_<runner pid>_pool_<n>`, so the sweep of leftovers
//! drops them once the run is over. The filler stops when the run ends or
//! when no test has taken a database for a while, and drops the databases
//! nobody took; until then it holds `filler.lock`, which the check for
//! leftovers after the suite waits on. A test that finds none ready deploys
//! its own as before, so the pool only ever saves time.
//! `FENCEPOST_TEST_DEPLOY_POOL=0` turns it off.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The filler's name as a test of this binary.
const FILLER: &str = "live::deploy_pool::fill";

/// The variables that tell a run of this binary it is the filler.
pub const POOL_DIR_ENV: &str = "FENCEPOST_TEST_POOL_DIR";
pub const RUNNER_ENV: &str = "FENCEPOST_TEST_POOL_RUNNER";

/// What a deploy leaves its session with (the runner's session options):
/// a test's statements on its own session ran after its deploy, so they run
/// after these on a database from the pool.
pub(super) const DEPLOYED_SESSION_OPTIONS: &str = "SET ANSI_NULLS, ANSI_PADDING, ANSI_WARNINGS, ANSI_NULL_DFLT_ON, \
     ARITHABORT, CONCAT_NULL_YIELDS_NULL, QUOTED_IDENTIFIER ON; SET NUMERIC_ROUNDABORT, IMPLICIT_TRANSACTIONS OFF; \
     SET XACT_ABORT ON;";

/// The test runner's pid: the parent of every test process of a run.
fn runner() -> u32 {
    std::os::unix::process::parent_id()
}

/// The run's pool directory under the target's temporary directory:
/// `fp_pool_<run>`, the runner's id for the run where it gives one (nextest
/// does), else its pid.
fn run_dir() -> PathBuf {
    let run = std::env::var("NEXTEST_RUN_ID").unwrap_or_else(|_| runner().to_string());
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fp_pool_{run}"))
}

/// A database of the pool, taken for this test; or `None` when none is
/// ready (the caller deploys its own), after starting the run's filler if
/// nobody has yet.
pub(super) fn take() -> Option<String> {
    // Only the test binary has the filler in it (a bench shares this module).
    if !cfg!(test) || std::env::var("FENCEPOST_TEST_DEPLOY_POOL").as_deref() == Ok("0") {
        return None;
    }
    let dir = run_dir();
    if let Some(name) = take_ready(&dir) {
        return Some(name);
    }
    start_filler(&dir);
    None
}

/// Renames the first `<database>.ready` this process can to `.taken`.
fn take_ready(dir: &Path) -> Option<String> {
    let mut ready: Vec<PathBuf> = fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "ready"))
        .collect();
    ready.sort();
    ready.into_iter().find_map(|path| {
        let name = path.file_stem()?.to_str()?.to_owned();
        fs::rename(&path, path.with_extension("taken")).ok().map(|()| name)
    })
}

/// Starts the filler, once per run: whoever creates `filler.started` first.
fn start_filler(dir: &Path) {
    if fs::create_dir_all(dir).is_err() {
        return;
    }
    let started = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join("filler.started"));
    if started.is_err() {
        return;
    }
    let (Ok(exe), Ok(log)) = (std::env::current_exe(), File::create(dir.join("filler.log"))) else {
        return;
    };
    let Ok(log_too) = log.try_clone() else { return };
    use std::os::unix::process::CommandExt;
    let spawned = std::process::Command::new(exe)
        .args([FILLER, "--exact", "--ignored", "--nocapture", "--test-threads", "1"])
        .env(POOL_DIR_ENV, dir)
        .env(RUNNER_ENV, runner().to_string())
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log_too)
        // A group of its own: the runner ends a test's group with the test.
        .process_group(0)
        .spawn();
    if let Err(e) = spawned {
        let _ = writeln!(std::io::stderr(), "warning: the deploy pool did not start: {e}");
    }
}

/// Waits until no filler of an earlier run still holds its lock, so that the
/// databases it is dropping are gone before anyone counts leftovers.
pub fn wait_for_fillers() {
    let Ok(entries) = fs::read_dir(env!("CARGO_TARGET_TMPDIR")) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let is_pool = entry.file_name().to_str().is_some_and(|n| n.starts_with("fp_pool_"));
        if is_pool && let Ok(lock) = File::open(entry.path().join("filler.lock")) {
            let _ = lock.lock();
        }
    }
}
