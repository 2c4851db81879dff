//! Everything the command writes on stdout, as writes that can fail.
//!
//! `print!` panics when stdout is gone, so a reader that leaves early
//! (`fencepost script | head -1`) would end the command with a panic, or,
//! with SIGPIPE at its default, with the signal. Here each write returns its
//! error instead; `main` ends quietly, with status 0, on a
//! [`BrokenPipe`](io::ErrorKind::BrokenPipe) anywhere in the chain.

use std::fmt::Display;
use std::io::{self, Write};

/// Writes `text` to stdout, as it is.
pub fn print(text: impl Display) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    write!(stdout, "{text}")?;
    // Flushed now, so a closed pipe is this write's error, not one the
    // exit drops.
    stdout.flush()
}

/// Writes `text` and a line break to stdout.
pub fn line(text: impl Display) -> io::Result<()> {
    print(format_args!("{text}\n"))
}

/// Writes `bytes` to stdout, as they are.
pub fn bytes(bytes: &[u8]) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout.write_all(bytes)?;
    stdout.flush()
}

/// Whether `error` is, or was caused by, writing to a pipe whose reader left.
pub fn is_closed_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<io::Error>())
        .any(|e| e.kind() == io::ErrorKind::BrokenPipe)
}
