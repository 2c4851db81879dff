//! The `fencepost` command: deploy, inspect and audit the fence.

mod cli;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

fn main() -> ExitCode {
    end_quietly_on_a_closed_pipe();
    let matches = cli::Options::command().version(cli::version()).get_matches();
    let options = cli::Options::from_arg_matches(&matches).unwrap_or_else(|error| error.exit());
    cli::init_logging(&options);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("fencepost: cannot start the async runtime: {error}");
            return ExitCode::from(cli::EXIT_ERROR);
        }
    };
    let on_failure = cli::FailureDocument::of(&options.command);
    match runtime.block_on(cli::run(options)) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            if let Some(document) = on_failure {
                println!("{}", document.render(&error));
            }
            eprintln!("fencepost: {}", cli::failure::one_line(&error));
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}

/// Rust ignores SIGPIPE, so printing to a pipe whose reader left (`fencepost
/// script | head`) would panic; the default action ends the command quietly,
/// as it does other Unix tools.
fn end_quietly_on_a_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: sets the signal's action to its default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
