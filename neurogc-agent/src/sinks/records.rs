//! The record stream as a sink: every record of a run, as JSON lines (`--json`) or a
//! compressed recording (`--record`).
use std::io::{self, Write};

use neurogc_trace::{Record, TraceWriter};

use crate::sinks::TargetSink;

/// Where the records go: the `--json` stream or a `.ngc` recording.
pub type Records = TraceWriter<Box<dyn Write>>;

impl TargetSink for Records {
    fn record(&mut self, rec: &Record) -> io::Result<()> {
        self.write(rec)?;
        if matches!(rec, Record::Attach(_)) {
            // Its own block at once: a recorder killed in its first second still leaves a
            // readable file.
            self.seal()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_due()
    }

    fn close(&mut self) -> io::Result<()> {
        self.seal()
    }
}
