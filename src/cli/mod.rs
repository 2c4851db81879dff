//! The command-line front end: parses flags, calls the library, renders
//! results and picks the exit status.

mod bench;
mod check;
mod migrate;
mod opt;
mod script;
mod status;

use std::path::Path;

use anyhow::{Context, Result, bail};
use fencepost::ConnectionString;
use fencepost::deploy::Sources;

pub use opt::Options;
use opt::{Command, ConnectArgs};

/// Success, or nothing to report.
pub const EXIT_OK: u8 = 0;
/// Something needs attention (pending or drifted objects, audit findings).
pub const EXIT_ATTENTION: u8 = 1;
/// An error: bad input, unreachable server, failed deploy, could not verify.
pub const EXIT_ERROR: u8 = 2;

/// Runs one command and returns its exit status.
pub async fn run(options: Options) -> Result<u8> {
    match options.command {
        Command::Migrate(args) => migrate::run(args).await,
        Command::Status(args) => status::run(args).await,
        Command::Script(args) => script::run(args),
        Command::Check(args) => check::run(args).await,
        Command::Bench(args) => bench::run(args).await,
    }
}

/// The connection string from the flag or the environment, parsed, with the
/// access token from --access-token-file or FENCEPOST_ACCESS_TOKEN if given.
fn connection_string(args: &ConnectArgs) -> Result<ConnectionString> {
    let Some(ado) = args.connection.as_deref() else {
        bail!("no connection given: pass --connection \"Server=...;Database=...\" or set FENCEPOST_CONNECTION");
    };
    let mut target = ConnectionString::parse(ado)?;
    let token = match &args.access_token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the access token from {}", path.display()))?,
        ),
        None => std::env::var(ACCESS_TOKEN_ENV).ok().filter(|t| !t.trim().is_empty()),
    };
    if let Some(token) = token {
        target.set_access_token(&token)?;
    }
    Ok(target)
}

/// The variable that may hold a Microsoft Entra ID access token.
const ACCESS_TOKEN_ENV: &str = "FENCEPOST_ACCESS_TOKEN";

/// Opens a connection for a deploy: no per-call timeout, since waiting for
/// another deployment's lock or a long migration is expected.
async fn connect(args: &ConnectArgs) -> Result<(ConnectionString, fencepost::Connection)> {
    let mut target = connection_string(args)?;
    target.set_command_timeout(None);
    target.set_application_name("fencepost");
    let conn = target.connect().await?;
    Ok((target, conn))
}

/// The embedded T-SQL, or the folder given with --source-dir.
fn sources(source_dir: Option<&Path>) -> Result<Sources> {
    match source_dir {
        None => Sources::embedded().context("the T-SQL built into this binary is invalid"),
        Some(dir) => Sources::from_dir(dir).with_context(|| format!("reading T-SQL from {}", dir.display())),
    }
}
