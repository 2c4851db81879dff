//! The one way a test starts the `fencepost` binary.
//!
//! The binary reads its target from the environment: `FENCEPOST_CONNECTION`,
//! `FENCEPOST_ENVIRONMENT` (whose `fencepost.toml` entry names another
//! variable, and which wins over `FENCEPOST_CONNECTION`), and also
//! `FENCEPOST_ACCESS_TOKEN`, `FENCEPOST_LOG` and
//! `FENCEPOST_MIGRATION_LOCK_TIMEOUT`. A test run in a shell that exports any
//! of them must not deploy to, or bench against, that shell's environment:
//! every `FENCEPOST_*` variable the test process inherited is removed here,
//! and a test that uses a connection passes it with `--connection`. A test
//! that means to set one of them (to test precedence, say) sets it on the
//! returned command, after this cleared the rest.
//!
//! `COLUMNS` is fixed at 100, the width clap wraps `--help` at when stdout is
//! not a terminal, so help text does not depend on the caller's terminal.

use std::ffi::OsStr;
use std::process::{Command, Output};

/// The binary under test.
pub const PATH: &str = env!("CARGO_BIN_EXE_fencepost");

/// `fencepost ARGS`, with none of the caller's `FENCEPOST_*` variables.
pub fn fencepost<I, S>(args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = Command::new(PATH);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("FENCEPOST_") {
            command.env_remove(name);
        }
    }
    command.env("COLUMNS", "100").args(args);
    command
}

/// `fencepost ARGS --connection ADO`, with none of the caller's
/// `FENCEPOST_*` variables.
pub fn fencepost_on<I, S>(ado: &str, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut command = fencepost(args);
    command.arg("--connection").arg(ado);
    command
}

/// `command` for an async test, killed when the test drops it: a failed test
/// leaves no deploy or bench running behind it.
pub fn tokio(command: Command) -> tokio::process::Command {
    let mut command = tokio::process::Command::from(command);
    command.kill_on_drop(true);
    command
}

/// Runs `fencepost ARGS` ([`fencepost`]) to its end: what it printed and how
/// it exited.
pub fn run(args: &[&str]) -> Output {
    fencepost(args).output().expect("run fencepost")
}

/// What `output`'s command printed on stdout.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What `output`'s command printed on stderr.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
