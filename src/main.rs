//! The `fencepost` command: deploy, inspect and audit the fence.

mod cli;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};

fn main() -> ExitCode {
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
        // A reader that left early (`fencepost script | head -1`) took what it
        // wanted: nothing failed.
        Err(error) if cli::out::is_closed_pipe(&error) => ExitCode::from(cli::EXIT_OK),
        Err(error) => {
            if let Some(document) = on_failure {
                // A reader that left misses the document; the error still
                // goes to stderr.
                let _ = cli::out::line(document.render(&error));
            }
            eprintln!("fencepost: {}", cli::failure::one_line(&error));
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}
