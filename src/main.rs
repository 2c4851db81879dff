//! The `fencepost` command: deploy, inspect and audit the fence.

mod cli;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let options = cli::Options::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("fencepost: cannot start the async runtime: {error}");
            return ExitCode::from(cli::EXIT_ERROR);
        }
    };
    match runtime.block_on(cli::run(options)) {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            // {:#} prints the whole cause chain on one line.
            eprintln!("fencepost: {error:#}");
            ExitCode::from(cli::EXIT_ERROR)
        }
    }
}
