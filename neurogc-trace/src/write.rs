//! Writes records, as JSON lines or as a `.ngc` recording: the same lines, in blocks that are
//! each one zstd frame with a checksum. A frame decodes on its own, so a recorder killed at any
//! instant, or stopped by a full disk, leaves every block before the last readable; and the
//! file as a whole is a valid zstd stream: `zstdcat trace.ngc | jq` reads it.
use std::{
    io::{self, Write},
    time::{Duration, Instant},
};

use crate::record::Record;

/// A block is sealed when it holds this much JSON…
pub const BLOCK_BYTES: usize = 1 << 20;
/// …or when its first record is this old: a killed recorder loses at most this much.
pub const BLOCK_AGE: Duration = Duration::from_secs(1);
/// zstd's default level: ≈ 12 bytes a collection on real recordings, at a few % of one core.
const LEVEL: i32 = 3;

pub struct TraceWriter<W: Write> {
    out: W,
    zstd: Option<zstd::bulk::Compressor<'static>>,
    block: Vec<u8>,
    opened: Option<Instant>,
}

impl<W: Write> TraceWriter<W> {
    /// Plain JSON lines, written out at every [`TraceWriter::flush_due`].
    pub fn json_lines(out: W) -> Self {
        TraceWriter { out, zstd: None, block: Vec::new(), opened: None }
    }

    /// A `.ngc` recording.
    pub fn zstd(out: W) -> io::Result<Self> {
        let mut c = zstd::bulk::Compressor::new(LEVEL)?;
        c.include_checksum(true)?;
        c.include_contentsize(true)?;
        Ok(TraceWriter { out, zstd: Some(c), block: Vec::with_capacity(BLOCK_BYTES + 4096), opened: None })
    }

    pub fn write(&mut self, record: &Record) -> io::Result<()> {
        self.opened.get_or_insert_with(Instant::now);
        serde_json::to_writer(&mut self.block, record)?;
        self.block.push(b'\n');
        if self.block.len() >= BLOCK_BYTES { self.seal() } else { Ok(()) }
    }

    /// Called after each batch of records: JSON lines go out now, a recording's block when it is
    /// old enough.
    pub fn flush_due(&mut self) -> io::Result<()> {
        match (&self.zstd, self.opened) {
            (Some(_), Some(t)) if t.elapsed() < BLOCK_AGE => Ok(()),
            _ => self.seal(),
        }
    }

    /// Writes the open block out, whatever its age (at the end of a run).
    pub fn seal(&mut self) -> io::Result<()> {
        self.opened = None;
        if !self.block.is_empty() {
            match &mut self.zstd {
                Some(c) => {
                    let frame = c.compress(&self.block)?;
                    self.out.write_all(&frame)?;
                }
                None => self.out.write_all(&self.block)?,
            }
            self.block.clear();
        }
        self.out.flush()
    }

    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }
}
