//! Standard error for the agent's log lines and last words. A reader that went away
//! (`2>&1 | head -1`) ends nothing: std's `eprintln!` panics when its write fails, and
//! tracing-subscriber reports a failed write with `eprintln!`, so an act run piped into
//! `head -1` exited 101 instead of with its command's status.
use std::{
    fmt::Display,
    io::{self, Write},
};

/// Standard error, dropping what is written once its reader has gone away.
pub struct Quiet;

/// `r`, with a reader gone away taken as `gone`.
fn unless_gone<T>(r: io::Result<T>, gone: T) -> io::Result<T> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(gone),
        other => other,
    }
}

impl Write for Quiet {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        unless_gone(io::stderr().write(buf), buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        unless_gone(io::stderr().flush(), ())
    }
}

/// One line on standard error, where anyone still reads it. Last words: a failure to write
/// them has nowhere else to go.
pub fn line(text: impl Display) {
    let _ = writeln!(Quiet, "{text}");
}
