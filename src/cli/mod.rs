//! The command-line front end: parses flags, calls the library, renders
//! results and picks the exit status.

#[cfg(feature = "artifacts")]
mod artifact;
mod bench;
mod check;
mod config;
mod deploy_history;
pub mod failure;
mod lease;
mod migrate;
mod opt;
pub mod out;
mod reference;
mod rights;
mod script;
mod selftest;
mod status;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result, bail};
use fencepost::ConnectionString;
use fencepost::source::Sources;

pub use opt::Options;
use opt::{Command, ConnectArgs};
use reference::reference_markdown;

/// Success, or nothing to report.
pub const EXIT_OK: u8 = 0;
/// Something needs attention (pending or drifted objects, audit findings).
pub const EXIT_ATTENTION: u8 = 1;
/// An error: bad input, unreachable server, failed login, failed deploy.
pub const EXIT_ERROR: u8 = 2;

/// Set by `--quiet`: progress lines are not printed.
static QUIET: AtomicBool = AtomicBool::new(false);

/// The version `--version` prints: the crate's, and the procedure contract
/// it deploys and speaks.
pub fn version() -> String {
    format!(
        "{} (procedure contract {})",
        env!("CARGO_PKG_VERSION"),
        fencepost::client::CONTRACT_VERSION
    )
}

/// Sends log lines to stderr: warnings by default, more with each -v, only
/// errors with -q; FENCEPOST_LOG, an env-filter directive, overrides both.
pub fn init_logging(options: &Options) {
    QUIET.store(options.quiet, Ordering::Relaxed);
    let level = match (options.quiet, options.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("FENCEPOST_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("fencepost={level}")));
    let telemetry = match &options.command {
        Command::Bench(args) => bench::start_telemetry(args),
        _ => None,
    };
    let Some(telemetry) = telemetry else {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .without_time()
            .with_target(false)
            .try_init();
        return;
    };
    // `bench --telemetry`: the same log lines, the filter now the log
    // layer's own, beside the telemetry layer that records everything.
    use tracing_subscriber::prelude::*;
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .with_filter(filter);
    let _ = tracing_subscriber::registry()
        .with(log)
        .with(telemetry.layer())
        .try_init();
}

/// Whether --quiet was given.
fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// A progress line on stderr, unless --quiet.
pub fn progress(line: std::fmt::Arguments<'_>) {
    if !quiet() {
        eprintln!("{line}");
    }
}

/// The document a failed command prints on stdout, by its `--format`.
#[derive(Clone, Copy, Debug)]
pub enum FailureDocument {
    /// `{"error": {"kind", "message"}}`.
    Json,
    /// A JUnit report with one test case in error, for `command`.
    Junit(&'static str),
}

impl FailureDocument {
    /// The document `command` prints if it fails, when its format is one a
    /// pipeline parses.
    pub fn of(command: &Command) -> Option<FailureDocument> {
        use opt::{CheckFormat, Format};
        let json = match command {
            Command::Migrate(args) => args.format == Format::Json,
            Command::Status(args) => args.format == Format::Json,
            Command::Bench(args) => args.format == Format::Json,
            Command::Selftest(args) => match args.format {
                CheckFormat::Text => false,
                CheckFormat::Json => true,
                CheckFormat::Junit => return Some(FailureDocument::Junit("selftest")),
            },
            Command::Check(args) => match args.format {
                CheckFormat::Text => false,
                CheckFormat::Json => true,
                CheckFormat::Junit => return Some(FailureDocument::Junit("check")),
            },
            Command::Lease(lease) => lease.format() == Format::Json,
            #[cfg(feature = "artifacts")]
            Command::Artifact(artifact) => artifact.format() == Format::Json,
            Command::Script(_) | Command::Completions(_) | Command::Man(_) => false,
        };
        json.then_some(FailureDocument::Json)
    }

    /// The document for `error`.
    pub fn render(self, error: &anyhow::Error) -> String {
        match self {
            FailureDocument::Json => failure::json(error),
            FailureDocument::Junit(command) => failure::junit(command, error),
        }
    }
}

/// Runs one command and returns its exit status.
pub async fn run(options: Options) -> Result<u8> {
    match options.command {
        Command::Migrate(args) => migrate::run(args).await,
        Command::Status(args) => status::run(args).await,
        Command::Script(args) => script::run(args),
        Command::Check(args) => check::run(args).await,
        Command::Bench(args) => bench::run(args).await,
        Command::Selftest(args) => selftest::run(args).await,
        Command::Lease(command) => lease::run(command).await,
        #[cfg(feature = "artifacts")]
        Command::Artifact(command) => artifact::run(command).await,
        Command::Completions(args) => {
            let mut command = <Options as clap::CommandFactory>::command().version(version());
            let mut script = Vec::new();
            clap_complete::generate(args.shell, &mut command, "fencepost", &mut script);
            out::bytes(&script)?;
            Ok(EXIT_OK)
        }
        Command::Man(args) => {
            let command = <Options as clap::CommandFactory>::command().version(version());
            if args.markdown {
                out::bytes(reference_markdown(&command).as_bytes())?;
                return Ok(EXIT_OK);
            }
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            out::bytes(&page)?;
            Ok(EXIT_OK)
        }
    }
}

/// The connection string, parsed: from --connection, else from the variable
/// --environment names, else from FENCEPOST_CONNECTION; with the access token
/// from --access-token-file or FENCEPOST_ACCESS_TOKEN if given.
fn connection_string(args: &ConnectArgs) -> Result<ConnectionString> {
    let ado = match (&args.connection, &args.environment) {
        (Some(ado), _) => ado.clone(),
        (None, Some(name)) => {
            let environment = config::environment(args.config.as_deref(), name)?;
            let variable = &environment.connection_env;
            match std::env::var(variable) {
                Ok(ado) if !ado.trim().is_empty() => ado,
                _ => bail!("--environment {name} reads its connection string from {variable}, which is not set"),
            }
        }
        (None, None) => match std::env::var("FENCEPOST_CONNECTION") {
            Ok(ado) if !ado.trim().is_empty() => ado,
            _ => bail!(
                "no connection given: pass --connection \"Server=...;Database=...\", set FENCEPOST_CONNECTION, \
                 or name an --environment of fencepost.toml"
            ),
        },
    };
    let mut target = ConnectionString::parse(&ado)?;
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

/// The users --environment adds to the fence roles (none without one).
/// The principals --environment's `trusted` lists.
fn environment_trusted(args: &ConnectArgs) -> Result<Vec<String>> {
    match &args.environment {
        Some(name) => Ok(config::environment(args.config.as_deref(), name)?.trusted),
        None => Ok(Vec::new()),
    }
}

/// The rules --environment's `accept_unverifiable` lists, with the name to
/// record as having accepted them; an unknown id is an error.
fn environment_accepted(args: &ConnectArgs) -> Result<(String, Vec<fencepost::audit::Rule>)> {
    let Some(name) = &args.environment else {
        return Ok((String::new(), Vec::new()));
    };
    let ids = config::environment(args.config.as_deref(), name)?.accept_unverifiable;
    let rules = ids
        .iter()
        .map(|id| {
            opt::parse_rule(id).map_err(|reason| anyhow::anyhow!("environment {name}: accept_unverifiable: {reason}"))
        })
        .collect::<Result<_>>()?;
    Ok((format!("environment {name}"), rules))
}

fn environment_grants(args: &ConnectArgs) -> Result<Vec<fencepost::deploy::Grant>> {
    match &args.environment {
        Some(name) => config::environment(args.config.as_deref(), name)?.grants(name),
        None => Ok(Vec::new()),
    }
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
